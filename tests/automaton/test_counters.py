"""Count registers: JSON strings with length bounds past `COUNTED_LENGTH` are machines whose
count of characters is kept at run time, a few states for any bound (issue 14); a pattern
without bound under a long `maxLength` counts its characters across its own states (issue 41,
format version 4).

Checked against `jsonschema` and against the byte-level walk of the machines, which reads the
count by its own rule (`runtime.counts.Counts.byte_step`), at and around every bound."""

from __future__ import annotations

import json
import random

import jsonschema
import numpy as np
import pytest
from grammar_oracles import exact_validator, greedy_tokens
from helpers import assert_same_mask, reloaded, walk_within_budget

import grammarc
from grammarc.format.artifact import read_artifact, write_artifact
from grammarc.automaton.pushdown import PushdownDFA
from grammarc.compiler import build_automaton
from grammarc.errors import ArtifactError
from grammarc.frontends import FrontendOptions
from grammarc.frontends.json_schema.strings import COUNTED_LENGTH
from grammarc.runtime.calls import CallGrammar

LOW, HIGH = COUNTED_LENGTH + 2, COUNTED_LENGTH + 7
SCHEMA = {
    "type": "object",
    "properties": {
        "short": {"type": "string", "maxLength": HIGH},
        "band": {"type": "string", "minLength": LOW, "maxLength": HIGH},
        "long": {"type": "string", "minLength": LOW},
        "list": {"type": "array", "items": {"type": "string", "maxLength": HIGH}},
    },
    "additionalProperties": False,
}
# characters of every spelling: one byte, two, three, four, short and \u escapes, a quote
PIECES = ["x", "é", "日", "😀", "\\n", "\\\\", '\\"', "\\u00e9", "\\ud83d\\ude00", " "]


def _string(rng: random.Random, length: int) -> str:
    return "".join(rng.choice(PIECES) for _ in range(length))


def _texts(rng: random.Random) -> list[str]:
    """Documents whose strings are around every bound, and mutants of them."""
    texts = []
    for length in [0, 1, LOW - 2, LOW - 1, LOW, LOW + 1, HIGH - 1, HIGH, HIGH + 1, HIGH + 2]:
        for key in ("short", "band", "long"):
            texts.append(f'{{"{key}": "{_string(rng, length)}"}}')
        texts.append(f'{{"list": ["{_string(rng, length)}", "{_string(rng, HIGH - length)}"]}}')
    for text in list(texts):
        i = rng.randrange(len(text))
        texts.append(text[:i] + text[i + 1:])
        texts.append(text[:i] + rng.choice(['"', "x", "\\", ","]) + text[i:])
    return texts


@pytest.fixture(scope="module")
def counted(smollm2) -> CallGrammar:
    return grammarc.compile(json.dumps(SCHEMA), smollm2, "json-schema")


def test_counted_strings_are_a_few_states_whatever_their_bounds():
    small = build_automaton("json-schema", json.dumps(SCHEMA), None, FrontendOptions())
    huge = build_automaton("json-schema", json.dumps(
        {"type": "string", "minLength": 3, "maxLength": 2**31 - 1}), None, FrontendOptions())
    for pd in (small, huge):
        assert isinstance(pd, PushdownDFA) and pd.has_counters
    assert huge.num_states < 40 and small.num_states < 400
    bounded = [m for m in range(len(huge.machine_names)) if huge.counters.loop[m]]
    assert [(huge.counters.count_min[m], huge.counters.count_max[m]) for m in bounded] == \
        [(3, 2**31 - 1)]
    # short bounds stay spelled in states: no count register
    plain = build_automaton("json-schema", json.dumps({"type": "string", "maxLength": 20}),
                            None, FrontendOptions())
    assert not isinstance(plain, PushdownDFA) or not plain.has_counters


def test_bytes_are_accepted_exactly_at_every_bound(counted):
    validator = jsonschema.Draft202012Validator(SCHEMA)
    pd = build_automaton("json-schema", json.dumps(SCHEMA), None, FrontendOptions())
    rng = random.Random(7)
    for text in _texts(rng):
        try:  # a lone surrogate escape is no character (Python's json reads it anyway)
            value = json.loads(text)
            valid = validator.is_valid(value) and bool(json.dumps(value).encode("utf-8"))
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except ValueError:  # UnicodeEncodeError included
            valid = False
        assert counted.matches(text) == valid, text
        assert pd.accepts(text.encode()) == valid, text


def test_masks_agree_with_byte_walks_near_the_bounds(counted, smollm2):
    """Along token walks of documents at the bounds: a token is allowed exactly when its bytes
    keep the text a prefix of the language, and it leads to the configuration (stack and
    count) its bytes reach."""
    rng = random.Random(3)
    # closers and escapes; tokens that open a string and read characters of it (" ",)
    sample = _token_sample(smollm2, '"x", "é"日😀\\n\\u00e9x"} ", "_ "__')
    for length in (LOW - 1, LOW, HIGH - 1, HIGH, HIGH + 1):
        for key in ("band", "list", "long"):
            body = _string(rng, length)
            text = f'{{"list": ["{body}"]}}' if key == "list" else f'{{"{key}": "{body}"}}'
            valid = {"band": LOW <= length <= HIGH, "list": length <= HIGH,
                     "long": length >= LOW}[key]
            _assert_masks_follow_bytes(counted, smollm2, text, valid, sample)


def _token_sample(tokenizer, extra: str) -> list[int]:
    """600 random tokens and those of `extra`."""
    token_bytes = tokenizer.token_bytes
    sample = [t for t in random.Random(5).sample(range(len(token_bytes)), 600)
              if token_bytes[t] and t not in tokenizer.eos_token_ids]
    return sample + greedy_tokens(tokenizer, extra)


