"""The call tables as one typed value (`format.table.CallTables`, issue 42): its fields are
the artifact's tensor names, the aligner fills them, the format writes and reads them by those
names, and the format version follows from the value."""

from __future__ import annotations

import json
from dataclasses import fields, replace

import numpy as np
import pytest

import grammarc
from grammarc.format.artifact import (CALLS_FORMAT_VERSION, COUNTERS_FORMAT_VERSION,
                                      EXITS_FORMAT_VERSION, FORMAT_VERSION,
                                      TEXT_COUNTERS_FORMAT_VERSION, TWINS_FORMAT_VERSION,
                                      decode_table, format_version, read_artifact)
from grammarc.format.table import CallTables, CountRegisters, ExitTables, stored_tensors
from grammarc.runtime.calls import CallGrammar

RECURSIVE = {"type": "object", "properties": {"next": {"$ref": "#"}},
             "additionalProperties": False}
COUNTED = {"type": "array", "items": {"type": "string", "minLength": 130, "maxLength": 140}}
WORDS = {"type": "string", "pattern": "^(?:\\S+\\s+){0,9}\\S+$", "maxLength": 300}
# a value read as two recursions at once, which return by which of them accept it (unions)
UNITED = {"$defs": {"T": {"anyOf": [
    {"type": "string"},
    {"type": "object", "properties": {"v": {"type": "array", "items": {"$ref": "#/$defs/P"}}},
     "required": ["v"], "additionalProperties": False},
    {"type": "object", "properties": {"v": {"type": "array", "items": {"$ref": "#/$defs/T"}},
                                      "k": {"type": "integer"}},
     "required": ["v", "k"], "additionalProperties": False}]},
    "P": {"type": "object", "properties": {"t": {"$ref": "#/$defs/T"}}, "required": ["t"],
          "additionalProperties": False}}, "$ref": "#/$defs/T"}
# a long string or a pattern's: a union whose loop states have twins (version 6)
TWINS = {"anyOf": [{"type": "string", "minLength": 130, "maxLength": 140},
                   {"type": "string", "pattern": "^[a-z]*$"}]}
SCHEMAS = {"recursive": (RECURSIVE, CALLS_FORMAT_VERSION),
           "counted": (COUNTED, COUNTERS_FORMAT_VERSION),
           "words": (WORDS, TEXT_COUNTERS_FORMAT_VERSION),
           "united": (UNITED, EXITS_FORMAT_VERSION),
           "twins": (TWINS, TWINS_FORMAT_VERSION)}


@pytest.fixture(scope="module", params=list(SCHEMAS))
def compiled(request, bpe_tokenizer_json) -> grammarc.Grammar:
    """A grammar with calls: without count registers (recursion), with them (a string
    longer than `COUNTED_LENGTH`), counting across a pattern's states (version 4), with
    unions returning by exit class (version 5, with registers that count nothing), or with
    a union that counts (version 6)."""
    schema = SCHEMAS[request.param][0]
    grammar = grammarc.compile(json.dumps(schema), bpe_tokenizer_json, "json-schema")
    assert (grammar.table.calls.counters is not None) == (schema is not RECURSIVE)
    return grammar


def _arrays(tables: CallTables | CountRegisters | ExitTables,
            version: int) -> dict[str, np.ndarray]:
    """The arrays of `tables` the artifact's format `version` stores."""
    return {name: getattr(tables, name) for name in stored_tensors(type(tables), version)}


def test_the_fields_are_the_tensors_an_artifact_holds(compiled, tmp_path):
    calls = compiled.table.calls
    assert isinstance(compiled, CallGrammar) and calls is not None
    expected = {name: values for part in (calls, calls.counters, calls.exits) if part
                for name, values in _arrays(part, calls.version).items()}
    assert calls.tensors().keys() == expected.keys()
    compiled.save(tmp_path / "g.safetensors")
    data = read_artifact(tmp_path / "g.safetensors")
    for name, values in expected.items():  # stored under the field's name, value for value
        assert np.array_equal(data.tensors[name], values), name
    read = decode_table(data).calls
    assert (read.counters is None) == (calls.counters is None)
    assert (read.exits is None) == (calls.exits is None)
    for name, values in read.tensors().items():
        assert np.array_equal(values, expected[name]) and not values.flags.writeable, name
    assert read.tensors().keys() == expected.keys()


def test_the_format_version_follows_the_tables(compiled, smollm2, request):
    version = SCHEMAS[request.node.callspec.params["compiled"]][1]
    assert format_version(compiled.table) == compiled.metadata["format_version"] == version
    flat = grammarc.compile("[a-z]+", smollm2, "regex")
    assert flat.table.calls is None
    assert format_version(flat.table) == flat.metadata["format_version"] == FORMAT_VERSION


def test_the_storage_of_every_field_is_named_once():
    parts = (CallTables, CountRegisters, ExitTables)
    names = [name for part in parts for name in stored_tensors(part)]
    assert len(names) == len(set(names)) == 31
    assert {f.name for f in fields(CallTables)} == \
        set(stored_tensors(CallTables)) | {"counters", "exits"}
    assert all(sign in "ui" and ndim in (1, 2) for part in parts
               for sign, ndim in stored_tensors(part).values())


def test_arrays_of_the_wrong_dimensions_are_refused(compiled):
    calls = compiled.table.calls
    with pytest.raises(ValueError, match="machine_first must have 2 dimension"):
        replace(calls, machine_first=calls.machine_first.reshape(-1))
    with pytest.raises(ValueError, match="stack_ptr must have 1 dimension"):
        replace(calls, stack_ptr=calls.stack_ptr.reshape(1, -1))
    if calls.counters is not None:
        with pytest.raises(ValueError, match="count_table must have 2 dimension"):
            replace(calls.counters, count_table=calls.counters.count_table.reshape(-1))
        assert calls.counters.count_table.dtype in (np.uint8, np.uint16)  # kept narrow
