"""The repository itself: no large file slips in, and every coordinator rule id it uses anywhere is
explained in docs/coordinator-rules.md, whose Tests lines match the test tree."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.support import rules_doc

ROOT = Path(__file__).resolve().parent.parent

# Tracked files allowed over MAX_FILE_BYTES, each with the reason. Wheels, jars, data sets and
# pictures of tools belong in caches outside the repository, not here.
LARGE_FILES_ALLOWED: dict[str, str] = {}
MAX_FILE_BYTES = 1_000_000


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [os.fsdecode(name) for name in out.split(b"\0") if name]


def test_no_tracked_file_is_over_1_mb_unless_listed() -> None:
    large = {name: (ROOT / name).stat().st_size for name in tracked_files() if (ROOT / name).is_file()}
    large = {name: size for name, size in large.items() if size > MAX_FILE_BYTES and name not in LARGE_FILES_ALLOWED}
    assert not large, f"tracked files over 1 MB (keep them out, or list them in LARGE_FILES_ALLOWED with why): {large}"


# -- the coordinator's rules ------------------------------------------------------------------------

PAGE_RULES = rules_doc.rules(rules_doc.PAGE.read_text())
FAMILIES = sorted({rule.split("-")[0] for rule in PAGE_RULES})


def test_the_rules_page_lists_every_rule_with_a_sentence_and_its_tests() -> None:
    assert len(PAGE_RULES) >= 160
    for rule, (sentence, tests) in PAGE_RULES.items():
        assert sentence.endswith(".") and len(sentence.split()) >= 6, f"{rule}: one whole sentence"
        assert tests and not tests.startswith("none: (say why"), f"{rule}: its tests, or why it has none"


def test_the_rules_page_tests_lines_match_the_test_tree() -> None:
    text = rules_doc.PAGE.read_text()
    assert rules_doc.render(text) == text, "docs/coordinator-rules.md is out of date: python -m tests.support.rules_doc --write"


def test_every_test_named_after_a_rule_names_a_rule_of_the_page() -> None:
    unknown = sorted(set(rules_doc.tests_by_rule()) - set(PAGE_RULES))
    assert not unknown, f"tests named after rules docs/coordinator-rules.md does not list: {unknown}"


def test_every_rule_id_used_anywhere_is_explained_on_the_page() -> None:
    """In any tracked text file, an id of a family the page uses; in README and docs/, any
    two-letter id (a new family too)."""
    family_id = re.compile(rf"\b(?:{'|'.join(FAMILIES)})-\d+\b")
    any_id = re.compile(r"\b[A-Z]{2}-\d+\b")
    pages = {"README.md", *(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))}
    unexplained: dict[str, set[str]] = {}
    for name in sorted(set(tracked_files()) | pages):
        path = ROOT / name
        try:
            text = path.read_text()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue
        ids = set((any_id if name in pages else family_id).findall(text)) - set(PAGE_RULES)
        if ids:
            unexplained[name] = ids
    assert not unexplained, f"rule ids not on docs/coordinator-rules.md: {unexplained}"
