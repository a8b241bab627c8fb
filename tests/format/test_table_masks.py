"""`TokenTable.classes_mask` against the definition (a token is allowed iff its class is), on
a real table, for class sets of every size: every way of writing a mask (the tokens of the
smaller side, a class at a time or all at once; by class outside the largest class; one
gather by class) must give the same booleans."""

from __future__ import annotations

import numpy as np
import pytest

import grammarc
from grammarc.format import table as table_module


@pytest.fixture(scope="module")
def table(smollm2):
    # free text beside keys and numbers: classes from a few tokens to most of the vocabulary
    return grammarc.compile_json_schema(
        {"type": "object", "properties": {"note": {"type": "string"},
                                          "n": {"type": "number"}}}, smollm2).table


def test_classes_mask_is_the_tokens_of_the_classes(table, monkeypatch):
    rng = np.random.default_rng(7)
    sizes = np.bincount(table.token_class, minlength=table.num_classes)
    by_size = np.argsort(sizes)
    cases = [by_size[:k] for k in (1, 3, table.num_classes // 2)]  # few tokens
    cases += [by_size[-k:] for k in (1, 2, table.num_classes // 2)]  # many tokens
    cases += [np.arange(1, table.num_classes), np.arange(table.num_classes)]
    cases += [rng.choice(table.num_classes, k, replace=False)
              for k in rng.integers(1, table.num_classes, 40)]
    for classes in cases:
        classes = np.unique(classes)
        expected = np.isin(table.token_class, classes)
        assert np.array_equal(table.classes_mask(classes), expected)
        with monkeypatch.context() as patch:  # every way, whatever the costs choose
            for scatter, outside, few in ((0, 1, 0), (0, 1, 10**9), (10**9, 1, 0),
                                          (10**9, 10**9, 0)):
                patch.setattr(table_module, "_SCATTER_COST", scatter)
                patch.setattr(table_module, "_OUTSIDE_COST", outside)
                patch.setattr(table_module, "_FEW_CLASSES", few)
                assert np.array_equal(table.classes_mask(classes), expected)


def test_row_masks_follow_the_rows(table):
    for row in range(table.num_rows):
        classes = table.row_class[table.row_ptr[row]:table.row_ptr[row + 1]]
        assert np.array_equal(table.row_mask(row), np.isin(table.token_class, classes))
