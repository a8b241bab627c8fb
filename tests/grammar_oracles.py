"""Independent oracles for the grammar front ends: GBNF rewritten as a Lark grammar (by a
separate, regex-based reader, so the Earley parser checks grammarc's own GBNF parser), token
walks through compiled tables, a plain tokenisation of texts, and `jsonschema` on numbers read
exactly, with JSON texts that spell each number in many ways."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterable, Iterator
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal, localcontext
from typing import Any

import jsonschema

import lark
import numpy as np
from helpers import mutate

_GBNF_TOKEN = re.compile(r"""
    (?P<space>[ \t\r\n]+|\#[^\n]*)
  | (?P<define>::=)
  | (?P<string>"(?:\\.|[^"\\])*")
  | (?P<cls>\[(?:\\.|[^\]\\])*\])
  | (?P<name>[a-zA-Z0-9-]+)
  | (?P<braces>\{\s*(?P<lo>\d+)\s*(?P<comma>,\s*(?P<hi>\d+)?\s*)?\})
  | (?P<op>[()|*+?.])
""", re.X)
_ESCAPE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|(.))", re.S)
_SIMPLE = {"n": "\n", "r": "\r", "t": "\t"}


def _decode(body: str) -> list[tuple[str, bool]]:
    """Characters of a GBNF literal or class body, each with whether it was written plainly."""
    out = []
    pos = 0
    while pos < len(body):
        m = _ESCAPE.match(body, pos)
        if m and body[pos] == "\\":
            hexa = m.group(1) or m.group(2) or m.group(3)
            out.append((chr(int(hexa, 16)) if hexa else _SIMPLE.get(m.group(4), m.group(4)),
                        False))
            pos = m.end()
        else:
            out.append((body[pos], True))
            pos += 1
    return out


def _regex(chars: str) -> str:
    """Regex text for the characters, escaped so that Lark's own unescaping of regex literals
    (it turns \\n, \\xNN, \\uNNNN into raw characters) leaves a regex matching them."""
    out = []
    for c in chars:
        if c.isascii() and (c.isalnum() or c == "_"):
            out.append(c)
        elif not c.isascii():
            out.append(f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}")
        elif c in "\n\t\r\f":
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r", "\f": "\\f"}[c])
        elif ord(c) < 0x20 or c == "\x7f":
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append("\\" + c)
    return "".join(out)


def _class_regex(token: str) -> str:
    negate = token.startswith("[^")
    items = _decode(token[2 if negate else 1:-1])
    parts, i = [], 0
    while i < len(items):
        if i + 2 < len(items) and items[i + 1] == ("-", True):
            parts.append(f"{_regex(items[i][0])}-{_regex(items[i + 2][0])}")
            i += 3
        else:
            parts.append(_regex(items[i][0]))
            i += 1
    if not parts:  # [] matches nothing, [^] anything
        return "/(?s:.)/" if negate else r"/[^\x00-\U0010ffff]/"
    return f"/[{'^' if negate else ''}{''.join(parts)}]/"


def _rule_name(name: str) -> str:
    return "r_" + re.sub(r"[A-Z-]", lambda m: "_d_" if m.group() == "-" else
                         "_u" + m.group().lower(), name)


def gbnf_to_lark(text: str, start: str = "root") -> str:
    """The GBNF grammar as an equivalent Lark grammar whose start rule is `start`."""
    tokens = [m for m in _GBNF_TOKEN.finditer(text) if not m.group("space")]
    rules: list[tuple[str, list[str]]] = []
    for i, m in enumerate(tokens):
        if m.group("name") and i + 1 < len(tokens) and tokens[i + 1].group("define"):
            rules.append((m.group(), []))
            continue
        if m.group("define"):
            continue
        stack = rules[-1][1]
        if m.group("string"):
            chars = "".join(c for c, _ in _decode(m.group()[1:-1]))
            stack.append(f"/{_regex(chars)}/" if chars else "()")
        elif m.group("cls"):
            stack.append(_class_regex(m.group()))
        elif m.group("name"):
            stack.append(_rule_name(m.group()))
        elif m.group() == ".":
            stack.append("/(?s:.)/")
        elif m.group("braces"):
            atom = _last_atom(stack)
            lo, hi = m.group("lo"), m.group("hi")
            stack.append(f"~ {lo}" if not m.group("comma") else
                         f"~ {lo}..{hi}" if hi else f"~ {lo} {atom}*")
        else:
            stack.append(m.group())
    lines = [f"start: {_rule_name(start)}"]
    lines += [f"{_rule_name(name)}: {' '.join(body)}" for name, body in rules]
    return "\n".join(lines) + "\n"


def _last_atom(stack: list[str]) -> str:
    """The text of the atom that ends `stack` (a token or a parenthesised group)."""
    if stack[-1] != ")":
        return stack[-1]
    depth = 0
    for i in range(len(stack) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(stack[i], 0)
        if depth == 0:
            return " ".join(stack[i:])
    raise ValueError("unbalanced parentheses")


def token_walk(grammar, rng: random.Random, budget: int = 40) -> list[int]:
    """Token ids of a random walk from the start to an accepting state, where it stops with
    probability 0.2 per visit; after `budget` tokens it takes only tokens that get closer to
    acceptance (`tokens_to_accept`), so every walk ends."""
    eos = set(grammar.eos_token_ids)
    state, ids = grammar.initial_state, []
    while True:
        allowed = np.array([t for t in grammar.allowed(state) if t not in eos])
        if grammar.is_accepting(state) and (not len(allowed) or rng.random() < 0.2 or
                                            len(ids) >= budget):
            return ids
        if len(ids) >= budget:
            nxt = grammar.advance([state] * len(allowed), allowed)  # ints or CallStates
            closer = [grammar.tokens_to_accept(s) < grammar.tokens_to_accept(state)
                      for s in nxt]
            allowed = allowed[np.array(closer, bool)]
        token = int(allowed[rng.randrange(len(allowed))])
        state = grammar.next_state(state, token)
        assert state  # not the dead state (0, or a false CallState)
        ids.append(token)


def dead_end_entries(table) -> int:
    """Entries of a compiled `TokenTable` (its ordinary rows, and its stack tokens where it
    has calls) that lead from a state that can still accept to one that cannot
    (`min_tokens_to_accept` -1): each is a token some mask allows with no way to end the
    text. An exact table has none."""
    cost = table.min_tokens_to_accept
    sizes = np.diff(table.row_ptr)[table.state_row]
    owner = np.repeat(np.arange(len(sizes)), sizes)
    first = np.repeat(table.row_ptr[table.state_row] - np.cumsum(sizes) + sizes, sizes)
    following = owner + table.row_delta[first + np.arange(len(owner))]
    found = int(np.count_nonzero((cost[owner] >= 0) & (cost[following] < 0)))
    if table.calls is not None:
        calls = table.calls
        # a push sequence whose return states cannot all end stops the text as surely
        pushes = np.diff(calls.push_ptr)
        stuck = np.bincount(np.repeat(np.arange(len(pushes)), pushes),
                            cost[calls.push_states] < 0, len(pushes)) > 0
        owner = np.repeat(np.arange(len(calls.stack_ptr) - 1), np.diff(calls.stack_ptr))
        pushed = calls.stack_next >= 1  # -1: a return, its suffix read further down
        found += int(np.count_nonzero((cost[owner[pushed]] >= 0) & (
            (cost[calls.stack_next[pushed]] < 0) | stuck[calls.stack_arg[pushed]])))
        # a suffix read from a return state that can end, into a state that cannot
        pushed = calls.suffix_next >= 1
        found += int(np.count_nonzero((cost[calls.suffix_state[pushed]] >= 0) & (
            (cost[calls.suffix_next[pushed]] < 0) | stuck[calls.suffix_arg[pushed]])))
    return found


def greedy_tokens(tokenizer, text: str) -> list[int]:
    """`text` cut into vocabulary tokens, longest match first (any valid tokenisation will do:
    the table must accept every one)."""
    ids = {}
    for i, data in enumerate(tokenizer.token_bytes):
        if data is not None:
            ids.setdefault(data, i)
    longest = max(len(d) for d in ids)
    data, out, pos = text.encode("utf-8"), [], 0
    while pos < len(data):
        for size in range(min(longest, len(data) - pos), 0, -1):
            if data[pos:pos + size] in ids:
                out.append(ids[data[pos:pos + size]])
                pos += size
                break
        else:
            raise ValueError(f"no token for {data[pos:pos + 1]!r}")
    return out


def earley_accepts(parser: lark.Lark, text: str) -> bool:
    """Whether a Lark parser parses `text`."""
    try:
        parser.parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


def check_against_earley(grammar, tokenizer, parser: lark.Lark, rng: random.Random,
                         exact: bool, alphabet: str, walks: int = 10, budget: int = 12,
                         mutants: int = 3) -> None:
    """Texts of random token walks to EOS parse with `parser`; so do their mutants the table
    accepts (the table never allows a string outside the grammar), and when `exact` (no
    recursion was unrolled) the table accepts every mutant the parser accepts."""
    texts = []
    for _ in range(walks):
        text = tokenizer.decode_bytes(token_walk(grammar, rng, budget)).decode("utf-8")
        assert grammar.matches(text) and earley_accepts(parser, text), text
        texts.append(text)
    for text in texts:
        for _ in range(mutants):
            mutant = mutate(text, rng, alphabet)
            in_table = grammar.matches(mutant)
            if in_table or exact:
                assert in_table == earley_accepts(parser, mutant), mutant


# ------------------------------------------------------------------ JSON numbers, exactly
def exact_json(text: str) -> Any:
    """A JSON text read exactly: integer spellings as `int`, other numbers (`1.0`, `1e0`) as
    `Decimal` (floats round: 83419.96 would be no multiple of 0.01)."""
    return json.loads(text, parse_float=Decimal)


def modest(value: Any) -> bool:
    """Whether every number in `value` is within 10^±100 (or zero): spelled without an
    exponent in a few hundred digits, and in `Decimal`'s range when it is written so (exact
    arithmetic on a larger one, `1e99999999 % 0.01`, would not end)."""
    if isinstance(value, dict):
        return all(map(modest, value.values()))
    if isinstance(value, list):
        return all(map(modest, value))
    if isinstance(value, Decimal):
        return not value or abs(value.adjusted()) <= 100
    return not isinstance(value, int) or value.bit_length() < 330


class _ExactValidator:
    """A validator that computes with `Decimal`s of any length (not rounded to 28 digits)."""

    def __init__(self, validator: Any) -> None:
        self.validator = validator

    def is_valid(self, instance: Any) -> bool:
        with _exactly():
            return self.validator.is_valid(instance)

    def why_invalid(self, instance: Any) -> str | None:
        """jsonschema's most relevant error, at its JSON path (None: valid)."""
        with _exactly():
            error = jsonschema.exceptions.best_match(self.validator.iter_errors(instance))
        return None if error is None else f"{error.json_path}: {error.message}"


