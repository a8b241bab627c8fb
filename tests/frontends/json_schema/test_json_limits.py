"""Schemas whose automata grow past the state limit unless a part is kept as a called machine:
checked against `jsonschema` on texts near every bound."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest
from helpers import accepts, dfa_of

from grammarc.errors import TooManyStatesError

# a string of at most 5 words and 40 characters: a product of about 10,000 states
_WORDS_KEYWORDS = {"maxLength": 40, "pattern": "^(?:\\S+\\s+){0,4}\\S+$"}
_WORDS = {"type": "string", **_WORDS_KEYWORDS}


def _words(rng: random.Random) -> str:
    """A text of a few words, near the word and length bounds of `_WORDS`."""
    words = ["".join(rng.choice("ab\u00e9") for _ in range(rng.randint(0, 9)))
             for _ in range(rng.randint(1, 6))]
    return "".join(w + rng.choice([" ", "  ", "\t", ""]) for w in words).rstrip(
        rng.choice(["", " "]))


def _arrays(rng: random.Random, count: int) -> list[str]:
    return [json.dumps([_words(rng) for _ in range(rng.choice([0, 1, 1, 2, 4, 5, 6]))],
                       ensure_ascii=False) for _ in range(count)]


def test_large_item_automaton_repeated_is_one_called_machine():
    """Five copies of the item's product would hold about 50,000 states: the item is a
    machine called per element (the string's own), and the array's language is unchanged."""
    schema = {"type": "array", "items": _WORDS, "minItems": 1, "maxItems": 5}
    automaton, notices = dfa_of(schema)
    assert not notices
    assert f"string {json.dumps(_WORDS_KEYWORDS, sort_keys=True)}" in automaton.machine_names
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(41)
    texts = _arrays(rng, 400)
    valid = [t for t in texts if validator.is_valid(json.loads(t))]
    assert 50 < len(valid) < len(texts) - 50  # both kinds, near the bounds
    for text in texts:
        assert accepts(automaton, text) == (text in valid), text


def test_four_and_five_repeats_of_a_large_item_agree():
    """A string this large stays a called machine even where nothing else calls (four
    copies of it inline would hold 40,000 states); both bounds accept the same texts."""
    inline, _ = dfa_of({"type": "array", "items": _WORDS, "maxItems": 4})
    called, _ = dfa_of({"type": "array", "items": _WORDS, "maxItems": 5})
    assert inline.num_states < 15_000  # one copy of the string: 10,465 states
    rng = random.Random(7)
    for text in _arrays(rng, 300):
        count = len(json.loads(text))
        if count <= 4:
            assert accepts(inline, text) == accepts(called, text), text
        else:
            assert not accepts(inline, text)


def test_a_union_of_strings_too_large_once_inlined_names_its_machines():
    """Where the next byte cannot tell the calls of two string machines apart and no union
    of them can be built (both count), they are inlined; a union too large then says which
    machines it inlined."""
    schema = {"type": "object", "properties": {"x": {"anyOf": [
        {"type": "string", "maxLength": 512},
        {"type": "string", "format": "uri", "maxLength": 2000}]}}}
    with pytest.raises(TooManyStatesError) as caught:
        dfa_of(schema)
    message = str(caught.value)
    assert "more than --max-states" in message and "'string{0,512}'" in message and \
        "uri" in message and "\n" not in message, message
    # one of them counting, their union keeps the count (format version 6)
    schema = {"type": "object", "properties": {"x": {"anyOf": [
        {"type": "string", "maxLength": 512}, {"type": "string", "format": "uri"}]}}}
    assert dfa_of(schema)[0].num_states < 3000
