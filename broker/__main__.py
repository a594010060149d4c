"""`python -m broker` (serves by default) and the `kaflet` command."""

import gc
import sys


def run(serve_by_default: bool = False) -> int:
    # Start-up allocates a great many long-lived objects (modules, classes, functions) and frees
    # few, so the cyclic collector's passes over them are wasted work (4-7 ms measured on the way
    # to the ready line). It is off until then: broker.server.serve_until_signalled freezes what
    # start-up built (never scanned again) and turns it back on; other commands turn it on at once.
    gc.disable()
    try:
        from broker.cli import main

        return main(serve_by_default=serve_by_default)
    finally:
        gc.enable()


def console() -> int:
    """The `kaflet` console script: usage when called without a command."""
    return run()


if __name__ == "__main__":
    sys.exit(run(serve_by_default=True))