def _exactly() -> Any:
    """A decimal context that never rounds (its arithmetic on huge numbers may not end:
    `modest`)."""
    return localcontext(Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN))


def exact_validator(schema: Any, *, formats: Iterable[str] = (),
                    ecma_patterns: bool = False) -> _ExactValidator:
    """`jsonschema`'s validator for the schema's draft (2020-12 where `$schema` names none it
    knows, as grammarc reads it), the schema and instances read with
    `exact_json`: a `Decimal` is a number, and an integer where its value is integral (draft
    4: only integer spellings are integers); arithmetic on them is exact. It checks the
    `formats` named (with the draft's own checks; others are annotations) and, with
    `ecma_patterns`, reads `pattern` and `patternProperties` as ECMA-262 (`regress`), as
    JSON Schema does: Python's `re` has no U+FEFF in `\\s`, and a CR in `.`."""
    schema = exact_json(json.dumps(schema))
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    draft4 = cls in (jsonschema.Draft3Validator, jsonschema.Draft4Validator)

    def is_integer(_checker: Any, value: Any) -> bool:
        return not isinstance(value, bool) and (isinstance(value, int) or not draft4 and
                                                isinstance(value, Decimal) and
                                                value == value.to_integral_value())

    def is_number(_checker: Any, value: Any) -> bool:
        return isinstance(value, (int, Decimal)) and not isinstance(value, bool)

    checker = cls.TYPE_CHECKER.redefine_many({"integer": is_integer, "number": is_number})
    keywords = _ecma_pattern_keywords() if ecma_patterns else {}
    drafts = cls.FORMAT_CHECKER.checkers  # (`FormatChecker(formats=...)` would take any
    checked = jsonschema.FormatChecker(formats=())  # draft's: draft 3's `time`)
    checked.checkers = {name: drafts[name] for name in formats if name in drafts}
    extended = jsonschema.validators.extend(cls, keywords, type_checker=checker)
    return _ExactValidator(extended(schema, format_checker=checked))


