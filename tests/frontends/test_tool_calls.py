"""Tool calls from OpenAI tools lists built from maskbench-dev's BFCL and Glaive schemas, for
every format, tool_choice and parallel setting: the grammar's own samples read back by an
independent reader (split on the format's markers, `json`, `jsonschema` against each tool's
schema, the tool among those chosen); maskbench's valid instances wrapped as calls accepted
token by token on SmolLM2 (EOS exactly at the end) and its invalid ones refused; a reasoning
block; jump-forward through a named call's opening; budgets in free text."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from grammar_oracles import greedy_tokens
from helpers import SHARED, walk_within_budget

import grammarc

ROOT = Path(__file__).resolve().parents[2]

MASKBENCH = SHARED / "conformance" / "maskbench-dev"
pytestmark = pytest.mark.skipif(not MASKBENCH.is_dir(),
                                reason="../shared (conformance data) is absent")
FORMATS = ("hermes", "llama3-json", "mistral", "json")
FAST = ("BFCL_simple_106", "BFCL_multiple_", "BFCL_java_", "Glaiveai2K---book_flight",
        "Glaiveai2K---calculate_area_1")


def tool_files(prefixes: tuple[str, ...] | None = None) -> list[Path]:
    """BFCL and Glaive files of maskbench-dev (the first per prefix, or all)."""
    files = sorted(p for p in MASKBENCH.glob("*.json") if p.name.startswith(("BFCL_", "Glaive")))
    if prefixes is None:
        return files
    return [next(p for p in files if p.name.startswith(prefix)) for prefix in prefixes]


def tools_of(files: list[Path]) -> tuple[list[dict], dict[str, dict]]:
    """An OpenAI tools list (each file's schema as a tool's parameters, named after the file)
    and the maskbench data per tool name."""
    tools, data = [], {}
    for path in files:
        item = json.loads(path.read_text("utf-8"))
        name = re.sub(r"[^A-Za-z0-9_]", "_", path.stem)[:64]
        tools.append({"type": "function", "function": {"name": name, "description": "test",
                                                       "parameters": item["schema"]}})
        data[name] = item
    return tools, data


@pytest.fixture(scope="module")
def tools() -> tuple[list[dict], dict[str, dict]]:
    return tools_of(tool_files(FAST))


# ------------------------------------------------------------------ the independent reader
def _json_calls(text: str, separator: str, key: str) -> list[tuple[str, Any]] | None:
    """Call objects `{"name", key}` one after another, `separator` between."""
    decoder, calls, pos = json.JSONDecoder(), [], 0
    while True:
        try:
            value, pos = decoder.raw_decode(text, pos)
        except ValueError:
            return None
        if not isinstance(value, dict) or list(value) != ["name", key]:
            return None
        calls.append((value["name"], value[key]))
        if pos == len(text):
            return calls
        if not text.startswith(separator, pos) or not separator:
            return None
        pos += len(separator)


def read_calls(fmt: str, text: str) -> tuple[list[str], list[tuple[str, Any]]] | None:
    """The free texts and calls of an output in `fmt`, or None where it is not in the format.
    Hermes: text, then calls each followed by text; the others: text or calls."""
    if fmt == "hermes":
        parts = re.split(r"<tool_call>\n(.*?)\n</tool_call>", text, flags=re.S)
        calls = []
        for body in parts[1::2]:
            call = _json_calls(body, "", "arguments")
            if call is None:
                return None
            calls += call
        texts = parts[0::2]
        return (None if any("<tool_call>" in t for t in texts) else texts), calls
    if fmt == "mistral":
        head, marker, rest = text.partition("[TOOL_CALLS]")
        if not marker:
            return [text], []
        try:
            items = json.loads(rest)
        except ValueError:
            return None
        if not isinstance(items, list) or not items or \
                not all(isinstance(i, dict) and list(i) == ["name", "arguments"] for i in items):
            return None
        return [head], [(i["name"], i["arguments"]) for i in items]
    if not text or text[0] not in "[{" and not text[0].isspace():
        return [text], []
    if fmt == "llama3-json":
        calls = _json_calls(text, "; ", "parameters")
    elif text.startswith("["):
        try:
            items = json.loads(text)
        except ValueError:
            return None
        calls = None if not isinstance(items, list) or not items else \
            _json_calls(", ".join(json.dumps(i) for i in items), ", ", "arguments")
    else:
        calls = _json_calls(text, "", "arguments")
    return None if calls is None else ([], calls)


def check_output(fmt: str, choice: str, parallel: bool, text: str,
                 schemas: dict[str, dict]) -> int:
    """Asserts `text` is a right output for the settings; returns its number of calls."""
    read = read_calls(fmt, text)
    assert read is not None and read[0] is not None, text
    texts, calls = read
    for name, arguments in calls:
        assert name in schemas and choice in ("auto", "required", name), (name, text)
        jsonschema.validate(arguments, schemas[name])
    if choice == "none":
        assert not calls, text
    elif choice != "auto":
        assert calls and not "".join(texts).strip("\n"), text
    if choice not in ("auto", "required", "none") or not parallel:
        assert len(calls) <= 1, text
    if fmt == "hermes" and choice == "auto" and not parallel and calls:
        assert texts[-1] == "", text  # nothing after the one call
    if fmt == "json" and calls and parallel and choice in ("auto", "required"):
        assert text.startswith("["), text
    return len(calls)


def sampled_texts(grammar, tokenizer, count: int, seed: int, max_tokens: int = 400) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        tokens = grammar.sample_tokens(max_tokens, rng)
        assert tokens is not None and tokens[-1] in grammar.eos_token_ids
        out.append(tokenizer.decode_bytes(tokens[:-1]).decode("utf-8"))
    return out


@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "single"])
@pytest.mark.parametrize("choice", ["auto", "required", "none", "named"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_sampled_outputs_are_read_back_as_valid_calls(fmt, choice, parallel, tools, smollm2):
    tool_list, data = tools
    name = tool_list[-1]["function"]["name"]
    choice = name if choice == "named" else choice
    grammar = grammarc.compile_tools(tool_list, smollm2, format=fmt, tool_choice=choice,
                                     parallel=parallel)
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tool_list}
    counts = [check_output(fmt, choice, parallel, text, schemas)
              for text in sampled_texts(grammar, smollm2, 12, seed=len(fmt) + len(choice))]
    if choice not in ("auto", "none"):
        assert min(counts) >= 1


def wrap(fmt: str, name: str, arguments: str) -> str:
    """One call of `name` with `arguments` (JSON text) as the format writes it."""
    return {"hermes": f'<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>',
            "llama3-json": f'{{"name": "{name}", "parameters": {arguments}}}',
            "mistral": f'[TOOL_CALLS][{{"name": "{name}", "arguments": {arguments}}}]',
            "json": f'{{"name": "{name}", "arguments": {arguments}}}'}[fmt]


def accepted(grammar, tokenizer, text: str) -> bool:
    """Every token of `text` allowed, EOS allowed after the last and before it only where
    the text so far is complete."""
    state, eos = grammar.initial_state, grammar.eos_token_ids[0]
    for token in greedy_tokens(tokenizer, text):
        state = grammar.next_state(state, token)
        if not state:
            return False
    return bool(grammar.mask(state)[eos])


def check_instances(files: list[Path], tokenizer, fmt: str) -> None:
    """maskbench's instances of each tool, wrapped as one required call: the valid accepted,
    the invalid refused; two calls in a row only where the format allows them."""
    tool_list, data = tools_of(files)
    grammar = grammarc.compile_tools(tool_list, tokenizer, format=fmt, tool_choice="required",
                                     parallel=False)
    checked = 0
    for name, item in data.items():
        for case in item["tests"]:
            text = wrap(fmt, name, json.dumps(case["data"]))
            assert accepted(grammar, tokenizer, text) == case["valid"], (name, case)
            checked += 1
            if case["valid"] and fmt == "hermes":
                assert not accepted(grammar, tokenizer, text + "\n" + text)
                assert not accepted(grammar, tokenizer, "Sure. " + text)
    assert checked >= len(data)


@pytest.mark.parametrize("fmt", FORMATS)
def test_maskbench_instances_wrapped_as_calls_token_by_token(fmt, smollm2):
    check_instances(tool_files(FAST), smollm2, fmt)


@pytest.mark.slow
def test_every_bfcl_and_glaive_tool_at_once(smollm2):
    """All 110 tools in one grammar: every valid instance accepted, every invalid refused."""
    check_instances(tool_files(), smollm2, "hermes")


@pytest.mark.parametrize("reasoning", [True, "open"])
def test_a_reasoning_block_comes_first(reasoning, tools, smollm2):
    tool_list, _ = tools
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tool_list}
    grammar = grammarc.compile_tools(tool_list, smollm2, format="hermes", tool_choice="required",
                                     reasoning=reasoning)
    opening = "<think>" if reasoning is True else ""
    for text in sampled_texts(grammar, smollm2, 10, seed=3):
        assert text.startswith(opening), text
        thought, marker, rest = text[len(opening):].partition("</think>")
        assert marker and "</think>" not in thought, text
        check_output("hermes", "required", True, rest.lstrip(), schemas)
    name = tool_list[0]["function"]["name"]
    call = wrap("hermes", name, json.dumps(next(c["data"] for c in tools[1][name]["tests"]
                                                if c["valid"])))
    assert accepted(grammar, smollm2, f"{opening}I will call it.</think>\n\n{call}")
    assert not accepted(grammar, smollm2, f"{opening}I will call it.</think>\n\nNo.")
    assert not accepted(grammar, smollm2, call)


@pytest.mark.parametrize("reasoning", [True, "open"])
def test_a_reasoning_block_on_deepseek_with_its_own_tokens(reasoning, deepseek):
    """DeepSeek-R1-Distill's `<think>`, `</think>` and `<tool_call>` are single tokens whose
    text is their bytes: each is allowed where its text is, the text spelled by other tokens
    too; the thought is free text (nearly every token) that never holds `</think>`, and no
    control, padding or end token is allowed before the calls end."""
    think, end_think, tool_call, eos = 151648, 151649, 151657, 151643
    tools = json.loads((ROOT / "grammars" / "weather-tools.json").read_text("utf-8"))
    grammar = grammarc.compile_tools(tools, deepseek, format="hermes", tool_choice="required",
                                     reasoning=reasoning)
    text_tokens = np.array([data is not None for data in deepseek.token_bytes])
    state = grammar.initial_state
    if reasoning is True:
        assert grammar.mask(state)[think]
        state = grammar.next_state(state, think)
    inside = grammar.mask(state)
    assert inside.sum() > 0.99 * text_tokens.sum() and not (inside & ~text_tokens).any()
    for token in greedy_tokens(deepseek, "Weather in Paris: call get_weather."):
        state = grammar.next_state(state, token)
    assert grammar.mask(state)[end_think] and not grammar.mask(state)[eos]
    state = grammar.next_state(state, end_think)
    for token in greedy_tokens(deepseek, "\n\n"):
        state = grammar.next_state(state, token)
    assert grammar.mask(state)[tool_call] and not grammar.mask(state)[think]
    state = grammar.next_state(state, tool_call)
    for token in greedy_tokens(deepseek, '\n{"name": "get_weather", "arguments": '
                                         '{"city": "Paris"}}\n</tool_call>'):
        assert not (grammar.mask(state) & ~text_tokens).any()
        state = grammar.next_state(state, token)
        assert state
    assert grammar.is_accepting(state) and grammar.mask(state)[eos]
    opening = "<think>" if reasoning is True else ""
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    assert accepted(grammar, deepseek, f"{opening}Sure.</think>\n\n{call}")
    assert not accepted(grammar, deepseek, f"{opening}Sure.</think> more </think>\n\n{call}")
    assert not accepted(grammar, deepseek, f"{opening}Sure.</think>\n\n" + call.replace(
        '"Paris"', "7"))


def test_a_named_tool_is_forced_through_its_opening(tools, smollm2):
    tool_list, _ = tools
    name = tool_list[1]["function"]["name"]
    grammar = grammarc.compile_tools(tool_list, smollm2, format="hermes", tool_choice=name)
    forced = grammar.forced(grammar.initial_state)
    opening = f'<tool_call>\n{{"name": "{name}", "arguments": {{'.encode()
    assert forced.text.startswith(opening), forced.text
    assert opening.startswith(smollm2.decode_bytes(forced.tokens)) and forced.tokens
    state = grammar.walk_bytes(forced.text)
    assert state and not grammar.is_accepting(state)


def test_budgets_in_free_text_always_leave_a_way_to_end(tools, smollm2):
    tool_list, _ = tools
    grammar = grammarc.compile_tools(tool_list, smollm2, format="hermes", tool_choice="auto")
    rng = np.random.default_rng(5)
    state = grammar.initial_state
    assert grammar.mask(state).sum() > 0.99 * grammar.vocab_size  # free text: nearly all
    for token in greedy_tokens(smollm2, "Let me check. <tool"):
        for budget in (1, 2, 3, 8):
            assert grammar.mask(state, budget=budget).any()
            walk_within_budget(grammar, state, budget, rng)
        state = grammar.next_state(state, token)
        assert state
    assert not grammar.mask(state, budget=1).any() or grammar.is_accepting(state)
    walk_within_budget(grammar, state, grammar.tokens_to_accept(state) + 1, rng)


# a recursion whose call is in doubt with a value read inline (`"b"`: an enum in one branch,
# the recursion, which may start with `"` too, in another): the schema's own compile links it
# only on its retry with each value a machine (`frontends.json_schema.schema.Compiler`)
TREE = {"anyOf": [
    {"type": "object", "additionalProperties": False, "required": ["a"],
     "properties": {"a": {"$ref": "#/$defs/node"}, "b": {"enum": ["x", "y"]}}},
    {"type": "object", "additionalProperties": False, "required": ["a", "b"],
     "properties": {"a": {"$ref": "#/$defs/node"}, "b": {"$ref": "#/$defs/node"}}},
    {"type": "string"}]}
TREE_TOOL = {"type": "function", "function": {"name": "walk", "parameters": {
    "type": "object", "required": ["tree"], "properties": {"tree": {"$ref": "#/$defs/node"}},
    "$defs": {"node": TREE}}}}


def random_tree(rng: np.random.Generator, depth: int) -> Any:
    """A random value near `TREE`'s language: nested objects of keys `a`/`b` (sometimes `c`,
    sometimes without `a`), leaves strings, enum words or numbers."""
    if depth == 0 or rng.random() < 0.15:
        return [rng.choice(["x", "y", "s", ""]), 7, None][int(rng.choice(3, p=[.85, .1, .05]))]
    keys = [k for k in ("a", "b", "c") if rng.random() < (0.95, 0.7, 0.05)["abc".index(k)]]
    return {k: random_tree(rng, depth - 1) if rng.random() < 0.8 else str(rng.choice(["x", "q"]))
            for k in keys}


def test_arguments_whose_recursion_needs_the_schemas_retry_are_linked(smollm2):
    """A tool whose parameters the JSON Schema front end links only on its retry (value
    machines) is linked inside the tool-call grammar too: no notice, no depth limit. Random
    arguments nested up to 12 deep are accepted exactly where `jsonschema` validates them, and
    the grammar's samples are read back as valid calls."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", grammarc.GrammarcNotice)
        grammar = grammarc.compile_tools([TREE_TOOL], smollm2, format="hermes",
                                         tool_choice="walk")
    schema = TREE_TOOL["function"]["parameters"]
    validator = jsonschema.Draft202012Validator(schema)
    rng = np.random.default_rng(11)
    verdicts, deepest = [], 0
    for _ in range(400):
        arguments = {"tree": random_tree(rng, int(rng.integers(1, 13)))}
        text = json.dumps(arguments)
        call = f'<tool_call>\n{{"name": "walk", "arguments": {text}}}\n</tool_call>'
        state = grammar.walk_bytes(call.encode())
        valid = validator.is_valid(arguments)
        assert bool(state and grammar.is_accepting(state)) == valid, text
        verdicts.append(valid)
        if valid:
            deepest = max(deepest, text.count("{"))
    assert 50 < sum(verdicts) < 350 and deepest >= 8, (sum(verdicts), deepest)
    for text in sampled_texts(grammar, smollm2, 8, seed=3, max_tokens=600):
        assert check_output("hermes", "walk", True, text, {"walk": schema}) == 1


