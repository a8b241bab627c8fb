"""Machines linked by calls: the determinism check, the byte-level rules against a brute-force
reading, token masks against byte walks on SmolLM2, JSON values nested 30 deep judged by
jsonschema, unions of machines that return by exit class, artifact format versions 2 and 5,
and the runtime API (numpy, torch, processor)."""

from __future__ import annotations

import json
import random
from typing import Any, Callable

import jsonschema
import numpy as np
import pytest

import grammarc
from grammarc.automaton import ByteDFA
from grammarc.automaton.dfa import build_dfa
from grammarc.automaton.expr import (
    Automaton, Call, MachineSet, alt, charset, concat, fingerprint, literal, repeat, same_spelling,
)
from grammarc.automaton.callgraph import starting_bytes
from grammarc.automaton.linking import deterministic_pushdown, inline_calls, language_automaton
from grammarc.automaton.pushdown import build_pushdown
from grammarc.automaton.signals import NotDeterministicError
from grammarc.errors import ArtifactError
from grammarc.runtime.calls import CallGrammar
from helpers import assert_same_mask, reloaded, walk_within_budget

DIGITS = charset([(48, 57)])
LIST = MachineSet(  # nested lists of numbers: [1, [22, []], 3]
    concat(literal("v="), Call("value"), literal(";")),
    (("value", alt(repeat(DIGITS, 1, None),
                   concat(literal("["), repeat(concat(Call("value"), repeat(
                       concat(literal(", "), Call("value")), 0, None)), 0, 1), literal("]")))),))
OPEN_SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"},
                                                "tags": {"type": "array",
                                                         "items": {"type": "string"}}},
               "required": ["id"]}


def _nested(rng: random.Random, depth: int):
    if depth == 0 or rng.random() < 0.25:
        return rng.choice([1, 22, -3, 4.5, "s", 'q"\\', None, True, [], {}])
    if rng.random() < 0.5:
        return [_nested(rng, depth - 1) for _ in range(rng.randint(1, 3))]
    return {rng.choice("abcd") + str(i): _nested(rng, depth - 1) for i in range(rng.randint(1, 3))}


def _deep(depth: int, leaf):
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"k": value, "n": level}
    return value


# a key's value that is a `P` in one branch and a `T` in another, both reaching back to both
# (the shape of a real schema's typeReference/property): only their union can be called
UNITED_SCHEMA = {"$defs": {
    "T": {"anyOf": [
        {"type": "string", "maxLength": 3},
        {"type": "object", "properties": {"map": {
            "type": "object", "patternProperties": {"^[a-z]+$": {"$ref": "#/$defs/P"}},
            "additionalProperties": False, "minProperties": 1}},
         "required": ["map"], "additionalProperties": False},
        {"type": "object", "properties": {"map": {
            "type": "object", "patternProperties": {"^[a-z]+$": {"$ref": "#/$defs/T"}},
            "additionalProperties": False, "minProperties": 1, "maxProperties": 1},
            "idx": {"enum": ["s", "n"]}},
         "required": ["map", "idx"], "additionalProperties": False}]},
    "P": {"type": "object", "properties": {"type": {"$ref": "#/$defs/T"},
                                           "opt": {"type": "boolean"}},
          "required": ["type"], "additionalProperties": False}},
    "$ref": "#/$defs/T"}


def _united_value(rng: random.Random, depth: int):
    """A value near `UNITED_SCHEMA`'s: valid about one time in ten."""
    roll = rng.random()
    if depth <= 0 or roll < 0.25:
        return rng.choice(["ab", "abcd", "", 3, None, True])
    if roll < 0.6:
        value = {"map": {rng.choice("abc") + rng.choice(["", "x"]): _united_value(rng, depth - 1)
                         for _ in range(rng.choice([1, 1, 2]))}}
        if rng.random() < 0.5:
            value["idx"] = rng.choice(["s", "n", "q"])
        if rng.random() < 0.1:
            value["zz"] = 1
        return value
    value = {"type": _united_value(rng, depth - 1)}
    if rng.random() < 0.5:
        value["opt"] = rng.choice([True, 1])
    return value if rng.random() >= 0.1 else {"opt": True}


