"""Structural tags (xgrammar's JSON format) against a reference matcher written here from the
format's documented semantics: a backtracking matcher that returns where each format can end
(Python `re` for regexes, `json` and `jsonschema` for JSON, Lark's Earley parser for grammars),
compared with the compiled grammar on generated and mutated texts, token by token on SmolLM2
(text in the language <=> every token allowed and EOS allowed exactly at the end), and with
the grammar's own samples. Malformed specs give one-line errors naming the JSON pointer."""

from __future__ import annotations

import json
import random
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import jsonschema
import lark
import numpy as np
import pytest
from grammar_oracles import earley_accepts, gbnf_to_lark, greedy_tokens
from helpers import assert_clean_error, compile_file, mutate

import grammarc

# named tokens in texts: a private-use character per token id (never in the texts otherwise)
TOKENS = {1: "<|im_start|>", 5: "<file_sep>"}
MARK = {i: chr(0xE000 + i) for i in TOKENS}
TOKEN_OF = {c: i for i, c in MARK.items()}
ALPHABET = "ab<>/{}\":, 019fxz\né" + "".join(MARK.values())

ITEM = {"type": "object", "properties": {
    "id": {"type": "integer", "minimum": 0, "maximum": 999},
    "tag": {"enum": ["a", "b</f>"]}, "ok": {"type": "boolean"}},
    "required": ["id"], "additionalProperties": False}
LARK = 'start: "go " NUM (" " NUM)*\nNUM: /[0-9]+/\n'
GBNF = 'root ::= "x" [a-c]+ ("-" [a-c]+)?\n'


def _item(rng: random.Random) -> str:
    value: dict[str, Any] = {"id": rng.randint(0, 999)}
    if rng.random() < 0.5:
        value["tag"] = rng.choice(["a", "b</f>"])
    if rng.random() < 0.5:
        value["ok"] = rng.random() < 0.5
    return json.dumps(value)


def _digits(lo: int, hi: int) -> Callable[[random.Random], str]:
    return lambda rng: "".join(rng.choice("0123456789") for _ in range(rng.randint(lo, hi)))


# samplers of the regex, JSON Schema and grammar leaves of the specs below, by their text
SAMPLES: dict[str, Callable[[random.Random], str]] = {
    "[0-9]{2,3}": _digits(2, 3),
    "b+": lambda rng: "b" * rng.randint(1, 3),
    "[xy]": lambda rng: rng.choice("xy"),
    json.dumps(ITEM): _item,
    LARK: lambda rng: "go " + " ".join(_digits(1, 3)(rng) for _ in range(rng.randint(1, 3))),
    GBNF: lambda rng: "x" + "".join(rng.choice("abc") for _ in range(rng.randint(1, 3))) +
    rng.choice(["", "-ca"]),
}


def tag(begin: Any, content: dict, end: Any) -> dict:
    return {"type": "tag", "begin": begin, "content": content, "end": end}


def const(value: str) -> dict:
    return {"type": "const_string", "value": value}


def token(spec: int | str) -> dict:
    return {"type": "token", "token": spec}


FREE = {"type": "any_text"}
JSON_ITEM = {"type": "json_schema", "json_schema": ITEM}
CALLS = [tag("<f1>", JSON_ITEM, "</f>"), tag("<f2>", FREE, "</f2>")]
SPECS: dict[str, dict] = {
    "const-regex-sequence": {"type": "sequence", "elements": [
        const("Hi "), {"type": "regex", "pattern": "[0-9]{2,3}"}, const("!")]},
    "json_schema-in-tag": tag("<j>", JSON_ITEM, "</j>"),
    "grammar-lark": {"type": "sequence", "elements": [
        {"type": "grammar", "grammar": LARK}, const(";")]},
    "grammar-gbnf": {"type": "or", "elements": [
        {"type": "grammar", "grammar": GBNF}, const("none")]},
    "any_text-excludes-max_chars": {"type": "sequence", "elements": [
        {"type": "any_text", "excludes": ["stop", "<"], "max_chars": 8}, const("<end>")]},
    "or-optional-star-plus-repeat": {"type": "sequence", "elements": [
        {"type": "or", "elements": [const("a"), {"type": "regex", "pattern": "b+"}]},
        {"type": "optional", "content": const("?")},
        {"type": "star", "content": const("ab")},
        {"type": "plus", "content": {"type": "regex", "pattern": "[xy]"}},
        {"type": "repeat", "min": 1, "max": 3, "content": const("z")},
        {"type": "repeat", "min": 2, "max": -1, "content": const("w")}]},
    "tag-list-end": {"type": "star", "content": tag("<t>", FREE, ["</t>", "</u>"])},
    "tag-token-ends": {"type": "sequence", "elements": [
        tag(token("<|im_start|>"), {"type": "sequence", "elements": [const("user:"), FREE]},
            token("<[5]>")),
        {"type": "optional", "content": tag("<x>", FREE, token(5))}]},
    "token": {"type": "sequence", "elements": [
        token("<|im_start|>"), const("x"), {"type": "plus", "content": token(5)}]},
    "legacy-structures": {"structures": [{"begin": "<f1>", "schema": ITEM, "end": "</f>"}],
                          "triggers": ["<f"]},
    "legacy-structures-vllm": {"type": "structural_tag", "at_least_one": True,
                               "structures": [{"begin": "<f1>", "schema": ITEM, "end": "</f>"}],
                               "triggers": ["<f"]},
}
for _first in (False, True):
    for _stop in (False, True):
        _flags = {"at_least_one": _first, "stop_after_first": _stop}
        SPECS[f"triggered_tags-{_first:d}{_stop:d}"] = {
            "type": "triggered_tags", "triggers": ["<f"], "tags": CALLS, "excludes": ["BAD"],
            **_flags}
        SPECS[f"tags_with_separator-{_first:d}{_stop:d}"] = {
            "type": "tags_with_separator", "tags": CALLS, "separator": ", ", **_flags}