def test_a_tag_whose_grammar_cannot_be_linked_is_unrolled_with_a_notice(smollm2):
    """A sub-language whose recursion cannot be linked by calls, with no retry left (a
    grammar whose recursion is in doubt with its own bytes), is unrolled inside the tag: with
    a notice, not silently; values within the depth are read, deeper ones refused."""
    spec = {"type": "structural_tag", "format": {
        "type": "tag", "begin": "<x>", "end": "</x>",
        "content": {"type": "grammar", "grammar": 'start: x\nx: "a" x "c" | "a" "a" "b"'}}}
    with pytest.warns(grammarc.GrammarcNotice, match="unrolled to depth 4"):
        grammar = grammarc.compile(json.dumps(spec), smollm2, "structural-tag")
    for depth in range(1, 7):
        state = grammar.walk_bytes(f"<x>{'a' * depth}aab{'c' * depth}</x>".encode())
        assert bool(state and grammar.is_accepting(state)) == (depth <= 4), depth


@pytest.mark.parametrize("kwargs,message", [
    ({"format": "xml"}, "unknown tool-call format 'xml'"),
    ({"tool_choice": "nope"}, "tool_choice 'nope'"),
    ({"reasoning": "yes"}, "reasoning is true, false or 'open'"),
])
def test_bad_settings_are_errors(kwargs, message, tools, smollm2):
    with pytest.raises(grammarc.GrammarError, match=re.escape(message)):
        grammarc.compile_tools(tools[0], smollm2, **kwargs)