@pytest.fixture(scope="module")
def open_grammar(smollm2):
    return grammarc.compile_json_schema(OPEN_SCHEMA, smollm2)


@pytest.fixture(scope="module")
def united_grammar(smollm2):
    return grammarc.compile_json_schema(UNITED_SCHEMA, smollm2)


@pytest.fixture(scope="module")
def value_machines_grammar(smollm2):
    """`INLINE_BESIDE_CALL`: linked only once its values are machines."""
    return grammarc.compile_json_schema(INLINE_BESIDE_CALL, smollm2)


# --------------------------------------------------------------------- the machines
def test_machines_read_nested_text_and_inline_to_the_same_language_up_to_a_depth():
    pd = build_pushdown(LIST, 10_000)
    assert pd.machine_names == ("", "value") and len(pd.call_machine) >= 2
    flat = inline_calls(LIST, 3, 10_000)
    from grammarc.automaton import build_dfa

    flat_dfa = build_dfa(flat)
    for text, ok in [("v=1;", True), ("v=[];", True), ("v=[1, [22, []], 3];", True),
                     ("v=" + "[" * 30 + "7" + "]" * 30 + ";", True), ("v=[1,2];", False),
                     ("v=[1, [2];", False), ("v=[[1]]];", False), ("v=;", False)]:
        assert pd.accepts(text.encode()) == ok, text
        depth = text.count("[")
        if depth <= 2:
            assert flat_dfa.accepts(text.encode()) == ok, text


@pytest.mark.parametrize("machines,reason", [
    (MachineSet(Call("m"), (("m", repeat(literal("a"), 0, 1)),)), "accepts the empty text"),
    (MachineSet(alt(concat(Call("m"), literal("x")), literal("ab")), (("m", literal("ac")),)),
     "may start a call"),
    (MachineSet(concat(Call("n"), literal("1")), (("n", repeat(DIGITS, 1, None)),)),
     "may end or go on"),
    (MachineSet(Call("e"), (("e", alt(concat(Call("e"), literal("+1")), literal("1"))),)),
     "left recursion"),
])
def test_machines_the_next_byte_cannot_decide_are_refused(machines, reason):
    with pytest.raises(NotDeterministicError, match=reason):
        build_pushdown(machines, 10_000)


def test_machines_in_doubt_are_inlined_and_the_others_kept():
    """A machine whose call the next byte cannot decide is inlined where it is called (exact:
    it does not recurse); the machines that are decided stay machines, and the language is
    the same."""
    machines = MachineSet(
        alt(concat(Call("m"), literal("x")), literal("ab"), concat(literal("("), LIST.root)),
        (("m", concat(literal("a"), Call("value"), literal("c"))), *LIST.machines))
    with pytest.raises(NotDeterministicError) as refused:
        build_pushdown(machines, 10_000)
    assert refused.value.machines == {"m"}
    pd = deterministic_pushdown(machines, 10_000)
    assert pd.machine_names == ("", "value")
    for text, ok in [("a[1, [2]]cx", True), ("a7cx", True), ("ab", True), ("(v=[[3]];", True),
                     ("a7c", False), ("a[1cx", False), ("abx", False), ("(v=3", False)]:
        assert pd.accepts(text.encode()) == ok, text


def test_copies_of_a_machine_are_called_as_one():
    """Machines with equal DFAs are one machine, then their callers that become equal: the
    root's choice between two copies is no conflict, nothing is inlined, the language is the
    same. A copy of a recursive machine that does not recurse itself stays apart (it may
    still be inlined)."""
    value = dict(LIST.machines)["value"]
    pair = concat(literal("<"), Call("value"), literal(">"))
    machines = MachineSet(
        alt(concat(literal("a"), Call("p"), literal("x")), concat(literal("a"), Call("q"),
                                                               literal("y")),
            concat(literal("b"), Call("r")), concat(literal("c"), Call("s")),
            concat(literal("d"), Call("copy"))),
        (("p", pair), ("q", pair), ("r", concat(literal("("), Call("p"))),
         ("s", concat(literal("("), Call("q"))), ("copy", value), *LIST.machines))
    pd = deterministic_pushdown(machines, 10_000)
    assert pd.machine_names == ("", "p", "r", "copy", "value")
    for text, ok in [("a<[1, [2]]>x", True), ("a<3>y", True), ("b(<4>", True), ("c(<[]>", True),
                     ("d[5, [6]]", True), ("a<3>", False), ("a<3>z", False), ("b(<4>x", False),
                     ("c<4>", False), ("d[5", False)]:
        assert pd.accepts(text.encode()) == ok, text