def _assert_masks_follow_bytes(grammar: CallGrammar, tokenizer, text: str, valid: bool,
                               sample: list[int]) -> None:
    """Along the greedy tokens of `text`, each sampled token is allowed exactly when its bytes
    walk on, to the stack and count they reach; the text is accepted exactly if `valid`."""
    token_bytes = tokenizer.token_bytes
    state = grammar.initial_state
    for token in greedy_tokens(tokenizer, text):
        mask = grammar.mask(state)
        for candidate in sample + [token]:
            walked = grammar.walk_bytes(token_bytes[candidate], state)
            assert bool(mask[candidate]) == bool(walked), (text, candidate)
            if walked:
                after = grammar.next_state(state, candidate)
                assert grammar.stack(after) == grammar.stack(walked)
                assert grammar.count(after) == grammar.count(walked)
        if not mask[token]:
            assert not valid, text
            return
        state = grammar.next_state(state, token)
    assert grammar.is_accepting(state) == valid, text


PATTERNS = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": f"^[0-9a-f]{{{LOW},{HIGH}}}x$"},
        "key": {"type": "string", "pattern": f"^ab[0-9a-f]{{{LOW},{HIGH}}}$"},  # spelled
        "tag": {"type": "string", "pattern": f"^[a-z_]{{{LOW},}}$"},
    },
    "additionalProperties": False,
}


def test_long_repeats_of_a_pattern_are_counted(smollm2):
    """`^[0-9a-f]{m,n}x$` with n past COUNTED_LENGTH is a counted machine like a long
    string, exact at and around its bounds (checked with jsonschema, by bytes and by masks).
    After a literal prefix the repeat stays spelled in states (see `counter_form`)."""
    pd = build_automaton("json-schema", json.dumps(PATTERNS), None, FrontendOptions())
    assert isinstance(pd, PushdownDFA) and pd.has_counters and pd.num_states < 250
    bounded = [m for m in range(len(pd.machine_names)) if pd.counters.loop[m]]
    assert sorted((pd.counters.count_min[m], pd.counters.count_max[m]) for m in bounded) == \
        [(LOW, -1), (LOW, HIGH)]
    grammar = grammarc.compile(json.dumps(PATTERNS), smollm2, "json-schema")
    validator = jsonschema.Draft202012Validator(PATTERNS)
    rng = random.Random(11)
    sample = _token_sample(smollm2, '"ab0123456789abcdefx", "tag": "abc_z"}')
    sample += greedy_tokens(smollm2, "aba abad abe ab0")
    for length in [0, 1, LOW - 1, LOW, LOW + 1, HIGH - 1, HIGH, HIGH + 1, 3 * HIGH]:
        hexes = "".join(rng.choice("0123456789abcdef") for _ in range(length))
        word = "".join(rng.choice("abcz_") for _ in range(length))
        texts = [f'{{"id": "{hexes}x"}}', f'{{"key": "ab{hexes}"}}', f'{{"tag": "{word}"}}',
                 f'{{"id": "{hexes}x", "key": "ab{hexes}", "tag": "{word}"}}']
        for text in list(texts):
            i = rng.randrange(len(text))
            texts += [text[:i] + text[i + 1:], text[:i] + rng.choice("g-x0_\"") + text[i:]]
        for text in texts:
            try:
                valid = validator.is_valid(json.loads(text))
            except ValueError:
                valid = False
            assert grammar.matches(text) == valid, text
            if length in (LOW - 1, LOW, HIGH, HIGH + 1) and text in texts[:4]:
                _assert_masks_follow_bytes(grammar, smollm2, text, valid, sample)


def test_masks_far_from_the_bounds_are_shared(counted):
    inside = '{"long": "' + "x" * (LOW + 50)
    a, b = counted.walk_bytes(inside.encode()), counted.walk_bytes((inside + "xx").encode())
    assert counted.count(b) == counted.count(a) + 2
    assert counted.mask(a) is counted.mask(b)
    near = counted.walk_bytes(('{"band": "' + "x" * (HIGH - 1)).encode())
    assert not np.array_equal(counted.mask(near), counted.mask(
        counted.walk_bytes(('{"band": "' + "x" * LOW).encode())))


def test_sampled_documents_are_valid_and_budgets_a_guarantee(counted, smollm2):
    validator = jsonschema.Draft202012Validator(SCHEMA)
    rng = np.random.default_rng(4)
    eos = set(smollm2.eos_token_ids)
    for budget in (LOW + 5, HIGH + 20, 3 * HIGH):
        for _ in range(6):
            tokens = counted.sample_tokens(budget, rng, eos_probability=0.02)
            assert tokens is not None and len(tokens) <= budget and tokens[-1] in eos
            text = smollm2.decode_bytes([t for t in tokens if t not in eos]).decode()
            assert validator.is_valid(json.loads(text)), text
    # from inside a string below its minimum, the budget still holds
    state = counted.walk_bytes(('{"band": "' + "é" * 3).encode())
    need = counted.tokens_to_accept(state)
    assert need >= LOW - 3
    left, state = walk_within_budget(counted, state, need + 1, rng)
    assert left >= 0 and counted.is_accepting(state)


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_counted_artifacts_round_trip(counted, tmp_path, suffix):
    loaded = reloaded(counted, tmp_path / f"counted{suffix}")
    assert loaded.metadata["format_version"] == 3
    for length in (LOW - 1, LOW, HIGH, HIGH + 1):
        text = '{"band": "' + "x" * length + '"}'
        assert loaded.matches(text) == (LOW <= length <= HIGH)
        assert_same_mask(loaded, counted, text[:-3].encode())


@pytest.mark.parametrize("tensor,value,message", [
    ("count_row", 10**6, "count_row out of range"),
    ("machine_loop", 10**6, "machine_loop out of range"),
    ("machine_count_max", -2, "machine_count_max must be"),
    ("stack_reps", None, "stack_reps has the wrong length"),
])
def test_forged_counter_tensors_are_refused(counted, tmp_path, tensor, value, message):
    def edit(tensors: dict[str, np.ndarray]) -> None:
        if value is None:
            tensors[tensor] = tensors[tensor][:-1]
        else:
            counted_machine = int(np.flatnonzero(tensors["machine_loop"])[0])
            at = counted_machine if tensor.startswith("machine") else \
                int(np.flatnonzero(tensors["count_row"] >= 0)[0])
            tensors[tensor][at] = value

    _assert_forgery_refused(counted, tmp_path / "counted.npz", edit, message)


