"""README.md and every page of docs/ as a user reads them: each python example runs as written,
links stay inside the repository, the README stays a front page, and no page speaks of how the
project is made.

Every ```python block is written to a file and run by this venv's Python in a fresh directory,
with a timeout. A block that names `127.0.0.1:9092` (written for a broker a user started with
`kaflet serve`) runs against a broker process of its own, whose address replaces that string;
this suite never uses port 9092 itself. A block whose first line says which flags that broker
needs, "# Against `kaflet serve FLAGS` on 127.0.0.1:9092", gets a broker started with them.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from broker.embed import BrokerProcess

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
SERVE_ADDRESS = "127.0.0.1:9092"
TIMEOUT_S = 120
SPARK_TIMEOUT_S = 400  # a Spark session's JVM start and first job, on a busy 2-core machine
README_MAX_LINES = 300
SERVE_FLAGS = re.compile(r"^# Against `kaflet serve ([^`]*)` on 127\.0\.0\.1:9092")


def python_blocks(path: Path) -> list[tuple[str, str]]:
    """(where: the page, its line and the heading above, code) of every ```python block."""
    blocks = []
    heading = "top"
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        if line.strip() == "```python":
            start = i + 1
            end = next(j for j in range(start, len(lines)) if lines[j].strip() == "```")
            blocks.append((f"{path.relative_to(ROOT)}:{start} ({heading})", "\n".join(lines[start:end]) + "\n"))
            i = end
        i += 1
    return blocks


BLOCKS = [block for doc in DOCS for block in python_blocks(doc)]
SPARK_DOC = ROOT / "docs" / "spark.md"


def test_the_pages_have_python_examples() -> None:
    assert len(python_blocks(README)) >= 3
    assert len(python_blocks(SPARK_DOC)) >= 2
    assert len(BLOCKS) >= 20


@pytest.mark.parametrize(("where", "code"), BLOCKS, ids=[where.split(" (")[0] for where, _ in BLOCKS])
def test_a_python_block_runs_as_written(tmp_path: Path, where: str, code: str) -> None:
    broker = None
    if SERVE_ADDRESS in code:
        flags = SERVE_FLAGS.match(code)
        args = shlex.split(flags.group(1)) if flags else []
        broker = BrokerProcess(tmp_path / "broker-data", "--offsets-partitions", "5", *args).start()
        code = code.replace(SERVE_ADDRESS, broker.bootstrap)
    script = tmp_path / "example.py"
    script.write_text(code)
    timeout = SPARK_TIMEOUT_S if "import pipeline" in code else TIMEOUT_S
    # as a user runs it: without this suite's own pytest options (a pytest example would take them)
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    if "import pipeline" in code:  # the JVM settings of the suite's own Spark session (tests/pipeline/conftest.py)
        env["JAVA_TOOL_OPTIONS"] = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    try:
        done = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env
        )
    finally:
        if broker is not None:
            broker.close()
    assert done.returncode == 0, f"the block at {where} failed:\n{code}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr[-4000:]}"


def test_no_example_is_fenced_as_text() -> None:
    """Examples are python (run above) or shell; a block fenced as text would escape the test."""
    fenced = [
        f"{doc.relative_to(ROOT)}:{n}"
        for doc in DOCS
        for n, line in enumerate(doc.read_text().splitlines(), 1)
        if line.strip() == "```text"
    ]
    assert not fenced, fenced


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("doc", [*DOCS, ROOT / "bench" / "README.md"], ids=lambda p: str(p.relative_to(ROOT)))
def test_links_point_at_files_in_the_repository(doc: Path) -> None:
    for target in LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        resolved = (doc.parent / target).resolve()
        assert resolved.is_relative_to(ROOT), f"{doc.name} links outside the repository: {target}"
        assert resolved.exists(), f"{doc.name} links to a missing file: {target}"


def test_the_readme_is_a_front_page_that_links_every_docs_page() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES, "README.md is a front page: move detail into docs/"
    missing = [p.name for p in DOCS[1:] if f"](docs/{p.name})" not in text]
    assert not missing, f"the README's contents table does not link: {missing}"


# What the pages must never speak of: the project's own process, or files a clone does not have.
PROCESS_LANGUAGE = [
    r"\bissues? \d+",  # kaflet's own; an upstream project's is written "librdkafka's issue #3645"
    r"when this was written",
    r"report what you find",
    r"bench machine",
    r"\b(this|previous|the) session's\b",
    r"\bengineers?\b",
    r"shared/reference",
    r"planning documents",
    r"\bthe day's\b",
]


@pytest.mark.parametrize("doc", [*DOCS, ROOT / "bench" / "README.md"], ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_speak_to_users_only(doc: Path) -> None:
    text = doc.read_text()
    found = [m.group(0) for pattern in PROCESS_LANGUAGE for m in re.finditer(pattern, text, re.I)]
    assert not found, f"{doc.name} speaks of how kaflet is made: {found}"
