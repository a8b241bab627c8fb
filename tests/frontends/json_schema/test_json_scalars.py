"""JSON Schema numbers and strings: ranges and multipleOf against brute force, string
spellings as json.dumps writes them, formats, ECMA-262 patterns, and integers against their
spellings (with and without --integer-fractions)."""

from __future__ import annotations

import json
import random
import re
from decimal import Decimal

import jsonschema
import pytest
from helpers import accepts, dfa_of

from grammarc.automaton import Ops, build_dfa
from grammarc.errors import GrammarError, UnsupportedError
from grammarc.frontends.json_schema import numbers, strings


# ------------------------------------------------------------------ numbers
NUMBER = re.compile(r"-?(0|[1-9]\d*)(\.\d+)?")
NUMBER_TEXTS = sorted({*(str(i) for i in range(-120, 121)), *(f"{i}.0" for i in range(-30, 31)),
                       *(f"{a}.{f}" for a in range(-12, 13) for f in
                         ("5", "25", "05", "50", "1", "99", "001", "75", "4999", "5001", "0")),
                       *(f"-0.{f}" for f in ("5", "25", "05", "1")), "-0", "-0.0", "00", "01",
                       "1.", ".5", "-", "1e5", "0.0"})
BOUNDS = [None, Decimal(0), Decimal(1), Decimal("1.5"), Decimal("-2.5"), Decimal(10),
          Decimal("0.05"), Decimal("-0.25"), Decimal("9.99"), Decimal(-7)]


def _in_range(text, lo, hi, lo_excl, hi_excl, integer) -> bool:
    if not NUMBER.fullmatch(text) or (text.startswith("-") and Decimal(text) == 0):
        return False
    value = Decimal(text)
    if integer and not re.fullmatch(r"-?\d+(\.0+)?", text):
        return False
    if lo is not None and (value <= lo if lo_excl else value < lo):
        return False
    return not (hi is not None and (value >= hi if hi_excl else value > hi))


@pytest.mark.parametrize("seed", range(12))
def test_number_ranges_against_brute_force(seed):
    rng = random.Random(seed)
    ops = Ops(100_000)
    for _ in range(10):
        lo, hi = rng.choice(BOUNDS), rng.choice(BOUNDS)
        lo_excl, hi_excl = rng.random() < 0.5, rng.random() < 0.5
        for integer in (True, False):
            expr = numbers.integers(lo, hi, lo_excl, hi_excl) if integer else \
                numbers.decimals(ops, lo, hi, lo_excl, hi_excl)
            dfa = ops.dfa(expr)
            for text in NUMBER_TEXTS:
                expected = _in_range(text, lo, hi, lo_excl, hi_excl, integer)
                got = dfa is not None and dfa.accepts(text.encode())
                assert got == expected, (lo, hi, lo_excl, hi_excl, integer, text)


def _nodes(expr) -> int:
    parts = getattr(expr, "parts", None) or getattr(expr, "options", None) or \
        ([expr.item] if hasattr(expr, "item") else [])
    return 1 + sum(_nodes(p) for p in parts)


def test_wide_integer_ranges_are_linear_in_digits_and_exact():
    # issue 15: the int64 range took minutes and gigabytes (a node per number of each width)
    lo, hi = -(2 ** 63), 2 ** 63 - 1
    expr = numbers.integers(Decimal(lo), Decimal(hi))
    assert _nodes(expr) < 3000
    dfa = Ops(100_000).dfa(expr)
    rng = random.Random(7)
    samples = [lo, hi, lo - 1, hi + 1, 0, 10 ** 18, -(10 ** 18), 9 * 10 ** 18, 10 ** 19,
               *(rng.randrange(-(2 ** 64), 2 ** 64) for _ in range(300))]
    for value in samples:
        assert dfa.accepts(str(value).encode()) == (lo <= value <= hi), value
    for lo, hi in ((0, 10 ** 16), (123456789012, 987654321098765)):
        dfa = Ops(100_000).dfa(numbers.integers(Decimal(lo), Decimal(hi)))
        values = [lo, hi, lo - 1, hi + 1, *(rng.randrange(lo - 10, hi * 10) for _ in range(200))]
        for value in values:
            assert dfa.accepts(str(value).encode()) == (lo <= value <= hi), (lo, hi, value)