def _assert_forgery_refused(grammar: CallGrammar, path, edit, message: str) -> None:
    """`grammar` saved to `path` with its tensors changed by `edit` (checksum renewed) is
    refused on loading with `message`."""
    grammar.save(path)
    data = read_artifact(path)
    tensors = {name: np.array(data.tensors[name]) for name in data.tensors}
    tensors["accepting"] = tensors["accepting"].astype(np.uint8)
    edit(tensors)
    metadata = {k: v for k, v in data.metadata.items() if k != "checksum"}
    write_artifact(path, metadata, tensors)
    with pytest.raises(ArtifactError, match=message):
        grammarc.load(path)


def test_a_union_with_a_recursive_machine_keeps_a_long_string_counted(smollm2):
    """An anyOf of a recursive $ref and another object that both read key `s`, one as a
    long string and one as any value (two machines the next byte cannot tell apart), is a
    union of the two, and inside it `s` a union of the long string and any value that keeps
    the count (issue 41; the whole document was flat before, unrolled, its strings spelled
    in states)."""
    node = {"type": "object", "properties": {
        "s": {"type": "string", "maxLength": HIGH},
        "c": {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "object", "required": ["x"]}]}}}
    schema = {"$defs": {"n": node}, "$ref": "#/$defs/n"}
    notices: list[str] = []
    grammar = grammarc.compile(json.dumps(schema), smollm2, "json-schema",
                               options=FrontendOptions(notice=notices.append))
    assert isinstance(grammar, CallGrammar) and not notices
    assert grammar.metadata["format_version"] == 6 and grammar.num_states < 2000
    for value, valid in [({"s": "é" * HIGH}, True), ({"s": "é" * (HIGH + 1)}, False),
                         ({"c": {"s": "é" * HIGH}}, True), ({"c": {"s": "é" * (HIGH + 1)}}, False),
                         ({"c": {"s": "é" * (HIGH + 1), "x": 1}}, True),
                         ({"c": {"c": {"s": "é" * (HIGH + 1), "x": [1]}}}, True),
                         ({"c": {"c": {"s": "é" * (HIGH + 1)}}}, False)]:
        assert grammar.matches(json.dumps(value, ensure_ascii=False)) == valid, value


def test_count_rows_kept_across_compiles_give_the_tables_of_a_fresh_walk(smollm2, tmp_path):
    """A counted loop's rows are walked once per vocabulary (`LOOP_ROWS`): a schema whose
    loops have other bounds reads the rows another schema's loops left, and gets the tables
    a walk with nothing kept gives."""
    from grammarc.alignment import calls as align_calls

    other = {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 300}}

    def compiled(schema: dict, name: str) -> dict[str, np.ndarray]:
        grammarc.compile(json.dumps(schema), smollm2, "json-schema").save(tmp_path / name)
        return read_artifact(tmp_path / name).tensors

    align_calls.LOOP_ROWS.clear()
    compiled(PATTERNS, "patterns.safetensors")  # loops of other items kept beside
    compiled(SCHEMA, "schema.safetensors")
    walked = len(align_calls.LOOP_ROWS.entries)
    kept = compiled(other, "kept.safetensors")
    assert walked >= 2 and len(align_calls.LOOP_ROWS.entries) == walked  # nothing new walked
    align_calls.LOOP_ROWS.clear()
    fresh = compiled(other, "fresh.safetensors")
    assert kept.keys() == fresh.keys() and "count_table" in kept
    for key in kept:
        assert np.array_equal(kept[key], fresh[key]), key


# --------------------------------------------- characters counted across a pattern's states
TEXT_COUNTED = {
    "type": "object",
    "properties": {
        "w": {"type": "string", "maxLength": 60, "pattern": "^(?:\\S+\\s+){0,9}\\S+$"},
        "p": {"type": "string", "maxLength": 1501, "pattern": "^(ab)*$"},  # even lengths
        "m": {"type": "string", "minLength": 4, "maxLength": 1500, "pattern": "^(ab)+$"},
    },
    "additionalProperties": False,
}
WORD_PIECES = ["a", "é", "日", "😀", "\\n", '\\"', "\\u00e9", "\\ud83d\\ude00"]
SPACES = [" ", "\\t", "\\u3000", "\u3000", "\\n"]


@pytest.fixture(scope="module")
def text_counted(smollm2) -> CallGrammar:
    return grammarc.compile(json.dumps(TEXT_COUNTED), smollm2, "json-schema")


def _words(rng: random.Random, words: int, length: int) -> str:
    """A value of `length` characters (at least 2 per word) in `words` words."""
    chars = [rng.choice(WORD_PIECES) for _ in range(length)]
    for at in rng.sample(range(1, length - 1, 2), words - 1):
        chars[at] = rng.choice(SPACES)
    return "".join(chars)


def _text_counted_texts(rng: random.Random) -> list[str]:
    """Values at and around each bound (characters, words, parity), and mutants of them
    inside the string."""
    texts = [f'{{"w": "{_words(rng, words, length)}"}}'
             for words in (1, 2, 10, 11) for length in (22, 59, 60, 61)]
    texts += [f'{{"p": "{"ab" * (n // 2)}{"a" * (n % 2)}"}}' for n in (0, 2, 1499, 1500, 1501, 1502)]
    texts += [f'{{"m": "{"ab" * (n // 2)}{"a" * (n % 2)}"}}' for n in (2, 3, 4, 1500, 1502)]
    for text in list(texts):
        i = rng.randrange(7, len(text) - 1)
        texts += [text[:i] + text[i + 1:], text[:i] + rng.choice('"x\\ ') + text[i:]]
    return texts


def _valid(validator, text: str) -> bool:
    try:  # a lone surrogate escape is no character (Python's json reads it anyway)
        value = json.loads(text)
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except ValueError:  # UnicodeEncodeError included
        return False
    return validator.is_valid(value)