def _ecma_pattern_keywords() -> dict[str, Callable]:
    """`pattern` and `patternProperties` matched by ECMA-262 regular expressions, read with
    the `u` flag as JSON Schema reads them (`\\p{Letter}` a property, the suite's
    pattern.json says), or without it where `u` refuses the pattern's syntax (`\\-` outside
    a class), as lenient validators read it."""
    import regress

    compiled: dict[str, Any] = {}

    def search(pattern: str, text: str) -> bool:
        if pattern not in compiled:
            try:
                compiled[pattern] = regress.Regex(pattern, "u")
            except regress.RegressError:
                compiled[pattern] = regress.Regex(pattern)
        return compiled[pattern].find(text) is not None

    def pattern(validator: Any, expected: str, instance: Any, _schema: Any) -> Iterator:
        if validator.is_type(instance, "string") and not search(expected, instance):
            yield jsonschema.ValidationError(f"{instance!r} does not match {expected!r}")

    def pattern_properties(validator: Any, patterns: dict, instance: Any,
                           _schema: Any) -> Iterator:
        if validator.is_type(instance, "object"):
            for expected, subschema in patterns.items():
                for key, value in instance.items():
                    if search(expected, key):
                        yield from validator.descend(value, subschema, path=key,
                                                     schema_path=expected)

    return {"pattern": pattern, "patternProperties": pattern_properties}


