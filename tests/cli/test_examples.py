"""The example grammars in grammars/, their committed artifacts in artifacts/ (built by
`grammarc build` from grammarc.toml), and `check` and `sample` on every one of them."""

from __future__ import annotations

import ast

import pytest
from helpers import run_cli as run
from test_cli import ROOT

import grammarc
from grammarc.cli.build import read_manifest

TARGETS = read_manifest(ROOT / "grammarc.toml")


def test_the_manifest_covers_every_example_regex_and_the_readme_schema():
    sources = {t.source.name for t in TARGETS}
    regexes = {p.name for p in (ROOT / "grammars").glob("*.regex")}
    assert sources == regexes | {"person.schema.json"} and len(regexes) >= 5


def test_committed_artifacts_are_up_to_date():
    """`grammarc build --check` on the project's own manifest (run `grammarc build` to fix)."""
    result = run("build", "--check", cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == f"{len(TARGETS)} up to date"


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.output.name)
def test_sample_and_check_every_example(target):
    grammar = grammarc.load(target.output)
    result = run("sample", str(target.output), "-n", "4", "--seed", "3", "--max-tokens", "24")
    assert result.returncode == 0, result.stderr
    samples = [ast.literal_eval(line) if line[:1] in "'\"" else line
               for line in result.stdout.splitlines()]
    assert len(samples) == 4 and all(grammar.matches(s) for s in samples), samples
    longest = max(samples, key=len)
    check = run("check", str(target.output), "-", input=longest + "E")  # no example allows E
    lines = check.stdout.splitlines()
    assert check.returncode == 1 and lines[0].startswith("no: unexpected 'E' at "), lines
    assert lines[1].startswith("  matched: ") and lines[1].endswith(repr(longest[-60:]))
    assert lines[2].startswith("  expected: ")