@pytest.mark.parametrize("step", ["0.5", "0.25", "3", "0.01", "7", "1.5", "10"])
def test_multiple_of_against_brute_force(step):
    ops = Ops(100_000)
    for integer in (True, False):
        base = numbers.integers(None, None) if integer else numbers.decimals(ops, None, None)
        dfa = ops.dfa(ops.intersect(base, numbers.multiple_of(Decimal(step), integer)))
        for text in NUMBER_TEXTS:
            expected = _in_range(text, None, None, False, False, integer) and \
                Decimal(text) % Decimal(step) == 0
            assert dfa.accepts(text.encode()) == expected, (step, integer, text)


def test_multiple_of_with_a_huge_modulus_is_unsupported():
    with pytest.raises(UnsupportedError, match="remainder automaton"):
        dfa_of({"type": "integer", "multipleOf": Decimal("0.123456789")})


# ------------------------------------------------------------------ strings
def test_string_spellings_match_json_dumps():
    dfa = build_dfa(strings.json_string(strings.length_between(0, 3)))
    rng = random.Random(0)
    chars = ["a", '"', "\\", "/", "\n", "\x01", "\x7f", "é", "😀", "\u2028", "\uffff", "\U0010ffff"]
    for _ in range(3000):
        value = "".join(rng.choice(chars) for _ in range(rng.randint(0, 4)))
        for ensure_ascii in (True, False):
            text = json.dumps(value, ensure_ascii=ensure_ascii)
            assert accepts(dfa, text) == (len(value) <= 3), text
    for text, ok in [('"\\u00E9"', True), ('"\\/"', True), ('"\\uD83D\\uDE00"', True),
                     ('"\\u0041"', False), ('"\\ud83d"', False), ('"\\x41"', False),
                     ('"\x01"', False), ('"\\u000a"', True)]:
        assert accepts(dfa, text) == ok, text


@pytest.mark.parametrize("fmt,text,ok", [
    ("date", "2024-02-29", True), ("date", "2023-02-29", False), ("date", "1900-02-29", False),
    ("date", "2000-02-29", True), ("date", "2024-04-31", False),
    ("time", "23:59:60Z", True), ("time", "22:59:60Z", False), ("time", "08:30:06.5+01:00", True),
    ("time", "12:00:00", False), ("date-time", "2024-01-31T23:59:59z", True),
    ("duration", "P4DT12H30M5S", True), ("duration", "P1Y2D", False), ("duration", "P2W", True),
    ("email", "joe.bloggs@example.com", True), ("email", '"joe bloggs"@example.com', True),
    ("email", "te..st@example.com", False), ("email", "joe@[IPv6:::1]", True),
    ("hostname", "a--b.example.com", True), ("hostname", "XN--aa---o47jg78q", False),
    ("hostname", "a" * 63 + ".com", True), ("hostname", "a" * 64 + ".com", False),
    ("ipv4", "192.168.0.1", True), ("ipv4", "192.168.0.01", False),
    ("ipv6", "::ffff:192.168.0.1", True), ("ipv6", "1::2::3", False),
    ("uri", "http://foo.bar/?baz=qux#quux", True), ("uri", "//foo.bar", False),
    ("uri-reference", "//foo.bar", True), ("uuid", "2EB8AA08-AA98-11EA-B4AA-73B441D16380", True),
    ("uuid", "2eb8aa08-aa98-11ea-b4aa-73b441d1638", False),
])
def test_formats(fmt, text, ok):
    dfa, _ = dfa_of({"type": "string", "format": fmt})
    assert accepts(dfa, json.dumps(text)) == ok


@pytest.mark.parametrize("schema", [
    {"type": "string", "not": {"format": "hostname"}},
    {"$defs": {"mail": {"type": "string", "format": "email"}},
     "not": {"anyOf": [{"$ref": "#/$defs/mail"}, {"type": "integer"}]}},
    {"if": {"format": "hostname"}, "then": {"maxLength": 9}},
    {"oneOf": [{"type": "string", "format": "hostname"}, {"type": "string"}]},
    {"type": "array", "contains": {"type": "string", "format": "hostname"}, "maxContains": 1},
])
def test_a_format_checked_on_a_subset_is_not_subtracted(schema):
    """grammarc's hostnames have at most 4 labels (`a.b.c.d.e` is left out): under `not`, as
    an `if`, beside a `oneOf` branch holding such strings, or counted by `maxContains`, the
    complement would let `a.b.c.d.e` through though it has the format. A clear error."""
    with pytest.raises(UnsupportedError, match="a subset of the format"):
        dfa_of(schema)