# a triggered_tags inside a tag: its free text stops at the tag's end
SPECS["triggered_tags-in-tag"] = tag("<answer>", {
    "type": "triggered_tags", "triggers": ["<f"], "tags": CALLS[:1]}, "</answer>")


# ------------------------------------------------------------------ the reference matcher
def _legacy(spec: dict) -> dict:
    tags = [tag(s["begin"], {"type": "json_schema", "json_schema": s["schema"]}, s["end"])
            for s in spec["structures"]]
    return {"type": "triggered_tags", "triggers": spec["triggers"], "tags": tags,
            "at_least_one": spec.get("at_least_one", False)}


def top_format(spec: dict) -> dict:
    if "structures" in spec:
        return _legacy(spec)
    return spec["format"] if spec.get("type") == "structural_tag" else spec


@lru_cache(maxsize=None)
def _earley(grammar: str) -> lark.Lark:
    text = gbnf_to_lark(grammar) if "::=" in grammar else grammar
    return lark.Lark(text, start="start", parser="earley", lexer="dynamic")


def _floats(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_floats(v) for v in value.values())
    return isinstance(value, list) and any(_floats(v) for v in value)


def json_text_ok(schema: dict, text: str) -> bool:
    """A valid instance, spelled as `json.dumps` spells it (`/` also as `\\/`), keys in the
    schema's order."""
    try:
        value = json.loads(text)
    except ValueError:
        return False
    spellings = (json.dumps(value), json.dumps(value, ensure_ascii=False))
    if text.replace("\\/", "/") not in spellings or _floats(value):
        return False
    if not jsonschema.Draft202012Validator(schema).is_valid(value):
        return False
    order = list(schema.get("properties", {}))
    return not isinstance(value, dict) or \
        [order.index(k) for k in value] == sorted(order.index(k) for k in value)


def _token_ends(spec: int | str, text: str, pos: int) -> set[int]:
    token_id = spec if isinstance(spec, int) else \
        int(spec[2:-2]) if spec.startswith("<[") else \
        next(i for i, name in TOKENS.items() if name == spec)
    return {pos + 1} if text[pos:pos + 1] == MARK[token_id] else set()


def _free_ends(text: str, pos: int, excludes: list[str], limit: int | None = None) -> set[int]:
    out = set()
    for end in range(pos, len(text) + 1):
        piece = text[pos:end]
        if any(c in TOKEN_OF for c in piece) or any(e and e in piece for e in excludes) or \
                (limit is not None and len(piece) > limit):
            break
        out.add(end)
    return out


def _delimiter(value: Any, text: str, pos: int) -> set[int]:
    if isinstance(value, dict):
        return _token_ends(value["token"], text, pos)
    values = value if isinstance(value, list) else [value]
    return {pos + len(v) for v in values if text.startswith(v, pos)}


def _then(ends: set[int], step: Callable[[int], set[int]]) -> set[int]:
    return {e2 for e in ends for e2 in step(e)}