def test_a_recursive_copy_of_the_root_is_called_as_the_root():
    """A machine whose DFA is the root's (a schema's `$ref: "#"`) is the root, called from
    inside itself: its states are in the table once, and the language is the same."""
    value = dict(LIST.machines)["value"]
    pd = build_pushdown(MachineSet(value, LIST.machines), 10_000)
    assert pd.machine_names == ("",)
    assert len(pd.call_machine) and not pd.call_machine.any()  # every call is of the root
    for text, ok in [("7", True), ("[1, [22, []], 3]", True), ("[" * 30 + "]" * 30, True),
                     ("[" * 30 + "]" * 29, False), ("[1,]", False), ("", False)]:
        assert pd.accepts(text.encode()) == ok, text


def test_bodies_spelled_alike_are_built_once():
    """Trees that differ only in the identity of equal automata (`==` compares automata by
    identity) have one fingerprint and the same spelling, so the linker builds their DFA
    once; a different automaton or call is a different spelling."""
    ab, ab_again, ac = (Automaton(build_dfa(literal(text))) for text in ("ab", "ab", "ac"))
    one, two = (concat(literal("<"), leaf, Call("x")) for leaf in (ab, ab_again))
    assert one != two and fingerprint(one) == fingerprint(two) and same_spelling(one, two)
    assert not same_spelling(one, concat(literal("<"), ac, Call("x")))
    assert not same_spelling(one, concat(literal("<"), ab, Call("y")))
    built: dict = {}
    machines = (("x", literal("z")),)
    first = build_pushdown(MachineSet(one, machines), 10_000, built)
    assert len(built) == 2
    again = build_pushdown(MachineSet(two, machines), 10_000, built)
    assert len(built) == 2 and again.num_states == first.num_states
    assert again.accepts(b"<abz") and not again.accepts(b"<acz")


@pytest.mark.parametrize("expr,expected", [
    (LIST.root, b"v"),
    (Call("value"), b"0123456789["),
    (concat(repeat(literal("-"), 0, 1), charset([(0xE9, 0xE9), (0x4E00, 0x4E00)])),
     b"-\xc3\xe4"),
    (repeat(literal("a"), 0, 2), None),          # may be empty
    (Call("unknown"), None),                     # a machine not built yet
    (alt(Call("left"), literal("x")), None),     # left recursion
])
def test_starting_bytes(expr, expected):
    bodies = {"value": dict(LIST.machines)["value"],
              "left": concat(Call("left"), literal("+"))}
    found = starting_bytes(expr, bodies.get)
    if expected is None:
        assert found is None
    else:
        assert bytes(np.flatnonzero(found).tolist()) == bytes(sorted(expected))


def test_recursive_machines_in_doubt_are_not_inlined():
    recursive = MachineSet(alt(concat(Call("value"), literal("x")), literal("[a")),
                           LIST.machines)
    with pytest.raises(NotDeterministicError) as refused:
        deterministic_pushdown(recursive, 10_000)
    assert refused.value.machines == {"value"}


def test_ambiguous_calls_are_inlined_with_a_notice():
    """Machines the next byte cannot tell calling, returning and going on apart in are inlined
    (bounded), as before calls existed. (Once shown with the JSON whitespace regex `[0-9]?`,
    which a number can go on into; whitespace regexes now match JSON whitespace only.)"""
    notices: list[str] = []
    doubtful = MachineSet(alt(concat(Call("value"), literal("x")), literal("[a")),
                          LIST.machines)
    dfa = language_automaton(doubtful, 10_000, 2, notices.append)
    assert isinstance(dfa, ByteDFA) and any("calls inlined" in n for n in notices)
    assert dfa.accepts(b"[a") and dfa.accepts(b"12x") and dfa.accepts(b"[1, []]x")
    assert not dfa.accepts(b"[[[[[1]]]]]x")


