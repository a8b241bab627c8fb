"""Machines kept per vocabulary (`alignment.machines`): a compile that takes a called
machine's entries from the cache, in memory or on disk, gives exactly the tables of a compile
that walks every state, on the real SmolLM2 vocabulary."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest

from helpers import run_cli

from grammarc import compile_json_schema
from grammarc.alignment.flat import tokenizer_trie
from grammarc.alignment.machines import machine_cache
from grammarc.tokenizers import Tokenizer

SCHEMAS = [
    # any value (extra keys), plain strings, a format, strings in an array
    {"type": "object", "properties": {
        "name": {"type": "string"}, "when": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string"}}, "size": {"type": "integer"}}},
    # a counted string, a pattern, a format for every extra key
    {"type": "object", "properties": {
        "note": {"type": "string", "maxLength": 300},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
     "required": ["note"], "additionalProperties": {"type": "string", "format": "email"}},
    # recursion through a definition, strings and any value inside it
    {"$defs": {"node": {"type": "object", "properties": {
        "label": {"type": "string"}, "data": {},
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
     "$ref": "#/$defs/node"},
]


def _arrays(table) -> dict[str, np.ndarray]:
    """Every array of a token table and of its call tables, by name."""
    found = {}
    for part, prefix in ((table, ""), (table.calls, "calls.")):
        for field in dataclasses.fields(part):
            value = getattr(part, field.name)
            if isinstance(value, np.ndarray):
                found[prefix + field.name] = value
    return found


@pytest.mark.parametrize("schema", SCHEMAS, ids=["object", "counted", "recursive"])
def test_kept_machines_give_the_tables_of_a_walk_of_every_state(smollm2: Tokenizer, schema,
                                                                tmp_path, monkeypatch):
    alone = copy.copy(smollm2)  # an object of its own: its own trie, no machine kept for it
    with monkeypatch.context() as patch:  # nor any on disk
        patch.setenv("GRAMMARC_CACHE_DIR", str(tmp_path))
        walked = compile_json_schema(schema, alone)
    for _ in range(3):  # met once (noted), twice (walked alone and kept), then taken as kept
        kept = compile_json_schema(schema, smollm2)
    cache = machine_cache(tokenizer_trie(smollm2), smollm2.vocab_size, smollm2.eos_token_ids)
    assert len(cache) > 0
    assert len(machine_cache(tokenizer_trie(alone), alone.vocab_size, alone.eos_token_ids)) == 0
    expected, got = _arrays(walked.table), _arrays(kept.table)
    assert expected.keys() == got.keys()
    for name, array in expected.items():
        assert np.array_equal(array, got[name]), name


def test_machines_kept_on_disk_give_later_processes_the_same_artifact(tmp_path, monkeypatch):
    """A command-line compile notes the machines it meets in the cache folder, the next one
    walks and writes them, later ones read them; a file that cannot be read is walked again.
    Every process writes the same artifact, byte for byte."""
    schema = tmp_path / "s.schema.json"
    schema.write_text(json.dumps(SCHEMAS[0]))
    cache = tmp_path / "cache"
    monkeypatch.setenv("GRAMMARC_CACHE_DIR", str(cache))

    def compile_once(name: str) -> bytes:
        result = run_cli("compile", str(schema), "-o", name, "--tokenizer", "smollm2",
                         cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        return (tmp_path / name).read_bytes()

    def files(suffix: str) -> list[Path]:
        return sorted((cache / "machines").glob(f"*/*{suffix}"))

    first = compile_once("1.safetensors")
    assert files(".met") and not files(".npz")  # noted only
    assert compile_once("2.safetensors") == first
    written = files(".npz")
    assert written and not files(".met")  # walked alone and written
    for path in written:
        os.utime(path, (1000, 1000))
    assert compile_once("3.safetensors") == first
    assert all(path.stat().st_mtime > 1000 for path in written)  # read (their time renewed)
    written[0].write_bytes(b"not a zip")
    assert compile_once("4.safetensors") == first
    # a whole file of entries no walk gives (classes out of order): walked again too
    with np.load(written[1]) as stored:
        arrays = dict(stored)
    np.savez(written[1], **dict(arrays, entry_class=arrays["entry_class"] * 3))
    assert compile_once("5.safetensors") == first
    stale = cache / "machines" / "0123"
    stale.mkdir()
    os.utime(stale, (1000, 1000))
    assert compile_once("6.safetensors") == first and not stale.exists()  # unused: removed
