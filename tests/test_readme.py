"""README.md's examples run as written, and its links stay inside the repository.

Every ```python block is written to a file and run by this venv's Python in a fresh directory,
with a timeout. A block that names `127.0.0.1:9092` (the quick starts, written for a broker a
user started with `kaflet serve`) runs against a broker process of its own, whose address
replaces that string; this suite never uses port 9092 itself.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from broker.embed import BrokerProcess

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SERVE_ADDRESS = "127.0.0.1:9092"
TIMEOUT_S = 90


def python_blocks(text: str) -> list[tuple[str, str]]:
    """(heading above it + line number, code) of every ```python block."""
    blocks = []
    heading = "top"
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        if line.strip() == "```python":
            start = i + 1
            end = next(j for j in range(start, len(lines)) if lines[j].strip() == "```")
            blocks.append((f"{heading} (line {start})", "\n".join(lines[start:end]) + "\n"))
            i = end
        i += 1
    return blocks


BLOCKS = python_blocks(README.read_text())


def test_the_readme_has_python_examples() -> None:
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize(("where", "code"), BLOCKS, ids=[where for where, _ in BLOCKS])
def test_a_readme_python_block_runs_as_written(tmp_path: Path, where: str, code: str) -> None:
    broker = None
    if SERVE_ADDRESS in code:
        broker = BrokerProcess(tmp_path / "broker-data", "--offsets-partitions", "5").start()
        code = code.replace(SERVE_ADDRESS, broker.bootstrap)
    script = tmp_path / "example.py"
    script.write_text(code)
    try:
        done = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    finally:
        if broker is not None:
            broker.close()
    assert done.returncode == 0, f"README block at {where} failed:\n{code}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr[-4000:]}"


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("doc", ["README.md", "bench/README.md", "docs/coordinator-rules.md", "docs/decisions.md"])
def test_links_point_at_files_in_the_repository(doc: str) -> None:
    path = ROOT / doc
    for target in LINK.findall(path.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        resolved = (path.parent / target).resolve()
        assert resolved.is_relative_to(ROOT), f"{doc} links outside the repository: {target}"
        assert resolved.exists(), f"{doc} links to a missing file: {target}"
    assert "shared/reference" not in path.read_text(), f"{doc} points at the planning documents, which a clone does not have"