def test_a_machine_set_a_fallback_leads_back_to_is_linked_once(monkeypatch):
    """The JSON front end's value machines fall back to the machines they retried, which
    failed already: `language_automaton` takes their fallback at once instead of linking the
    same machines again (the slowest corpus schema linked one set twice, 2 s each)."""
    import grammarc.automaton.linking as linking

    linked: list[MachineSet] = []
    real = linking.deterministic_pushdown

    def counting(machines, *args, **kwargs):
        linked.append(machines)
        return real(machines, *args, **kwargs)

    monkeypatch.setattr(linking, "deterministic_pushdown", counting)
    root = alt(concat(Call("value"), literal("x")), literal("[a"))
    first = MachineSet(root, LIST.machines)
    retried = MachineSet(root, LIST.machines, alternative=lambda: first)  # first again
    other = MachineSet(root, LIST.machines, alternative=lambda: retried)
    dfa = language_automaton(other, 10_000, 2, lambda message: None)
    assert isinstance(dfa, ByteDFA) and dfa.accepts(b"12x") and dfa.accepts(b"[1, []]x")
    assert linked == [other]  # the same root and machines: linked once, one failure


def test_calls_in_doubt_of_recursive_machines_are_a_call_of_their_union():
    """`T` and `P` both start with `{` where a key's value may be either: inlining cannot
    end (each reaches back to both), so that point calls the union `T | P`, which reads the
    value as both at once and returns by which of them accept it. Exact as judged by
    jsonschema on 3,000 values nested up to 8 deep, with no notice."""
    from grammarc.frontends.json_schema import canonical_dumps
    from helpers import accepts, dfa_of

    automaton, notices = dfa_of(UNITED_SCHEMA)
    assert not notices and automaton.has_unions
    assert [name for name in automaton.machine_names if " | " in name] == ["root | #/$defs/P (1)"]
    validator = jsonschema.Draft202012Validator(UNITED_SCHEMA)
    rng = random.Random(5)
    verdicts = [0, 0]
    for _ in range(3000):
        value = _united_value(rng, rng.choice([1, 2, 3, 5, 8]))
        valid = validator.is_valid(value)
        verdicts[valid] += 1
        assert accepts(automaton, canonical_dumps(UNITED_SCHEMA, value)) == valid, value
    assert verdicts[True] > 200 and verdicts[False] > 2000


def _random_recursive_schema(rng: random.Random) -> dict:
    """Two or three definitions, each an `anyOf` of objects whose key `a` holds another
    definition (or an array of one) and of a scalar: calls of different recursions at the
    same key, which unions decide."""
    count = rng.choice([2, 3])

    def ref() -> dict:
        return {"$ref": f"#/$defs/D{rng.randrange(count)}"}

    definitions = {}
    for i in range(count):
        branches = []
        for _ in range(rng.choice([2, 3])):
            other = rng.choice("bc")
            branches.append({
                "type": "object", "additionalProperties": False,
                "properties": {"a": rng.choice([ref(), {"type": "array", "items": ref()}]),
                               other: rng.choice([{"type": "integer"},
                                                  {"enum": ["x", "y"]}, ref()])},
                "required": ["a"] + ([other] if rng.random() < 0.6 else [])})
        branches.append(rng.choice([{"type": "string"}, {"type": "integer"}]))
        definitions[f"D{i}"] = {"anyOf": branches}
    return {"$defs": definitions, "$ref": "#/$defs/D0"}


def _random_recursive_value(rng: random.Random, schema: dict, node: dict, depth: int):
    """A value of `node` (in `_random_recursive_schema`'s `schema`) drawn from its
    branches, changed a little now and then (a key swapped or dropped, a value replaced):
    valid about half the time, so that the branch a value belongs to decides."""
    if "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
    if "anyOf" in node:
        node = rng.choice(node["anyOf"] if depth > 0 else node["anyOf"][-1:])
    if node.get("type") == "array":
        return [_random_recursive_value(rng, schema, node["items"], depth - 1)
                for _ in range(rng.choice([1, 2]))]
    if node.get("type") != "object":
        return rng.choice(node["enum"]) if "enum" in node else \
            "x" if node["type"] == "string" else 1
    value = {}
    for key, child in node["properties"].items():
        if key in node["required"] or rng.random() < 0.5:
            value[key] = _random_recursive_value(rng, schema, child, depth - 1)
    roll = rng.random()
    if roll < 0.1:
        value = {("c" if key == "b" else "b" if key == "c" else key): v for key, v in value.items()}
    elif roll < 0.2:
        value.pop(rng.choice(list(value)))
    elif roll < 0.3:
        value[rng.choice(list(value))] = rng.choice(["y", 2, [1]])
    return value