def test_a_pattern_under_a_long_max_length_counts_its_characters():
    """The characters of a pattern without bound are counted across its states, not spelled
    as their product with the lengths: the word pattern of issue 41 (a million states as a
    product) is a few thousand. Where the least length is above the fewest characters the
    pattern needs (`m`), its texts are cut to that length first, and counted."""
    pd = build_automaton("json-schema", json.dumps(TEXT_COUNTED), None, FrontendOptions())
    assert isinstance(pd, PushdownDFA) and pd.num_states < 3000
    counters = pd.counters
    counted = {pd.machine_names[m]: (counters.count_min[m], counters.count_max[m],
                                     counters.phase[counters.loop[m]] >= 0)
               for m in range(len(pd.machine_names)) if counters.loop[m]}
    assert sorted(counted.values()) == [(0, 60, True), (0, 1501, True), (4, 1500, True)]
    words = {"type": "string", "maxLength": 500, "pattern": "^(?:\\S+\\s+){0,49}\\S+$"}
    big = build_automaton("json-schema", json.dumps(words), None, FrontendOptions())
    assert isinstance(big, PushdownDFA) and big.num_states < 5000
    assert big.counters.need.max() == 1  # after a space, one more character at least


def test_counted_patterns_accept_exactly(text_counted):
    validator = exact_validator(TEXT_COUNTED, ecma_patterns=True)  # `$`: the end only
    pd = build_automaton("json-schema", json.dumps(TEXT_COUNTED), None, FrontendOptions())
    texts = _text_counted_texts(random.Random(17))
    verdicts = [_valid(validator, text) for text in texts]
    assert 10 < sum(verdicts) < len(texts) - 10
    for text, valid in zip(texts, verdicts):
        assert text_counted.matches(text) == valid, text
        assert pd.accepts(text.encode()) == valid, text


def test_counted_pattern_masks_agree_with_byte_walks(text_counted, smollm2):
    """At the bounds, each sampled token is allowed exactly when its bytes walk on, to the
    count they reach (the count holds the characters still needed: after a space, one)."""
    validator = exact_validator(TEXT_COUNTED, ecma_patterns=True)  # `$`: the end only
    sample = _token_sample(smollm2, '"a b", "é日 😀\\n\\u00e9x"} ", " a  b\tab"ab", "aba')
    rng = random.Random(19)
    for words, length in ((10, 59), (10, 60), (11, 60), (3, 61)):
        text = f'{{"w": "{_words(rng, words, length)}"}}'
        _assert_masks_follow_bytes(text_counted, smollm2, text, _valid(validator, text), sample)
    for n in (1500, 1501):
        text = f'{{"p": "{"ab" * (n // 2)}{"a" * (n % 2)}"}}'
        _assert_masks_follow_bytes(text_counted, smollm2, text, n % 2 == 0, sample)


def test_counted_pattern_samples_are_valid_and_budgets_a_guarantee(text_counted, smollm2):
    validator = exact_validator(TEXT_COUNTED, ecma_patterns=True)  # `$`: the end only
    rng = np.random.default_rng(8)
    eos = set(smollm2.eos_token_ids)
    for _ in range(12):
        tokens = text_counted.sample_tokens(80, rng, eos_probability=0.02)
        assert tokens is not None and tokens[-1] in eos
        text = smollm2.decode_bytes([t for t in tokens if t not in eos]).decode()
        assert validator.is_valid(json.loads(text)), text
    # 59 characters, the last a space: one more character, then the end (the count holds
    # the characters read and the one still needed)
    state = text_counted.walk_bytes(('{"w": "' + "a " * 8 + "a" * 42 + " ").encode())
    assert text_counted.count(state) == 60 and text_counted.tokens_to_accept(state) >= 1
    left, state = walk_within_budget(text_counted, state, 4, rng)
    assert left >= 0 and text_counted.is_accepting(state)


def test_counted_pattern_artifacts_round_trip(text_counted, tmp_path):
    loaded = reloaded(text_counted, tmp_path / "words.safetensors")
    assert loaded.metadata["format_version"] == 4
    for words, length in ((10, 60), (11, 60), (10, 61)):
        text = '{"w": "' + "a " * (words - 1) + "a" * (length - 2 * (words - 1)) + '"}'
        assert loaded.matches(text) == (words <= 10 and length <= 60), text
        assert_same_mask(loaded, text_counted, text[:-4].encode())


@pytest.mark.parametrize("value,message", [(2, "count_loop must be 0/1"),
                                           (None, "count_need must be 0 outside loops")])
def test_forged_version_4_tensors_are_refused(text_counted, tmp_path, value, message):
    def edit(tensors: dict[str, np.ndarray]) -> None:
        if value is None:
            tensors["count_need"][int(np.flatnonzero(tensors["count_row"] < 0)[-1])] = 1
        else:
            tensors["count_loop"][int(np.flatnonzero(tensors["count_row"] >= 0)[0])] = value

    _assert_forgery_refused(text_counted, tmp_path / "words.npz", edit, message)


def test_a_counted_pattern_inside_a_difference_is_its_product(smollm2):
    """Where a product needs the texts of a counted pattern (here a `not`), it reads them
    spelled out, bounds included (`CountedText.exact`), not the pattern alone."""
    even = {"type": "string", "pattern": "^(ab)*$", "maxLength": 3001}
    schema = {"type": "object", "properties": {"x": {"not": even}, "y": even},
              "additionalProperties": False}
    grammar = grammarc.compile(json.dumps(schema), smollm2, "json-schema")
    validator = exact_validator(schema, ecma_patterns=True)
    for key in ("x", "y"):
        for value in ("ab" * 1500, "ab" * 1501, "aba", "", "ab" * 1500 + "a"):
            text = json.dumps({key: value})
            assert grammar.matches(text) == validator.is_valid({key: value}), text


FORMAT_COUNTED = {
    "type": "object",
    "properties": {
        "u": {"type": "string", "format": "uri", "maxLength": 300},
        "h": {"type": "string", "format": "hostname", "minLength": 1, "maxLength": 40},
        "e": {"type": "string", "format": "email", "maxLength": 60},
        "d": {"type": "string", "format": "date-time", "maxLength": 70},
    },
    "additionalProperties": False,
}