def _repeat(node: dict, text: str, pos: int, stops: list[str], lo: int,
            hi: int | None) -> set[int]:
    out, layer, count, seen = set(), {pos}, 0, set()
    while layer and (hi is None or count <= hi):
        if count >= lo:
            out |= layer
            if hi is None:
                layer = layer - seen
                seen |= layer
        layer = _then(layer, lambda e: ends(node, text, e, stops))
        count += 1
    return out


def ends(node: dict, text: str, pos: int, stops: list[str] = ()) -> set[int]:
    """The positions where the format `node` can end when it starts at `pos`; `stops`: the end
    strings of the enclosing tag, which free text at the format's end may not contain."""
    kind = node["type"]
    if kind == "const_string":
        return {pos + len(node["value"])} if text.startswith(node["value"], pos) else set()
    if kind == "regex":
        return {e for e in range(pos, len(text) + 1)
                if re.fullmatch(node["pattern"], text[pos:e])}
    if kind == "json_schema":
        return {e for e in range(pos, len(text) + 1)
                if json_text_ok(node["json_schema"], text[pos:e])}
    if kind == "grammar":
        parser = _earley(node["grammar"])
        return {e for e in range(pos, len(text) + 1) if earley_accepts(parser, text[pos:e])}
    if kind == "token":
        return _token_ends(node["token"], text, pos)
    if kind == "any_text":
        return _free_ends(text, pos, [*node.get("excludes", []), *stops], node.get("max_chars"))
    if kind == "sequence":
        out, last = {pos}, len(node["elements"]) - 1
        for i, element in enumerate(node["elements"]):
            out = _then(out, lambda e, el=element, i=i: ends(el, text, e,
                                                              stops if i == last else ()))
        return out
    if kind == "or":
        return set().union(*(ends(e, text, pos, stops) for e in node["elements"]))
    if kind in ("optional", "star", "plus", "repeat"):
        lo, hi = {"optional": (0, 1), "star": (0, None), "plus": (1, None)}.get(
            kind, (node.get("min"), node.get("max")))
        return _repeat(node["content"], text, pos, stops, lo, None if hi == -1 else hi)
    if kind == "tag":
        end = node["end"]
        inner = end if isinstance(end, list) else [end] if isinstance(end, str) else []
        after_begin = _delimiter(node["begin"], text, pos)
        after_content = _then(after_begin, lambda e: ends(node["content"], text, e, inner))
        return _then(after_content, lambda e: _delimiter(end, text, e))
    tags = {"type": "or", "elements": [{"type": "tag", **t} for t in node["tags"]]}
    first, stop = node.get("at_least_one", False), node.get("stop_after_first", False)
    if kind == "tags_with_separator":
        more = {"type": "star", "content": {"type": "sequence", "elements": [
            const(node["separator"]), tags]}}
        some = tags if stop else {"type": "sequence", "elements": [tags, more]}
        return ends(some if first else {"type": "optional", "content": some}, text, pos)
    assert kind == "triggered_tags", kind
    excluded = [*node["triggers"], *node.get("excludes", []), *stops]

    def free(at: int) -> set[int]:
        return _free_ends(text, at, excluded)

    def tagged(at: int) -> set[int]:
        return ends(tags, text, at)

    if first and stop:
        return tagged(pos)
    if stop:
        before = free(pos)
        return before | _then(before, tagged)
    out, layer = set(), tagged(pos) if first else {pos}
    layer = _then(layer, free)
    while layer - out:  # text (tag text)*, or tag text (tag text)*
        out |= layer
        layer = _then(_then(layer, tagged), free)
    return out


def oracle(spec: dict, text: str) -> bool:
    return len(text) in ends(top_format(spec), text, 0)