def test_random_recursions_called_as_unions_judge_values_as_jsonschema_does():
    """Random definitions whose branches call different recursions at one key: where the
    linker calls a union, 200 values per schema drawn from its branches (nested up to 7
    deep, some changed) are accepted exactly when jsonschema says they are valid."""
    from grammarc.errors import GrammarError
    from grammarc.frontends.json_schema import canonical_dumps
    from helpers import accepts, dfa_of

    rng = random.Random(1)
    united, verdicts = 0, [0, 0]
    for _ in range(40):
        schema = _random_recursive_schema(rng)
        try:
            automaton, _ = dfa_of(schema)
        except GrammarError:  # past the state limit once unrolled
            continue
        if not getattr(automaton, "has_unions", False):
            continue
        united += 1
        validator = jsonschema.Draft202012Validator(schema)
        for _ in range(200):
            value = _random_recursive_value(rng, schema, schema, rng.choice([1, 2, 3, 5, 7]))
            verdicts[validator.is_valid(value)] += 1
            assert accepts(automaton, canonical_dumps(schema, value)) == \
                validator.is_valid(value), (schema, value)
    assert united >= 3 and min(verdicts) > 100


# a recursion called at key `b` where another branch reads an enum there inline
INLINE_BESIDE_CALL = {"$defs": {"D0": {"anyOf": [
    {"type": "object", "additionalProperties": False, "required": ["a"],
     "properties": {"a": {"$ref": "#/$defs/D0"}, "b": {"enum": ["x", "y"]}}},
    {"type": "object", "additionalProperties": False, "required": ["a", "b"],
     "properties": {"a": {"$ref": "#/$defs/D0"}, "b": {"$ref": "#/$defs/D0"}}},
    {"type": "string"}]}}, "$ref": "#/$defs/D0"}


def test_a_recursion_in_doubt_with_a_value_read_inline_is_decided_by_value_machines():
    """At `"b":` one branch reads `"x"` inline and the other calls the recursion, which may
    start with `"` too: a call in doubt with the caller's own bytes, which no union decides.
    The document compiled again with each property value (and array item) a machine makes
    both calls, whose union (after the string machine it meets is inlined) decides; no
    recursion is unrolled: values nested 12 deep are judged as jsonschema judges them."""
    from grammarc.frontends.json_schema import canonical_dumps
    from helpers import accepts, dfa_of

    automaton, notices = dfa_of(INLINE_BESIDE_CALL)
    assert not notices and automaton.has_unions
    assert any("(value " in name for name in automaton.machine_names)
    validator = jsonschema.Draft202012Validator(INLINE_BESIDE_CALL)

    def nested(depth: int, leaf):
        return leaf if depth == 0 else {"a": nested(depth - 1, leaf), "b": "x"} \
            if depth % 2 else {"a": "s", "b": nested(depth - 1, leaf)}

    for value, valid in ((nested(12, "t"), True), (nested(11, {"a": "s"}), True),
                         (nested(12, {"b": "x"}), False), (nested(12, {"a": 1, "b": "x"}), False),
                         ({"a": "s", "b": "z"}, True), ({"a": {"a": "s"}, "b": 3}, False)):
        assert validator.is_valid(value) == valid, value
        assert accepts(automaton, canonical_dumps(INLINE_BESIDE_CALL, value)) == valid, value


def test_random_recursions_are_linked_not_unrolled():
    """The random schemas of `_random_recursive_schema` link (with unions of value machines,
    judged exactly by the test above them) rather than unroll their recursion: before value
    machines, three in four of these 40 unrolled (two in five with those of properties
    alone)."""
    from grammarc.errors import GrammarError
    from helpers import dfa_of

    rng = random.Random(5)
    unrolled = 0
    for _ in range(40):
        try:
            _, notices = dfa_of(_random_recursive_schema(rng))
        except GrammarError:
            unrolled += 1
            continue
        unrolled += any("unrolled" in notice for notice in notices)
    assert unrolled <= 2, unrolled