def _format_values(rng: random.Random) -> list[tuple[str, str]]:
    """(key, value) of each format at and around its bounds, and mutants inside the value."""
    values = []
    for n in (1, 250, 279, 280, 281, 300):  # "http://a.example/" + n more: 18 + n characters
        values.append(("u", "http://a.example/" + "".join(rng.choice("xy%2F/?=") for _ in range(n))))
    for labels in (1, 2, 3, 4, 5):
        for width in (1, 2, 6, 9, 10, 12, 63, 64):
            values.append(("h", ".".join(["a" * (width - 1) + "b"] * labels)))
    for n in (1, 47, 48, 49, 60):  # n + "@example.com": 12 more characters
        values.append(("e", "x" * n + "@example.com"))
    for n in (1, 48, 49, 50, 51, 70):  # 20 characters, then n digits, then a Z
        values.append(("d", "2024-01-31T23:59:59." + "1" * n + "Z"))
    for key, value in list(values):
        i = rng.randrange(len(value))
        values += [(key, value[:i] + value[i + 1:]), (key, value[:i] + rng.choice(' "-.@') + value[i:])]
    return values


def _format_valid(key: str, value: str) -> bool:
    """The format's own regular expression (Python's `re`) and the lengths, read apart."""
    import re
    from grammarc.frontends.json_schema.strings import FORMATS

    node = FORMAT_COUNTED["properties"][key]
    return re.fullmatch(FORMATS[node["format"]], value) is not None and \
        node.get("minLength", 0) <= len(value) <= node["maxLength"]


@pytest.fixture(scope="module")
def format_counted(smollm2) -> CallGrammar:
    return grammarc.compile(json.dumps(FORMAT_COUNTED), smollm2, "json-schema")


def test_formats_under_a_max_length_count_their_characters(format_counted):
    """A format under a `maxLength` that cuts some of its texts counts its characters across
    the format's states instead of spelling their product with the lengths (a `uri` within
    300 was 45,000 states, within 1,000 past --max-states): exact at every bound."""
    pd = build_automaton("json-schema", json.dumps(FORMAT_COUNTED), None, FrontendOptions())
    assert isinstance(pd, PushdownDFA) and pd.num_states < 3000
    counted = [pd.machine_names[m] for m in range(len(pd.machine_names))
               if pd.counters.loop[m] and pd.counters.phase[pd.counters.loop[m]] >= 0]
    assert len(counted) == 4, counted
    values = _format_values(random.Random(23))
    verdicts = [_format_valid(key, value) for key, value in values]
    assert 30 < sum(verdicts) < len(values) - 30
    for (key, value), valid in zip(values, verdicts):
        text = json.dumps({key: value})
        assert pd.accepts(text.encode()) == valid, text
        assert format_counted.matches(text) == valid, text


def test_counted_format_masks_agree_with_byte_walks(format_counted, smollm2):
    sample = _token_sample(smollm2, 'http://a.example/xy?=, a.b.c "@example.com 2024-01-31T.1Z')
    for key, value in [("u", "http://a.example/" + "x" * 282), ("u", "http://a.example/" + "x" * 283),
                       ("h", "abcdefghi.abcdefghi.abcdefghi.abcdefghi"),
                       ("h", "abcdefghi.abcdefghi.abcdefghi.abcdefghij"),
                       ("e", "x" * 48 + "@example.com"), ("e", "x" * 49 + "@example.com")]:
        text = json.dumps({key: value})
        _assert_masks_follow_bytes(format_counted, smollm2, text, _format_valid(key, value),
                                   sample)


ALLOF_COUNTED = {
    "type": "object",
    "properties": {
        "u": {"allOf": [{"type": "string", "format": "uri"}, {"maxLength": 300}]},
        "k": {"enum": ["a", "b"]},
        "v": {"type": "string"},
    },
    "if": {"properties": {"k": {"const": "a"}}, "required": ["k"]},
    "then": {"properties": {"v": {"maxLength": 200}}},
    "additionalProperties": False,
}


def test_a_count_meets_the_languages_of_other_branches():
    """A long `maxLength` in one `allOf` branch (or a `then`) meets a format or a plain
    string of another as the texts of both with the characters counted, not as their product
    (a `uri` within 2,048 characters was past --max-states): exact at the bounds."""
    import re
    from grammarc.frontends.json_schema.strings import FORMATS

    pd = build_automaton("json-schema", json.dumps(ALLOF_COUNTED), None, FrontendOptions())
    assert isinstance(pd, PushdownDFA) and pd.num_states < 2000
    assert sum(1 for m in range(len(pd.machine_names)) if pd.counters.loop[m]) >= 2
    structure = jsonschema.Draft202012Validator(ALLOF_COUNTED)  # formats not asserted
    rng = random.Random(29)
    values = []
    for n in (1, 281, 282, 283, 300):  # "http://a.example/" is 17 characters
        values.append({"u": "http://a.example/" + "".join(rng.choice("xy/?=") for _ in range(n))})
    for n in (0, 199, 200, 201, 500):
        values += [{"k": k, "v": "".join(rng.choice('aé日😀 "') for _ in range(n))}
                   for k in ("a", "b")]
    values += [{"u": "no uri"}, {"u": "http://a.example/ x"}, {"k": "a"}, {}]
    for value in list(values):  # mutants inside the strings
        for key, string in value.items():
            i = rng.randrange(len(string) + 1)
            values += [{**value, key: string[:i] + string[i + 1:]},
                       {**value, key: string[:i] + rng.choice('"x\\ ') + string[i:]}]
    texts = [json.dumps(value, ensure_ascii=False) for value in values]
    verdicts = [structure.is_valid(value) and not (
        isinstance(value.get("u"), str) and re.fullmatch(FORMATS["uri"], value["u"]) is None)
        for value in values]
    assert 15 < sum(verdicts) < len(texts) - 15
    for text, valid in zip(texts, verdicts):
        assert pd.accepts(text.encode()) == valid, text