@pytest.mark.parametrize("schema,yes,no", [
    # no other branch holds a string of four dots: the subset is exact there
    ({"oneOf": [{"type": "string", "format": "hostname"}, {"type": "string", "format": "ipv4"}]},
     ["a.b", "1.2.3.x"], ["1.2.3.4", "a..b"]),
    ({"oneOf": [{"type": "string", "format": "hostname"}, {"type": "integer"}]}, ["a.b", 3], []),
    # matches that contains does not count only make an array fall short
    ({"type": "array", "contains": {"type": "string", "format": "hostname"}},
     [["a.b"]], [["a.b.c.d.e"], []]),
    # properties named "format" and "$ref" are no format and no reference
    ({"not": {"properties": {"format": {"type": "string"}, "$ref": {"const": 1}}}},
     [{"format": 1}, {"$ref": 2}], [{}, {"format": "x"}, 3]),
])
def test_a_format_checked_on_a_subset_where_subtracting_it_is_exact(schema, yes, no):
    dfa, _ = dfa_of(schema)
    for value in yes:
        assert accepts(dfa, json.dumps(value)), value
    for value in no:
        assert not accepts(dfa, json.dumps(value)), value


@pytest.mark.parametrize("pattern,yes,no", [
    ("^a", ["a", "abc"], ["ba"]), ("a$", ["ba"], ["ab"]), ("b", ["abc"], ["ac", ""]),
    ("^a|c$", ["ax", "xc"], ["xa"]), ("^\\s+$", ["\u00a0 \t"], ["x"]), ("^.$", ["é"], ["\n"]),
    ("^(?<word>[a-z]+)-\\d$", ["ab-1"], ["ab-"]), ("^[^]$", ["\n"], [""]),
    # a surrogate pair of escapes is one character (JSON Schema reads patterns with `u`)
    ("\\ud83d\\ude00", ["x\U0001f600y"], ["x", "\U0001f601"]),
    ("^[\\uD83D\\uDE00a]$", ["\U0001f600", "a"], ["b", "\U0001f601"]),
])
def test_ecma_patterns_search_semantics(pattern, yes, no):
    dfa, _ = dfa_of({"type": "string", "pattern": pattern})
    for value in yes:
        assert accepts(dfa, json.dumps(value)), value
    for value in no:
        assert not accepts(dfa, json.dumps(value)), value


@pytest.mark.parametrize("pattern", [
    r"^([\"'])[a-z]*\1$", r"^\d{2}([-/.])\d{2}\1\d{2}$", r"(?<q>[ab])x\k<q>",
    r"^(a|b\\)\1", r"^(?:(é|\n)\1)+$",
    # a branch's groups keep their numbers; one to a group of another branch is empty
    r"^(a)x$|^(b)\2$", r"^(a)$|^y\1$", r"^$|(^([ab])\2$)",
])
def test_ecma_backreferences_to_a_finite_group_are_exact(pattern):
    """Backreferences to a group captured once with a few texts, JSON escapes and search
    semantics included: random strings, judged by an ECMA-262 engine."""
    rng = random.Random(pattern)
    alphabet = "ab\"'xy12-/.é\n\\"
    _judged_by_ecma(pattern, ['"ab"', "'x'", "12-12-12", "12/12-12", "axa", "bxb", "axb", "bb",
                              "y"] + ["".join(rng.choice(alphabet)
                                              for _ in range(rng.randint(0, 9)))
                                      for _ in range(2000)])


def _judged_by_ecma(pattern: str, values: list[str]) -> None:
    """The values matched as an ECMA-262 engine (`regress`) matches them, spelled by json.dumps
    with and without ensure_ascii; some of them. The engine reads the pattern with `u`, or
    without it where `u` refuses an escape (`\\"`), as `grammar_oracles` does."""
    import regress

    dfa, _ = dfa_of({"type": "string", "pattern": pattern})
    try:
        ecma = regress.Regex(pattern, "u")
    except regress.RegressError:
        ecma = regress.Regex(pattern)
    accepted = 0
    for value in values:
        expected = ecma.find(value) is not None
        accepted += expected
        assert accepts(dfa, json.dumps(value)) == expected, value
        assert accepts(dfa, json.dumps(value, ensure_ascii=False)) == expected, value
    assert accepted