def test_united_machines_keep_what_the_unions_cannot_decide_in_doubt():
    """A call in doubt with the caller's own bytes (not another call) is not a union's to
    decide: the check fails as before, naming the same machine."""
    doubtful = MachineSet(alt(concat(Call("value"), literal("x")), literal("[a")),
                          LIST.machines)
    with pytest.raises(NotDeterministicError, match="may start a call of 'value'"):
        build_pushdown(doubtful, 10_000, unions=True)


# --------------------------------------------------------------------- JSON Schema
def test_open_values_accept_exactly_at_depth_30(open_grammar):
    """Extra properties hold any JSON value: nested 30 deep, valid ones are accepted and
    mutants judged by jsonschema (and json parsing) are accepted exactly when valid."""
    assert isinstance(open_grammar, CallGrammar)
    validator = jsonschema.Draft202012Validator(OPEN_SCHEMA)
    rng = random.Random(3)
    texts = []
    for depth in (1, 5, 30):
        for leaf in (1, "x", None, [], {}):
            texts.append(json.dumps({"id": 1, "tags": ["a"], "extra": _deep(depth, leaf)}))
    texts += [json.dumps({"id": 2, **{f"z{i}": _nested(rng, 6)}}) for i in range(40)]
    _assert_exact_on_mutants(open_grammar, texts, rng, validator.is_valid)


def _assert_exact_on_mutants(grammar, texts: list[str], rng: random.Random,
                             valid_value: Callable[[Any], bool]) -> None:
    """Each text and six mutants of it (one character changed, dropped or doubled) match
    exactly when they parse to a value that `valid_value` accepts, as `json.dumps` writes it."""
    mutants = []
    for text in texts:
        for _ in range(6):
            i = rng.randrange(len(text))
            mutants.append(rng.choice([text[:i] + text[i + 1:], text[:i] + text[i] + text[i:],
                                       text[:i] + rng.choice('[]{},:"1 ') + text[i + 1:]]))
    for text in texts + mutants:
        try:
            value = json.loads(text)
            valid = valid_value(value) and json.dumps(value) == text
        except ValueError:
            valid = False
        assert grammar.matches(text) == valid, text


@pytest.fixture(scope="module")
def any_value_grammar(smollm2):
    """Any JSON value: the root is a copy of the recursive "any value" machine, so it is
    called from inside itself."""
    return grammarc.compile_json_schema({}, smollm2)


@pytest.mark.parametrize("grammar_name", ["open_grammar", "any_value_grammar", "united_grammar",
                                         "value_machines_grammar"])
def test_masks_agree_with_byte_walks(grammar_name, request, smollm2):
    """For configurations met on random token walks (stacks included), a token is allowed
    exactly when its bytes keep the text a prefix of the language."""
    open_grammar = request.getfixturevalue(grammar_name)
    rng = np.random.default_rng(5)
    token_bytes = smollm2.token_bytes
    eos = set(smollm2.eos_token_ids)
    sample = [t for t in rng.choice(len(token_bytes), 1500, replace=False).tolist()
              if token_bytes[t] and t not in eos]
    for _ in range(6):
        tokens = open_grammar.sample_tokens(60, rng, eos_probability=0.1)
        state = open_grammar.initial_state
        for token in tokens[:12]:
            mask = open_grammar.mask(state)
            for candidate in sample + [token]:
                walked = open_grammar.walk_bytes(token_bytes[candidate], state) \
                    if candidate not in eos else state
                expected = bool(walked) if candidate not in eos else \
                    open_grammar.is_accepting(state)
                assert bool(mask[candidate]) == expected, (open_grammar.stack(state), candidate)
                if mask[candidate] and candidate not in eos:
                    after = open_grammar.next_state(state, candidate)
                    assert open_grammar.stack(after) == open_grammar.stack(walked)
            state = open_grammar.next_state(state, token)