def random_number_schema(rng: random.Random, depth: int, draft4: bool) -> Any:
    """A schema of number keywords under every applicator that subtracts, in arrays and
    objects, and uniqueItems over values equal in value but not in spelling."""
    values = [0, 1, 2, 3, 5, 10, 100, 1000, 0.5, 1.5, 2.5, -1, -2.5, 25, 0.25, 12]
    leaves = [{"type": "integer"}, {"type": "number"}, {"type": "string"},
              {"enum": rng.sample(values, 2) + ["x"]}, {"minimum": rng.choice(values)},
              {"maximum": rng.choice(values)}, {"multipleOf": rng.choice([0.5, 2, 5, 0.25])},
              {"type": "integer", "minimum": rng.choice(values)}]
    if not draft4:
        leaves += [{"const": rng.choice(values)}, {"exclusiveMinimum": rng.choice(values)},
                   {"exclusiveMaximum": rng.choice(values)}]
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(leaves)

    def inner() -> Any:
        return random_number_schema(rng, depth - 1, draft4)

    shapes = [lambda: {"not": inner()}, lambda: {"oneOf": [inner(), inner()]},
              lambda: {"anyOf": [inner(), inner()]}, lambda: {"allOf": [inner(), inner()]},
              lambda: {"type": "array", "items": inner()},
              lambda: {"type": "object", "properties": {"a": inner()}, "required": ["a"]},
              lambda: {"not": {"properties": {"a": inner()}}},
              lambda: {"oneOf": [{"properties": {"a": inner()}}, {"required": ["a"]}]}]
    if not draft4:
        shapes += [lambda: {"if": inner(), "then": inner(), "else": inner()},
                   lambda: {"type": "array", "contains": inner(),
                            "minContains": rng.randint(0, 1), "maxContains": rng.randint(1, 2)}]
    if depth == 1 and not draft4:  # (draft 4's enums must be unique by value)
        value = rng.choice(values)
        shapes.append(lambda: {"type": "array", "uniqueItems": True, "items": {"enum": [
            {"a": value}, {"a": float(value)}, [value], [float(value)], value]}})
    return rng.choice(shapes)()


def number_instances(rng: random.Random) -> list[Any]:
    """Numbers, and arrays and objects of them, for `random_number_schema`."""
    values: list[Any] = [0, 1, 2, 3, 5, 10, 100, 1000, Decimal("0.5"), Decimal("1.5"),
                         Decimal("2.5"), -1, Decimal("-2.5"), 25, Decimal("0.25"), 12, 4, 7]
    out: list[Any] = list(values) + ["x"]
    for _ in range(12):
        pick = [rng.choice(values) for _ in range(3)]
        out += [pick[:rng.randint(0, 3)], {"a": pick[0]}, {"a": pick[0], "b": "x"},
                [{"a": pick[0]}, {"a": pick[1]}], [[pick[0]], pick[1], [pick[2]]]]
    return out


def number_spelling(value: int | float | Decimal, rng: random.Random) -> str:
    """One of the JSON texts of a number: plain or with an exponent (`e`/`E`, signed or not,
    leading zeros), a fraction of extra zeros, negative zero for zero."""
    number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    sign = "-" if number < 0 or (number == 0 and rng.random() < 0.2) else ""
    exponent = rng.choice([0, 0, 0, 1, 2, 3, -1, -2, 5])
    mantissa = format(number.copy_abs().scaleb(-exponent, Context(prec=MAX_PREC)), "f")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    if rng.random() < 0.4:
        mantissa += ("." if "." not in mantissa else "") + "0" * rng.randint(1, 2)
    if exponent == 0 and rng.random() < 0.6:
        return sign + mantissa
    written = str(abs(exponent)).zfill(rng.choice([1, 1, 2]))
    marker = rng.choice("eE") + ("-" if exponent < 0 else rng.choice(["", "", "+"]))
    return sign + mantissa + marker + written


def spelled_json(value: Any, rng: random.Random) -> str:
    """A JSON text of `value` with `json.dumps`'s separators and each number spelled by
    `number_spelling`."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {spelled_json(v, rng)}"
                               for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(spelled_json(v, rng) for v in value) + "]"
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        return number_spelling(value, rng)
    return json.dumps(value)