# ------------------------------------------------------------------ generated texts
def generate(node: dict, rng: random.Random, stops: tuple[str, ...] = ()) -> str:
    """A random text of the format (one of its language, except where free text happens to
    meet an excluded string across a boundary: the oracle decides every text anyway)."""
    kind = node["type"]
    if kind == "const_string":
        return node["value"]
    if kind in ("regex", "json_schema", "grammar"):
        key = node.get("pattern") or node.get("grammar") or json.dumps(node["json_schema"])
        return SAMPLES[key](rng)
    if kind == "token":
        return _token_text(node["token"])
    if kind == "any_text":
        excluded = [*node.get("excludes", []), *stops]
        for _ in range(20):
            text = "".join(rng.choice("ab </f>ez\n") for _ in range(rng.randint(0, 10)))
            text = text[:node.get("max_chars", 99)]
            if not any(e in text for e in excluded):
                return text
        return ""
    if kind == "sequence":
        last = len(node["elements"]) - 1
        return "".join(generate(e, rng, stops if i == last else ())
                       for i, e in enumerate(node["elements"]))
    if kind == "or":
        return generate(rng.choice(node["elements"]), rng, stops)
    if kind in ("optional", "star", "plus", "repeat"):
        lo, hi = {"optional": (0, 1), "star": (0, 3), "plus": (1, 3)}.get(
            kind, (node.get("min"), node.get("max")))
        count = rng.randint(lo, lo + 3 if hi == -1 else hi)
        return "".join(generate(node["content"], rng, stops) for _ in range(count))
    if kind == "tag":
        end = node["end"]
        inner = tuple(end) if isinstance(end, list) else (end,) if isinstance(end, str) else ()
        return _delimiter_text(node["begin"], rng) + generate(node["content"], rng, inner) + \
            _delimiter_text(end, rng)
    tags = {"type": "or", "elements": [{"type": "tag", **t} for t in node["tags"]]}
    first, stop = node.get("at_least_one", False), node.get("stop_after_first", False)
    count = 1 if first and stop else rng.randint(1 if first else 0, 1 if stop else 3)
    if kind == "tags_with_separator":
        return node["separator"].join(generate(tags, rng) for _ in range(count))
    free = {"type": "any_text", "excludes": [*node["triggers"], *node.get("excludes", [])]}
    parts = [] if first else [generate(free, rng, stops)]
    for _ in range(count):
        parts.append(generate(tags, rng))
        if not stop:
            parts.append(generate(free, rng, stops))
    return "".join(parts)


def _token_text(spec: int | str) -> str:
    return MARK[spec] if isinstance(spec, int) else MARK[int(spec[2:-2])] \
        if spec.startswith("<[") else MARK[next(i for i, n in TOKENS.items() if n == spec)]


def _delimiter_text(value: Any, rng: random.Random) -> str:
    if isinstance(value, dict):
        return _token_text(value["token"])
    return rng.choice(value) if isinstance(value, list) else value


# ------------------------------------------------------------------ the grammar's verdicts
def tokens_of(tokenizer, text: str) -> list[int]:
    """`text` as tokens: each named token's character as that token, the text between by
    longest match."""
    out: list[int] = []
    for piece in re.split("([" + "".join(MARK.values()) + "])", text):
        out += [TOKEN_OF[piece]] if piece in TOKEN_OF else \
            greedy_tokens(tokenizer, piece) if piece else []
    return out


def text_of(tokenizer, tokens: list[int]) -> str:
    return "".join(MARK[t] if t in MARK else tokenizer.token_bytes[t].decode("utf-8", "replace")
                   for t in tokens)


def token_verdict(grammar, tokenizer, text: str, spec: dict | None = None) -> bool:
    """Whether every token of `text` is allowed and EOS after the last; with `spec`, EOS is
    also checked at every token boundary against the oracle."""
    eos = grammar.eos_token_ids[0]
    state, tokens = grammar.initial_state, tokens_of(tokenizer, text)
    for i, token_id in enumerate(tokens):
        if spec is not None:
            prefix = tokenizer.decode_bytes([t for t in tokens[:i] if t not in MARK])
            if prefix.decode("utf-8", "ignore").encode() == prefix:
                assert bool(grammar.mask(state)[eos]) == oracle(spec, text_of(tokenizer,
                                                                              tokens[:i]))
        state = grammar.next_state(state, token_id)
        if not state:
            return False
    return bool(grammar.mask(state)[eos])


@pytest.fixture(scope="module")
def compiled(smollm2) -> dict[str, grammarc.Grammar]:
    return {}


def _grammar(compiled: dict, name: str, tokenizer) -> grammarc.Grammar:
    if name not in compiled:
        compiled[name] = grammarc.compile(json.dumps(SPECS[name]), tokenizer,
                                          kind="structural-tag")
    return compiled[name]


def check_against_oracle(grammar, tokenizer, spec: dict, seed: int, count: int = 15) -> None:
    rng = random.Random(seed)
    fmt = top_format(spec)
    valid = [generate(fmt, rng) for _ in range(count)]
    assert sum(oracle(spec, t) for t in valid) >= count // 2, valid  # the generator works
    texts = valid + [mutate(t, rng, ALPHABET) for t in valid for _ in range(3)]
    for text in texts:
        expected = oracle(spec, text)
        assert token_verdict(grammar, tokenizer, text, spec if expected else None) == expected, \
            text
        if not any(c in TOKEN_OF for c in text):
            assert grammar.matches(text) == expected, text
    np_rng = np.random.default_rng(seed)
    for _ in range(8):
        tokens = grammar.sample_tokens(60, np_rng)
        assert tokens is not None and tokens[-1] in grammar.eos_token_ids
        text = text_of(tokenizer, tokens[:-1])
        if "\ufffd" not in text:
            assert oracle(spec, text), text