def test_masks_of_a_count_met_with_other_branches_agree_with_byte_walks(smollm2):
    grammar = grammarc.compile(json.dumps(ALLOF_COUNTED), smollm2, "json-schema")
    sample = _token_sample(smollm2, 'http://a.example/xy?=, "k": "a", "v": "aé日😀 "')
    for value, valid in [({"u": "http://a.example/" + "x" * 283}, True),
                         ({"u": "http://a.example/" + "x" * 284}, False),
                         ({"k": "a", "v": "é" * 200}, True), ({"k": "a", "v": "é" * 201}, False),
                         ({"k": "b", "v": "é" * 201}, True)]:
        _assert_masks_follow_bytes(grammar, smollm2, json.dumps(value, ensure_ascii=False),
                                   valid, sample)


def test_a_least_length_above_the_shortest_text_cuts_the_texts_first():
    """Where `minLength` asks more characters than the shortest text of a format or pattern
    (`uri-reference` reads the empty string), the texts are cut to that length first and the
    most is counted: `minLength: 1` with `maxLength: 2048` was past --max-states."""
    import re
    from grammarc.frontends.json_schema.strings import FORMATS

    schema = {"type": "object", "properties": {
        "r": {"type": "string", "format": "uri-reference", "minLength": 1, "maxLength": 2048},
        "w": {"type": "string", "pattern": "^(\\S+ ?)*$", "minLength": 3, "maxLength": 500}},
        "additionalProperties": False}
    pd = build_automaton("json-schema", json.dumps(schema), None, FrontendOptions())
    assert isinstance(pd, PushdownDFA) and pd.num_states < 2000
    rules = {"r": (FORMATS["uri-reference"], 1, 2048), "w": (r"(?:\S++ ?+)*+", 3, 500)}
    rng = random.Random(31)
    values = [("r", ""), ("r", "a"), ("r", "/"), ("r", "a" * 2048), ("r", "a" * 2049),
              ("r", "#" + "x" * 2047), ("r", " "), ("w", ""), ("w", "ab"), ("w", "a b"),
              ("w", "abc"), ("w", "a  b"), ("w", "ab " * 166 + "ab"), ("w", "ab " * 167)]
    for _ in range(60):
        key = rng.choice("rw")
        values.append((key, "".join(rng.choice("ab /#?x") for _ in range(rng.randrange(6)))))
    verdicts = [re.fullmatch(rules[key][0], value) is not None and
                rules[key][1] <= len(value) <= rules[key][2] for key, value in values]
    assert 10 < sum(verdicts) < len(values) - 10
    for (key, value), valid in zip(values, verdicts):
        text = json.dumps({key: value})
        assert pd.accepts(text.encode()) == valid, text


# ------------------------------------------- a count inside a union of machines (issue 41)
UNION_COUNTED = {
    "type": "object",
    "properties": {
        # two open objects: `name` is a long string in one branch, any value in the other
        "either": {"anyOf": [
            {"type": "object", "properties": {"name": {"type": "string", "maxLength": HIGH}},
             "required": ["name"]},
            {"type": "object", "properties": {"size": {"type": "string", "maxLength": HIGH}},
             "required": ["size"]}]},
        # a string within bounds, or one of a pattern without bound
        "word": {"anyOf": [{"type": "string", "minLength": LOW, "maxLength": HIGH},
                           {"type": "string", "pattern": "^[a-z]+@[a-z]+$"}]},
        # the same, short texts too: a token such as `""` opens the union, leaves the
        # count below its least, and its twin returns
        "tag": {"anyOf": [{"type": "string", "minLength": LOW, "maxLength": HIGH},
                          {"type": "string", "pattern": "^[a-z]*$"}]},
    },
    "additionalProperties": False,
}


def _union_values(rng: random.Random) -> list[str]:
    """Documents around the bounds of `UNION_COUNTED`, of every branch, and mutants of their
    strings (keys in the schema's order: the schema's order is not what is tested here)."""
    values: list[dict] = []
    for length in [0, 1, LOW - 1, LOW, HIGH - 1, HIGH, HIGH + 1, HIGH + 2, 3 * HIGH]:
        name = _string(rng, length)
        values += [{"either": {"name": name}}, {"either": {"name": name, "size": "3"}},
                   {"either": {"name": name, "size": name}}, {"either": {"name": [name, 1]}},
                   {"word": "x" * length}, {"word": "x" * length + "@y"},
                   {"word": "x" * max(length - 1, 0) + "é"}]
    values += [{"either": {"size": 2}}, {"either": {"size": "2"}}, {"either": {}},
               {"word": "@"}, {"word": "a@"}, {"tag": ""}, {"tag": "abc"}, {"tag": "ab1"},
               {"tag": "x" * HIGH + "1"}, {"tag": "x" * (LOW - 1) + "1"}]

    def mutants(value):
        if isinstance(value, str):
            i = rng.randrange(len(value) + 1)
            return [value[:i] + value[i + 1:], value[:i] + rng.choice('"x@\\}') + value[i:]]
        if isinstance(value, dict):
            return [{**value, key: m} for key in value for m in mutants(value[key])]
        return []

    values += [m for value in list(values) for m in mutants(value)]
    return [json.dumps(value, ensure_ascii=False) for value in values]


def _verdict(validator, text: str) -> bool:
    try:
        return validator.is_valid(json.loads(text))
    except ValueError:
        return False


@pytest.fixture(scope="module")
def union_counted(smollm2) -> CallGrammar:
    return grammarc.compile(json.dumps(UNION_COUNTED), smollm2, "json-schema")


def test_a_count_survives_a_union_of_machines():
    """A long string that one branch of an `anyOf` bounds and another reads as any value, or
    as a pattern's texts, is one union of the two machines that keeps the count while the
    bounded one can still end, and reads on as the other where it cannot: a few hundred
    states whatever the bound (spelled out, 4,096 characters were past --max-states)."""
    for bound in (HIGH, 4096, 2**31 - 1):
        schema = json.loads(json.dumps(UNION_COUNTED).replace(f": {HIGH}", f": {bound}"))
        pd = build_automaton("json-schema", json.dumps(schema), None, FrontendOptions())
        assert isinstance(pd, PushdownDFA) and pd.num_states < 3000, bound
        united = [m for m, name in enumerate(pd.machine_names)
                  if " | " in name and pd.counters.loop[m]]
        assert len(united) >= 2, pd.machine_names
        assert pd.counters.twin.any()
    validator = jsonschema.Draft202012Validator(UNION_COUNTED)
    texts = _union_values(random.Random(11))
    verdicts = [_verdict(validator, text) for text in texts]
    assert 20 < sum(verdicts) < len(texts) - 20
    pd = build_automaton("json-schema", json.dumps(UNION_COUNTED), None, FrontendOptions())
    for text, valid in zip(texts, verdicts):
        assert pd.accepts(text.encode()) == valid, text