@pytest.mark.parametrize("grammar_name,schema", [("open_grammar", OPEN_SCHEMA),
                                                ("united_grammar", UNITED_SCHEMA),
                                                ("value_machines_grammar", INLINE_BESIDE_CALL)])
def test_sampled_token_sequences_are_valid_instances(grammar_name, schema, request, smollm2):
    grammar = request.getfixturevalue(grammar_name)
    rng = np.random.default_rng(11)
    eos = set(smollm2.eos_token_ids)
    for _ in range(40):
        tokens = grammar.sample_tokens(50, rng, eos_probability=0.05)
        assert tokens is not None and len(tokens) <= 50 and tokens[-1] in eos
        text = smollm2.decode_bytes([t for t in tokens if t not in eos]).decode()
        jsonschema.validate(json.loads(text), schema)


def test_united_values_tokenized_anyhow_are_read_exactly(united_grammar, smollm2, tmp_path):
    """Values of `UNITED_SCHEMA` cut into tokens greedily or at random: every token is
    allowed exactly when the next state lives, EOS exactly at the end of a valid value, and
    a version 5 artifact, saved in either container, gives the same masks."""
    from grammarc.frontends.json_schema import canonical_dumps

    validator = jsonschema.Draft202012Validator(UNITED_SCHEMA)
    loaded = [reloaded(united_grammar, tmp_path / f"united{suffix}")
              for suffix in (".safetensors", ".npz")]
    assert all(g.metadata["format_version"] == 5 for g in loaded)
    ids_of = {}
    for token, data in enumerate(smollm2.token_bytes):
        if data:
            ids_of.setdefault(data, token)
    eos = smollm2.eos_token_ids[0]
    rng = random.Random(7)
    for _ in range(150):
        value = _united_value(rng, rng.choice([1, 2, 3, 5]))
        valid = validator.is_valid(value)
        data = canonical_dumps(UNITED_SCHEMA, value).encode()
        assert united_grammar.matches(data.decode()) == valid
        ids, at = [], 0
        while at < len(data):
            fits = [n for n in range(1, min(12, len(data) - at) + 1) if data[at:at + n] in ids_of]
            n = fits[-1] if rng.random() < 0.7 else rng.choice(fits)
            ids.append(ids_of[data[at:at + n]])
            at += n
        states = [united_grammar.initial_state] + [g.initial_state for g in loaded]
        for token in ids:
            masks = [g.mask(state) for g, state in zip([united_grammar, *loaded], states)]
            assert all(np.array_equal(masks[0], m) for m in masks[1:])
            states = [g.next_state(state, token)
                      for g, state in zip([united_grammar, *loaded], states)]
            assert bool(masks[0][token]) == bool(states[0])
            if not states[0]:
                break
        else:
            assert bool(united_grammar.mask(states[0])[eos]) == valid
            continue
        assert not valid


def test_a_called_root_reads_values_nested_30_deep(any_value_grammar):
    """The grammar of any value is one machine, the root, that calls itself: values nested
    30 deep and their mutants are accepted exactly when they parse (as written by
    `json.dumps`)."""
    assert any_value_grammar.machine_names == ("",)
    rng = random.Random(8)
    texts = [json.dumps(_deep(depth, leaf)) for depth in (1, 5, 30)
             for leaf in (1, "x", None, [], {})]
    texts += [json.dumps(_nested(rng, 8)) for _ in range(30)]
    _assert_exact_on_mutants(any_value_grammar, texts, rng, lambda value: True)


@pytest.mark.parametrize("grammar_name", ["open_grammar", "united_grammar"])
def test_budgets_are_a_guarantee(grammar_name, request, smollm2):
    """With `mask_within`, any walk ends within the budget, EOS included."""
    grammar = request.getfixturevalue(grammar_name)
    rng = np.random.default_rng(2)
    for budget in (12, 20, 35):
        for _ in range(5):
            left, state = walk_within_budget(grammar, grammar.initial_state, budget, rng)
            assert left >= 0 and grammar.is_accepting(state)


