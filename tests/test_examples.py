"""The example grammars in grammars/ and their committed artifacts in artifacts/."""

from __future__ import annotations

from pathlib import Path

import pytest

import grammarc

ROOT = Path(__file__).resolve().parent.parent
REGEX_FILES = sorted((ROOT / "grammars").glob("*.regex"))


def test_there_are_examples():
    assert len(REGEX_FILES) >= 5


@pytest.mark.parametrize("source", REGEX_FILES, ids=lambda p: p.name)
def test_committed_artifact_is_up_to_date(source: Path, smollm2, tmp_path):
    """Rebuilding an example gives the committed file, byte for byte (see README to rebuild)."""
    committed = ROOT / "artifacts" / (source.name.removesuffix(".regex") + ".safetensors")
    assert committed.is_file(), f"missing {committed.relative_to(ROOT)}"
    rebuilt = tmp_path / committed.name
    grammarc.compile(source, smollm2).save(rebuilt)
    assert rebuilt.read_bytes() == committed.read_bytes(), \
        f"{committed.relative_to(ROOT)} is stale; rebuild it as the README says"