def test_masks_of_a_count_in_a_union_agree_with_byte_walks(union_counted, smollm2):
    """Tokens that pass the bound of the counted machine are read by the state's twin: the
    masks, the states tokens lead to and the byte walks agree, and the texts are judged as
    `jsonschema` judges them."""
    validator = jsonschema.Draft202012Validator(UNION_COUNTED)
    sample = _token_sample(smollm2, '{"either": {"name": "xé日😀\\n", "size": "3"}, "word": '
                                    '"a@b", "tag": "", "tag": "abc"}')
    rng = random.Random(13)
    for length in (LOW - 1, LOW, HIGH - 1, HIGH, HIGH + 1):
        for value in ({"either": {"name": _string(rng, length)}},
                      {"either": {"name": _string(rng, length), "size": "1"}},
                      {"word": "x" * length}, {"word": "x" * length + "@y"},
                      {"tag": "x" * length + "1"}):
            text = json.dumps(value, ensure_ascii=False)
            _assert_masks_follow_bytes(union_counted, smollm2, text, _verdict(validator, text),
                                       sample)
    for value in ("", "abc"):
        _assert_masks_follow_bytes(union_counted, smollm2, json.dumps({"tag": value}), True,
                                   sample)


def test_a_union_that_counts_samples_valid_documents_within_budgets(union_counted, smollm2):
    validator = jsonschema.Draft202012Validator(UNION_COUNTED)
    rng = np.random.default_rng(17)
    eos = set(smollm2.eos_token_ids)
    for budget in (LOW + 10, 3 * HIGH):
        for _ in range(8):
            tokens = union_counted.sample_tokens(budget, rng, eos_probability=0.02)
            assert tokens is not None and len(tokens) <= budget and tokens[-1] in eos
            text = smollm2.decode_bytes([t for t in tokens if t not in eos]).decode()
            assert validator.is_valid(json.loads(text)), text


def test_twins_round_trip_in_format_version_6(union_counted, tmp_path):
    loaded = reloaded(union_counted, tmp_path / "union.safetensors")
    assert loaded.metadata["format_version"] == 6
    for length in (HIGH, HIGH + 1):
        for text in ('{"either": {"name": "' + "x" * length + '"}}',
                     '{"word": "' + "x" * length + '@y"}'):
            assert loaded.matches(text) == union_counted.matches(text)
            assert_same_mask(loaded, union_counted, text[:-4].encode())

    def edit(tensors: dict[str, np.ndarray]) -> None:
        at = int(np.flatnonzero(tensors["count_twin"])[0])
        tensors["count_twin"][at] = at  # a state inside the loop: no twin

    _assert_forgery_refused(union_counted, tmp_path / "union.npz", edit,
                            "count_twin must lead from a state inside a loop")


@pytest.mark.parametrize("most,max_states", [(20_000, 100_000), (1_000, 10_000)])
def test_objects_whose_values_are_read_inline_keep_a_long_string_counted(most, max_states):
    """`anyOf` of two open objects: the long string of one meets any value of the other, and
    the other's integer meets the first's any value, read inline. Inlined, the string would
    be spelled out (460,258 states at 20,000 characters, past --max-states); past
    `SPELLED_COUNTS` characters, or where inlining ends past --max-states (23,883 states at
    1,000), the document is linked again with every value a machine of its own, whose union
    keeps the count."""
    schema = {"anyOf": [
        {"type": "object", "properties": {"name": {"type": "string", "maxLength": most},
                                          "kind": {"const": "a"}}},
        {"type": "object", "properties": {"kind": {"const": "b"}, "size": {"type": "integer"}}}]}
    pd = build_automaton("json-schema", json.dumps(schema), None,
                         FrontendOptions(max_states=max_states))
    assert isinstance(pd, PushdownDFA) and pd.num_states < 2000 and pd.counters.twin.any()
    validator = jsonschema.Draft202012Validator(schema)
    values = [{"kind": "a", "size": 1}, {"name": 5, "kind": "b", "size": 2}, {"name": 5,
                                                                              "kind": "a"}]
    for length in (most - 1, most, most + 1):
        name = "é" * length
        values += [{"name": name}, {"name": name, "kind": "a"}, {"name": name, "kind": "b"},
                   {"name": name, "kind": "a", "size": 3}, {"name": [name]}]
    verdicts = [validator.is_valid(value) for value in values]
    assert 5 < sum(verdicts) <= len(values) - 3
    for value, valid in zip(values, verdicts):
        assert pd.accepts(json.dumps(value, ensure_ascii=False).encode()) == valid, value


def _random_union(rng: random.Random) -> dict:
    """An `anyOf` of two or three strings, bounded past `COUNTED_LENGTH`, of a pattern
    (counted under a long `maxLength`, or not), any string, an integer or a constant; in an
    object one time in two."""
    def branch() -> dict:
        kind = rng.randrange(6)
        if kind == 5:  # a pattern's characters counted across its states
            return {"type": "string", "maxLength": 1501, "pattern": "^(ab)*$"}
        if kind == 0:
            return {"type": "string", "minLength": rng.choice([0, 1, LOW]), "maxLength": HIGH}
        if kind == 1:
            return {"type": "string", "pattern": rng.choice(
                ["^[a-c]*$", "^a+b*$", "^[a-c]+@[a-c]+$", "^x{0,3}$", "^[^@]*@$"])}
        if kind == 2:
            return {"type": "string"}
        if kind == 3:
            return {"type": "integer"}
        return {"const": rng.choice(["abc", "x" * LOW, 5])}

    union = {"anyOf": [branch() for _ in range(rng.randint(2, 3))]}
    if rng.random() < 0.5:
        return union
    return {"type": "object", "properties": {"k": union, "n": {"type": "integer"}},
            "required": ["k"], "additionalProperties": False}


