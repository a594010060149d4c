"""docs/coordinator-rules.md's "Tests" lines, written from the test tree.

Each rule of the page is a bullet `- **JG-7** <one sentence>` followed by a line
`  Tests: <file>: <test>, <test>; <file>: ...` listing every test function named after the rule
(`test_jg_7_...`, the first rule id in the name) and every scenario of the differential suite
against Kafka 4.4 that pins it (tests/differential/scenarios/, `rule="JG-7"`; a scenario run at
several versions, `<name>_v<N>`, is listed once as `<name>_v*`). A rule with no such test keeps a
hand-written line `  Tests: none: <why>`.

    python -m tests.support.rules_doc            # exit 1 and a diff when the page is out of date
    python -m tests.support.rules_doc --write    # rewrite the Tests lines
"""

from __future__ import annotations

import ast
import difflib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "coordinator-rules.md"
TESTS = ROOT / "tests"

RULE = re.compile(r"^- \*\*([A-Z]{2}-\d+)\*\* (.+)$")
TESTS_LINE = re.compile(r"^  Tests: (.*)$")
TEST_NAME = re.compile(r"^test_([a-z]{2})_(\d+)[a-z]?_", re.I)
# More rule ids right after the first (`test_ks_8_ks_18_...`): the test pins each of them.
MORE_RULES = re.compile(r"^([a-z]{2})_(\d+)[a-z]?_", re.I)


def rules(text: str) -> dict[str, tuple[str, str]]:
    """rule id -> (its sentence, its Tests line's content) as the page has them."""
    out: dict[str, tuple[str, str]] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = RULE.match(line)
        if m:
            following = TESTS_LINE.match(lines[i + 1]) if i + 1 < len(lines) else None
            out[m.group(1)] = (m.group(2), following.group(1) if following else "")
    return out


def tests_by_rule() -> dict[str, dict[str, list[str]]]:
    """rule id -> {test file relative to tests/: [test function or scenario names]}, from every
    test module and every differential scenario."""
    found: dict[str, dict[str, list[str]]] = {}
    listed = rules(PAGE.read_text())
    for path in sorted(TESTS.rglob("test_*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                m = TEST_NAME.match(node.name)
                rest = node.name
                while m:
                    rule = f"{m.group(1).upper()}-{int(m.group(2))}"
                    names = found.setdefault(rule, {}).setdefault(str(path.relative_to(TESTS)), [])
                    if node.name not in names:
                        names.append(node.name)
                    rest = rest[m.end() :]
                    m = MORE_RULES.match(rest)
                    if m and f"{m.group(1).upper()}-{int(m.group(2))}" not in listed:  # words, not a rule id
                        m = None
    for rule, where, name in differential_scenarios():
        names = found.setdefault(rule, {}).setdefault(where, [])
        if name not in names:
            names.append(name)
    return found


def differential_scenarios() -> list[tuple[str, str, str]]:
    """(rule, scenario module relative to tests/, scenario name) of every differential scenario
    named after a rule, versions folded (`jg_1_..._v*`)."""
    from tests.differential.scenarios import FAMILIES

    out = []
    for family in FAMILIES:
        where = str(Path(family.__file__).relative_to(TESTS))
        for scenario in family.scenarios.scenarios:
            if scenario.rule is not None:
                out.append((scenario.rule, where, re.sub(r"_v\d+$", "_v*", scenario.name)))
    return out


def tests_line(by_file: dict[str, list[str]]) -> str:
    return "; ".join(f"`{f}`: " + ", ".join(f"`{n}`" for n in names) for f, names in sorted(by_file.items()))


def render(text: str) -> str:
    """The page with every Tests line rewritten from the test tree (hand-written reasons kept)."""
    found = tests_by_rule()
    lines = text.splitlines()
    out: list[str] = []
    for i, line in enumerate(lines):
        if TESTS_LINE.match(line) and i > 0 and (m := RULE.match(lines[i - 1])):
            rule = m.group(1)
            current = TESTS_LINE.match(line).group(1)  # type: ignore[union-attr]
            if rule in found:
                out.append("  Tests: " + tests_line(found[rule]))
            elif current.startswith("none: "):
                out.append(line)
            else:
                out.append("  Tests: none: (say why this rule has no test of its own)")
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    text = PAGE.read_text()
    new = render(text)
    if "--write" in argv:
        PAGE.write_text(new)
        return 0
    if new != text:
        sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True), str(PAGE), "regenerated"))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
