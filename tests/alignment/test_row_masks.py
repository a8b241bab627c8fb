"""The row masks the compiler computes in C++ (`alignment.row_masks`) against the definition (a
token is allowed iff its class is one of the row's), and a grammar compiled in this process,
which holds them, against the same grammar loaded from its artifact, which computes each mask
in numpy on first use."""

from __future__ import annotations

import numpy as np
import pytest

import grammarc
from grammarc.alignment.row_masks import row_masks

SCHEMA = {"type": "object", "required": ["n"], "properties": {
    "note": {"type": "string", "maxLength": 40}, "n": {"type": "number"},
    "tags": {"type": "array", "items": {"enum": ["a", "b"]}}}}


@pytest.mark.parametrize("tokenizer", ["smollm2", "bpe_tokenizer_json"])
def test_row_masks_are_the_tokens_of_the_row_classes(tokenizer, request):
    table = grammarc.compile_json_schema(SCHEMA, request.getfixturevalue(tokenizer)).table
    mask_row, rows, packed = row_masks(table)
    assert packed.shape == (len(rows), (table.vocab_size + 7) // 8)
    assert np.array_equal(rows, np.unique(mask_row))
    for row in range(table.num_rows):
        first = mask_row[row]
        classes = table.row_class[table.row_ptr[row]:table.row_ptr[row + 1]]
        assert first <= row and np.array_equal(
            classes, table.row_class[table.row_ptr[first]:table.row_ptr[first + 1]])
        assert not any(np.array_equal(classes, table.row_class[table.row_ptr[r]:
                                                               table.row_ptr[r + 1]])
                       for r in rows[rows < first])  # the first such row
    for k, row in enumerate(rows.tolist()):
        expected = np.isin(table.token_class, table.row_class[table.row_ptr[row]:
                                                              table.row_ptr[row + 1]])
        bits = np.unpackbits(packed[k], bitorder="little")
        assert np.array_equal(bits[:table.vocab_size].astype(bool), expected)
        assert not bits[table.vocab_size:].any()  # nothing past the vocabulary


def test_a_compiled_grammar_holds_its_row_masks_and_masks_as_a_loaded_one(smollm2, tmp_path):
    compiled = grammarc.compile_json_schema(SCHEMA, smollm2)
    distinct = len(compiled.table.mask_rows())
    assert len(compiled._allowed_masks) == distinct  # held before any mask is asked for
    compiled.save(tmp_path / "g.safetensors")
    loaded = grammarc.load(tmp_path / "g.safetensors")
    assert len(loaded._allowed_masks) == 0
    rng = np.random.default_rng(3)
    for _ in range(20):  # random walks: every mask and bitmask of both alike
        a, b = compiled.initial_state, loaded.initial_state
        for _ in range(40):
            mask = compiled.mask(a)
            assert np.array_equal(mask, loaded.mask(b))
            assert np.array_equal(compiled.bitmask(a), loaded.bitmask(b))
            allowed = np.setdiff1d(np.flatnonzero(mask), compiled.eos_token_ids)
            if not len(allowed):
                break
            token = int(rng.choice(allowed))
            a, b = compiled.next_state(a, token), loaded.next_state(b, token)