def test_random_unions_that_count_accept_exactly():
    """Random `anyOf`s of a long string beside patterns, strings, integers and constants
    (one count kept in a union with twins, two counts inlined): every text around the bounds
    is judged as `jsonschema` judges it."""
    rng = random.Random(41)
    united = 0
    for _ in range(100):
        schema = _random_union(rng)
        pd = build_automaton("json-schema", json.dumps(schema), None, FrontendOptions())
        united += isinstance(pd, PushdownDFA) and bool(pd.counters.twin.any())
        validator = jsonschema.Draft202012Validator(schema)
        values: list = [5, -1, "abc", "a@b", "@", "xxx", "", "x" * LOW, "ab" * 750,
                        "ab" * 751, "ab" * 750 + "a", "ab" * 3]
        for length in (0, 1, 3, LOW - 1, LOW, HIGH, HIGH + 1):
            for alphabet in ("abc", "ab@c", "xé", "x"):
                values.append("".join(rng.choice(alphabet) for _ in range(length)))
        if "properties" in schema:
            values = [{"k": value} for value in values] + [{"k": "a", "n": 1}, {"n": 1}]
        for value in values:
            text = json.dumps(value, ensure_ascii=False)
            assert pd.accepts(text.encode()) == validator.is_valid(value), (schema, text)
    assert united >= 25


def test_masks_of_random_unions_that_count_agree_with_byte_walks(smollm2):
    """Three of the random unions that keep a count, along texts past each bound."""
    rng = random.Random(43)
    sample = _token_sample(smollm2, '{"k": "abc@xé", "n": 5}')
    checked = 0
    while checked < 3:
        schema = _random_union(rng)
        pd = build_automaton("json-schema", json.dumps(schema), None, FrontendOptions())
        if not (isinstance(pd, PushdownDFA) and pd.counters.twin.any()):
            continue
        grammar = grammarc.compile(json.dumps(schema), smollm2, "json-schema")
        validator = jsonschema.Draft202012Validator(schema)
        for value in ("a" * (HIGH + 1), "x" * (LOW - 1) + "@", "a@b"):
            value = {"k": value} if "properties" in schema else value
            text = json.dumps(value)
            _assert_masks_follow_bytes(grammar, smollm2, text, validator.is_valid(value),
                                       sample)
        checked += 1


# a pattern's characters counted inside a union: the word pattern or any value, pairs of
# "ab" or a's (the twin of a union of two patterns is the other pattern)
TEXT_UNIONS = {
    "type": "object",
    "properties": {
        "ab": {"anyOf": [{"type": "string", "maxLength": 1501, "pattern": "^(ab)*$"},
                         {"type": "string", "pattern": "^a+$"}]},
        "o": {"anyOf": [
            {"type": "object", "properties": {"w": TEXT_COUNTED["properties"]["w"]},
             "required": ["w"]},
            {"type": "object", "properties": {"t": {"type": "string", "maxLength": HIGH}},
             "required": ["t"]}]},
    },
    "additionalProperties": False,
}


def _text_union_texts(rng: random.Random) -> list[str]:
    values: list[dict] = []
    for pairs in (0, 1, 749, 750, 751):
        values += [{"ab": "ab" * pairs}, {"ab": "a" * (2 * pairs + 1)}, {"ab": "ab" * pairs + "a"}]
    for words, length in ((1, 2), (10, 59), (10, 60), (11, 60), (3, 61), (30, 100)):
        w = json.loads(f'"{_words(rng, words, length)}"')
        values += [{"o": {"w": w}}, {"o": {"w": w, "t": "x" * HIGH}},
                   {"o": {"w": w, "t": "x" * (HIGH + 1)}}, {"o": {"t": w}}]
    return [json.dumps(value, ensure_ascii=False) for value in values]


def test_patterns_counted_inside_unions_accept_exactly():
    """A pattern under a long `maxLength` (its characters counted across its states) in a
    union with another pattern or any value keeps its count there too: a few states, every
    text judged as `jsonschema` judges it (ECMA-262 patterns)."""
    pd = build_automaton("json-schema", json.dumps(TEXT_UNIONS), None, FrontendOptions())
    assert isinstance(pd, PushdownDFA) and pd.num_states < 5000 and pd.counters.twin.any()
    assert pd.counters.need.any()  # a pattern's characters, counted in a union
    validator = exact_validator(TEXT_UNIONS, ecma_patterns=True)
    texts = _text_union_texts(random.Random(47))
    verdicts = [_valid(validator, text) for text in texts]
    assert 10 < sum(verdicts) < len(texts) - 5
    for text, valid in zip(texts, verdicts):
        assert pd.accepts(text.encode()) == valid, text


def test_masks_of_patterns_counted_inside_unions_agree_with_byte_walks(smollm2):
    grammar = grammarc.compile(json.dumps(TEXT_UNIONS), smollm2, "json-schema")
    assert grammar.metadata["format_version"] == 6
    validator = exact_validator(TEXT_UNIONS, ecma_patterns=True)
    sample = _token_sample(smollm2, '"ab", "aaa", "a b", "é日 😀\\n\\u00e9x"} ", " a  b\tab')
    rng = random.Random(53)
    texts = [json.dumps({"ab": "ab" * 750 + "a"}), json.dumps({"ab": "a" * 30}),
             json.dumps({"ab": "ab" * 3 + "a"})]
    for words, length in ((10, 60), (11, 60), (3, 61)):
        w = json.loads(f'"{_words(rng, words, length)}"')
        texts += [json.dumps({"o": {"w": w}}, ensure_ascii=False),
                  json.dumps({"o": {"w": w, "t": "x"}}, ensure_ascii=False)]
    for text in texts:
        _assert_masks_follow_bytes(grammar, smollm2, text, _valid(validator, text), sample)
