"""Every command of the README's and docs' `bash` blocks runs as written.

The `grammarc` and `mkdir` lines of each document run in order, in a scratch copy of the
repository's example files (`grammars/`, `artifacts/`, `grammarc.toml`), with the SmolLM2
tokenizer; each must exit 0, or 1 with a `check` verdict ("no: ..."), never with an error.
Lines that run other programs (the install commands, which CI itself runs as `.ci/run`, and
Graphviz's `dot`) are the reader's environment and are not run here. Synopses with
placeholders are `text` blocks, not `bash`. `grammarc generate` lines load the model: slow.
A document's commands depend on the ones before them: the README's test command runs each test
file on one pytest-xdist worker, in order (`--dist loadfile`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = ("grammarc ", "mkdir ")


def _commands(doc: Path) -> list[str]:
    """The runnable commands of a document's bash blocks, continuation lines joined."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", doc.read_text(), re.S):
        for command in block.replace("\\\n", " ").splitlines():
            if command.startswith(RUN):
                commands.append(command)
    return commands


CASES = [pytest.param(doc, i, command, id=f"{doc.name}:{i}",
                      marks=[pytest.mark.slow] if command.startswith("grammarc generate") else [])
         for doc in DOCS for i, command in enumerate(_commands(doc))]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Path]:
    """A scratch copy of the example files per document (its commands share it)."""
    folders = {}
    for doc in DOCS:
        folder = tmp_path_factory.mktemp(doc.stem)
        shutil.copytree(ROOT / "grammars", folder / "grammars")
        shutil.copytree(ROOT / "artifacts", folder / "artifacts")
        shutil.copy2(ROOT / "grammarc.toml", folder / "grammarc.toml")
        folders[doc] = folder
    return folders


def test_the_documents_have_commands():
    assert len(CASES) >= 20 and {c.values[0] for c in CASES} >= {ROOT / "README.md"}


@pytest.mark.parametrize("doc, index, command", CASES)
def test_documented_command_runs(doc: Path, index: int, command: str,
                                 scratch: dict[Path, Path]) -> None:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(["bash", "-c", command], cwd=scratch[doc], env=env,
                            capture_output=True, text=True, timeout=600)
    verdict = result.returncode == 1 and command.startswith("grammarc check") \
        and result.stdout.startswith("no:")
    assert result.returncode == 0 or verdict, \
        f"{doc.name}: {command}\n{result.stdout}{result.stderr}"


def test_ci_runs_the_readme_test_command():
    """CI runs the README's test command as written (its options, pytest-xdist's, included),
    so that the README's time of the test run is CI's."""
    readme = (ROOT / "README.md").read_text()
    test_lines = [line for block in re.findall(r"```bash\n(.*?)```", readme, re.S)
                for line in block.splitlines() if "python -m pytest" in line]
    assert len(test_lines) == 1, test_lines
    test_command = test_lines[0].rsplit("&& ", 1)[1].strip()
    ci_lines = [line.split("#")[0].strip()
                for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci_lines, (test_command, ci_lines)
