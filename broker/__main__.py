import sys

from broker.cli import main

sys.exit(main(serve_by_default=True))