def test_a_backreference_the_pattern_cannot_spell_out_is_refused_with_its_place():
    with pytest.raises(UnsupportedError, match=r"#/pattern: .*captured once before it"):
        dfa_of({"type": "string", "pattern": "^(\\w+) \\1$"})


@pytest.mark.parametrize("pattern", [
    r"^\p{L}+$", r"^[\p{Lu}\d]+$", r"^\p{General_Category=Nd}+$", r"\p{Letter}\p{Zs}",
    r"^[\p{L}\p{M} .'-]+$", r"^\p{gc=So}", r"^[\p{Any}]{2}$", r"\p{ASCII}\p{Nl}",
])
def test_ecma_general_categories_are_exact_where_a_value_must_match(pattern):
    """`\\p{...}` of general categories, `Any` and `ASCII`, on characters of long-assigned
    blocks (Latin, Greek, Cyrillic, CJK, Arabic digits, a combining accent, an emoji, a Roman
    numeral), judged by an ECMA-262 engine reading the pattern with `u`, as JSON Schema does."""
    rng = random.Random(pattern)
    alphabet = "aZéñΩж中ー1٣.-' \u0301😀¥+_Ⅻ\t"
    _judged_by_ecma(pattern, ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
                              for _ in range(2000)])


@pytest.mark.parametrize("pattern", [
    r"\P{L}", r"[^\p{L}]", r"(?!\p{L})a", r"\p{Script=Greek}", r"\p{Cn}", r"\p{C}", r"\p{L",
])
def test_property_escapes_a_later_unicode_version_would_read_otherwise_are_refused(pattern):
    """A negation would take in the code points a later version assigns to the category
    (and `Cn`, `C` are such points), scripts are not read: refused with what is read."""
    with pytest.raises(UnsupportedError, match=r"#/pattern: .*where a value must match"):
        dfa_of({"type": "string", "pattern": pattern})


@pytest.mark.parametrize("schema,where", [
    ({"type": "string", "not": {"pattern": "\\p{L}"}}, "#/not/pattern: .* under not"),
    ({"type": "object", "patternProperties": {"^\\p{L}+$": {"type": "integer"}}},
     "#/patternProperties: .* in patternProperties"),
    ({"oneOf": [{"type": "string", "pattern": "^\\p{L}$"}, {"type": "string"}]},
     "#/oneOf/0/pattern: .* under oneOf"),
])
def test_a_property_escape_a_schema_subtracts_is_refused(schema, where):
    with pytest.raises(UnsupportedError, match=where + ".*categories of Unicode"):
        dfa_of(schema)


def test_a_negated_pattern_of_an_astral_character_forbids_it():
    """`\\ud83d\\ude00` was read as two lone surrogates, a pattern matching nothing, so its
    `not` allowed every string."""
    dfa, _ = dfa_of({"type": "string", "not": {"pattern": "\\ud83d\\ude00"}})
    assert not accepts(dfa, json.dumps("x\U0001f600")) and accepts(dfa, '"x"')
    assert not accepts(dfa, json.dumps("\U0001f600", ensure_ascii=False))


@pytest.mark.parametrize("pattern", [
    "a\\Z", "\\Aa", "^\\a$", "^\\N{LATIN SMALL LETTER A}$", "^\\U0001F600$", "^a{,2}$",
    "(?P<n>a)", "(?i)ab", "(?#note)a",
])
def test_python_regex_syntax_in_a_pattern_is_refused(pattern):
    """Python's `re` reads these as anchors, escapes, a quantifier, a named group or flags;
    ECMA-262 (with `u`, as JSON Schema reads patterns) has none of them: a clear error, not
    Python's meaning (under a `not`, that let invalid values through)."""
    with pytest.raises(GrammarError, match="ECMA-262"):
        dfa_of({"type": "string", "not": {"pattern": pattern}})