@pytest.mark.parametrize("name", sorted(SPECS))
def test_formats_against_the_reference_matcher(name, compiled, smollm2):
    check_against_oracle(_grammar(compiled, name, smollm2), smollm2, SPECS[name],
                         seed=sorted(SPECS).index(name))


def test_at_least_one_allows_free_text_after_the_first_tag(compiled, smollm2):
    """xgrammar: a first tag, then free text and tags as without the flag (a regression: the
    text after the first tag was refused unless another tag came first)."""
    grammar = _grammar(compiled, "triggered_tags-10", smollm2)
    call = '<f1>{"id": 7}</f>'
    for text, ok in [(call, True), (call + " bye", True), (call + " so " + call + " ok", True),
                     (call + call, True), ("hi " + call, False), ("bye", False)]:
        assert grammar.matches(text) == ok == oracle(SPECS["triggered_tags-10"], text), text


def test_a_tag_json_file_compiles_through_the_cli(tmp_path: Path, smollm2):
    spec = {"type": "structural_tag", "format": SPECS["triggered_tags-00"]}
    result = compile_file(tmp_path, "calls.tag.json", json.dumps(spec))
    assert result.returncode == 0, result.stderr
    grammar = grammarc.load(tmp_path / "out.safetensors")
    assert grammar.kind == "structural-tag"
    check_against_oracle(grammar, smollm2, spec, seed=7, count=10)


@pytest.mark.parametrize("spec,pointer,message", [
    ({"type": "nope"}, "/format", "unknown format type 'nope'"),
    ({"type": "const_string", "value": "a", "extra": 1}, "/format/extra", "unknown field"),
    ({"type": "const_string", "text": "a"}, "/format", "missing field 'value'"),
    ({"type": "const_string", "value": 3}, "/format/value", "expected a string"),
    ({"type": "sequence", "elements": {}}, "/format/elements", "expected a list"),
    ({"type": "sequence", "elements": [const("a"), 7]}, "/format/elements/1",
     "a format is a JSON object"),
    ({"type": "or", "elements": []}, "/format/elements", "at least one element"),
    ({"type": "repeat", "min": 2, "max": 1, "content": const("a")}, "/format/max",
     "below min"),
    ({"type": "repeat", "min": True, "max": 1, "content": const("a")}, "/format/min",
     "integer"),
    ({"type": "any_text", "max_chars": -1}, "/format/max_chars", "integer >= 0"),
    ({"type": "any_text", "excludes": "x"}, "/format/excludes", "list of strings"),
    ({"type": "tag", "begin": 1, "content": FREE, "end": "x"}, "/format/begin",
     "a string or a token"),
    ({"type": "tag", "begin": "a", "content": FREE, "end": []}, "/format/end",
     "a list of strings"),
    ({"type": "triggered_tags", "triggers": ["<g"], "tags": CALLS}, "/format/tags/0/begin",
     "none of the triggers"),
    ({"type": "triggered_tags", "triggers": ["<f"], "tags": CALLS, "at_least_one": 1},
     "/format/at_least_one", "true or false"),
    ({"type": "tags_with_separator", "tags": [], "separator": ","}, "/format/tags",
     "at least one tag"),
    ({"type": "any_tokens"}, "/format", "'any_tokens' is not supported"),
    ({"type": "json_schema", "json_schema": ITEM, "style": "qwen_xml"}, "/format/style",
     "'qwen_xml' is not supported"),
    ({"type": "regex", "pattern": "(a"}, "/format/pattern", ""),
    ({"type": "grammar", "grammar": "root ::= ("}, "/format/grammar", "line 1"),
    ({"type": "json_schema", "json_schema": {"type": "nope"}}, "/format/json_schema", ""),
    ({"type": "token", "token": "<|nope|>"}, "/format/token", "has no token"),
    ({"type": "token", "token": 0}, "/format/token", "end-of-sequence token"),
    ({"type": "token", "token": [1]}, "/format/token", "an id or a text"),
])
def test_malformed_specs_are_one_line_errors_with_their_pointer(tmp_path: Path, spec, pointer,
                                                                 message):
    text = json.dumps({"type": "structural_tag", "format": spec})
    result = compile_file(tmp_path, "bad.tag.json", text)
    assert_clean_error(result, f"{pointer}")
    assert message in result.stderr, result.stderr