# --------------------------------------------------------------------- artifacts, runtime
@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_version_2_artifacts_round_trip(open_grammar, tmp_path, suffix):
    loaded = reloaded(open_grammar, tmp_path / f"open{suffix}")
    assert isinstance(loaded, CallGrammar) and loaded.metadata["format_version"] == 2
    text = json.dumps({"id": 5, "q": [[{"r": [1, {"s": None}]}]]})
    assert loaded.matches(text) and not loaded.matches(text[:-1])
    assert_same_mask(loaded, open_grammar, text[:20].encode())
    with pytest.raises(ValueError, match="factored layout only"):
        open_grammar.save(tmp_path / "x.safetensors", layout="dense")


@pytest.mark.parametrize("grammar_name,tensor,value,message", [
    ("open_grammar", "call_return", 10**6, "call_return out of range"),
    ("open_grammar", "stack_next", 10**6, "stack_next out of range"),
    ("open_grammar", "push_states", 0, "push_states out of range"),
    ("open_grammar", "machine_start", 0, "machine_start out of range"),
    ("united_grammar", "exit_class", 10**6, "exit_class out of range"),
    ("united_grammar", "site_next", 10**6, "site_next out of range"),
    ("united_grammar", "site_ptr", 5, "site_ptr must run from 0"),
    ("united_grammar", "suffix_class", 10**6, "suffix_class has the wrong length or is out"),
])
def test_forged_call_tensors_are_refused(grammar_name, tensor, value, message, request,
                                         tmp_path):
    from grammarc.format.artifact import read_artifact, write_artifact

    grammar = request.getfixturevalue(grammar_name)
    path = tmp_path / "open.npz"
    grammar.save(path)
    data = read_artifact(path)
    tensors = {name: data.tensors[name].astype(np.int64) for name in data.tensors}
    tensors["accepting"] = tensors["accepting"].astype(np.uint8)
    tensors[tensor] = tensors[tensor].copy()
    tensors[tensor][0] = value
    metadata = {k: v for k, v in data.metadata.items() if k != "checksum"}
    write_artifact(path, metadata, tensors)
    with pytest.raises(ArtifactError, match=message):
        grammarc.load(path)


def test_batches_on_numpy_and_torch_agree(open_grammar, smollm2):
    torch = pytest.importorskip("torch")
    text = json.dumps({"id": 3, "x": [{"y": [1, 2]}]})
    states = [open_grammar.walk_bytes(text[:n].encode()) for n in (0, 9, 16, 22)]
    logits = np.zeros((len(states), open_grammar.vocab_size), np.float32)
    masked = open_grammar.apply(logits, states)
    for row, state in zip(masked, states):
        assert np.array_equal(np.isfinite(row), open_grammar.mask(state))
    on_torch = open_grammar.apply(torch.zeros(len(states), open_grammar.vocab_size), states)
    assert np.array_equal(torch.isfinite(on_torch).numpy(), np.isfinite(masked))
    tokens = [int(np.flatnonzero(open_grammar.mask(s))[0]) for s in states]
    assert open_grammar.advance(states, torch.tensor(tokens)).tolist() == \
        open_grammar.advance(np.array(states, object), np.array(tokens)).tolist() == \
        [open_grammar.next_state(s, t) for s, t in zip(states, tokens)]
    with pytest.raises(TypeError, match="CallState"):
        open_grammar.mask(1)
    with pytest.raises(ValueError, match="out of range"):
        open_grammar.mask(grammarc.CallState(10**9))


def test_processor_constrains_a_batch(open_grammar, smollm2):
    """The processor runs on `CallState` values as on a table's ints: generate greedily from
    random logits, every row ends with a valid instance within its budget."""
    from grammarc.integrations import GrammarProcessor

    rng = np.random.default_rng(0)
    processor = GrammarProcessor(open_grammar, max_new_tokens=40)
    generated = np.zeros((3, 1), np.int64)
    eos = set(smollm2.eos_token_ids)
    for _ in range(40):
        scores = processor.process_logits(generated, rng.normal(size=(3, open_grammar.vocab_size)))
        generated = np.concatenate([generated, scores.argmax(axis=1)[:, None]], axis=1)
    for row in generated[:, 1:]:
        tokens = [int(t) for t in row]
        end = next(i for i, t in enumerate(tokens) if t in eos)
        text = smollm2.decode_bytes(tokens[:end]).decode()
        jsonschema.validate(json.loads(text), OPEN_SCHEMA)