@pytest.mark.parametrize("pattern", [
    r"^(?!internal\.)[a-z][a-z0-9.]*$", r"^(?!a)", r"(?!a)b", r"^(?:(?!ab)a|c)", r"(a$|b)",
    r"^(?=.*x)(?!.*\.\.).{2,}$", r"^(?!.*[\\\"])", r"^x(?!y)",
    r"^$|(^(?:\S+\s+){0,3}\S+$)", r"(?:^x$)|(y$|^a)",
])
def test_ecma_lookaheads_are_exact(pattern):
    """Lookaheads (compiled by difference and intersection) against Python's re.search, on
    random strings spelled by json.dumps with and without ensure_ascii."""
    dfa, _ = dfa_of({"type": "string", "pattern": pattern})
    rng = random.Random(7)
    alphabet = 'abxy.int\\"é'
    values = ["", "internal.a", "internal", "ab", "xy", "x", "a..b"] + [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9))) for _ in range(1500)]
    for value in values:
        expected = bool(re.search(pattern, value))
        assert accepts(dfa, json.dumps(value)) == expected, value
        assert accepts(dfa, json.dumps(value, ensure_ascii=False)) == expected, value


def test_integers_numbers_and_negative_zero():
    integer, _ = dfa_of({"type": "integer", "minimum": 0})
    assert accepts(integer, "0") and not accepts(integer, "7.0") and not accepts(integer, "-0")
    assert not accepts(integer, "-7") and not accepts(integer, "07") and not accepts(integer, "1e2")
    number, _ = dfa_of({"type": "number"})
    assert accepts(number, "-1.5e-3") and not accepts(number, "-0") and not accepts(number, "-0e1")
    bounded, _ = dfa_of({"type": "number", "maximum": 1000})
    assert accepts(bounded, "999.5") and not accepts(bounded, "1e2")  # no exponent when bounded


@pytest.mark.parametrize("draft", ["http://json-schema.org/draft-04/schema#",
                                   "https://json-schema.org/draft/2020-12/schema"])
def test_integers_have_no_fraction_unless_asked(draft):
    """Draft 4 counts 12345.0 as a number, not an integer; later drafts count it as both, but
    no one wants a model to write an id that way: only --integer-fractions allows it there."""
    for schema in ({"$schema": draft, "type": "integer"},
                   {"$schema": draft, "type": "integer", "minimum": 0},
                   {"$schema": draft, "type": "integer", "enum": [12345, 7]}):
        dfa, _ = dfa_of(schema)
        assert accepts(dfa, "12345") and not accepts(dfa, "12345.0")
        asked, _ = dfa_of(schema, integer_fractions=True)
        later = "2020-12" in draft
        assert accepts(asked, "12345") and accepts(asked, "12345.0") == later
        validator = jsonschema.validators.validator_for(schema)(schema)
        assert validator.is_valid(json.loads("12345.0")) == later
    number, _ = dfa_of({"$schema": draft, "enum": [12345]})  # no type: any spelling of it
    assert accepts(number, "12345.0")


def test_a_string_language_used_in_many_places_is_one_machine(smollm2):
    """Each spelling of the string keywords is one called machine, walked over the
    vocabulary once however many properties use it; a schema whose only machines would be
    strings stays one flat automaton; an unchecked format is reported at every place."""
    from grammarc import Grammar, compile_json_schema
    from grammarc.frontends import FrontendOptions
    from grammarc.runtime.calls import CallGrammar

    date = {"type": "string", "format": "date"}
    schema = {"type": "object", "properties": {
        "a": date, "b": dict(date), "c": {"type": "string"}, "d": {"type": "string"},
        "e": {"type": "string", "format": "no-such-format"},
        "f": {"type": "string", "format": "no-such-format"}}}
    notices: list[str] = []
    grammar = compile_json_schema(schema, smollm2, options=FrontendOptions(notice=notices.append))
    assert isinstance(grammar, CallGrammar)  # extra keys' values are any value: calls
    machines = grammar.metadata["machines"]
    assert machines.count('string {"format": "date"}') == 1 and machines.count("string") == 1
    assert notices == [
        "format 'no-such-format' at #/properties/e is not checked",
        "format 'no-such-format' at #/properties/f is not checked"]
    closed = compile_json_schema({**schema, "additionalProperties": False}, smollm2,
                                 options=FrontendOptions(notice=notices.append))
    assert type(closed) is Grammar
    texts = ['{"a": "2024-02-29", "c": "x"}', '{"b": "2024-13-01"}', '{"d": 1}', '{"e": "?"}']
    for text in texts:
        valid = text != texts[1] and text != texts[2]
        for compiled in (grammar, closed):
            assert compiled.matches(text) == valid, (text, type(compiled))
