"""Tool calls from an OpenAI `tools` list: the structural tag (xgrammar's JSON format,
`structural_tag.py`) of the calls a model writes in its own format, with OpenAI's
`tool_choice` and `parallel_tool_calls`, and an optional reasoning block first.

Formats (what the model writes; the server's tool-call parser reads it back):

- `hermes` (Hermes, Qwen 2.5/3, SmolLM, DeepSeek-R1-distill; vLLM `--tool-call-parser hermes`):
  `<tool_call>\\n{"name": "NAME", "arguments": ARGS}\\n</tool_call>`, several separated by `\\n`;
- `llama3-json` (Llama 3.x; `llama3_json`): `{"name": "NAME", "parameters": ARGS}`, several
  separated by `; `;
- `mistral` (`mistral`): `[TOOL_CALLS][{"name": "NAME", "arguments": ARGS}, ...]`;
- `json`: a bare `{"name": "NAME", "arguments": ARGS}`, several as a JSON array.

`tool_choice`: `auto` (free text, or calls where the format allows them: hermes and mistral
after free text, the others instead of it), `required` (one or more calls and nothing else),
`none` (free text with no call), or a tool's name (exactly one call of it). `parallel=False`:
at most one call. `reasoning=True`: the output opens with a `<think>` block of free text
closed by `</think>`; `reasoning="open"`: the prompt already opened it (the output starts
inside it, as DeepSeek-R1's chat template does). ARGS are exact to each tool's `parameters`
schema, compiled by the JSON Schema front end with the compile's options.

A marker the tokenizer holds as a special (control) token, such as `[TOOL_CALLS]` in recent
Mistral tokenizers, is written as that token; markers the tokenizer spells as text (`<think>`
in DeepSeek's, a user-defined token) stay text, which their single token spells too.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import GrammarError
from ..tokenizers import Tokenizer

FORMATS = ("hermes", "llama3-json", "mistral", "json")
TOOL_CHOICES = ("auto", "required", "none")
_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,256}")
_NO_PARAMETERS = {"type": "object", "properties": {}}


def tool_calls_tag(tools: list[Any], *, format: str = "hermes", tool_choice: Any = "auto",
                   parallel: bool = True, reasoning: bool | str = False,
                   tokenizer: Tokenizer | None = None) -> dict[str, Any]:
    """The structural tag of the tool calls of `tools` in `format` (see the module docstring).
    `tokenizer`, when given, decides which markers are special tokens."""
    functions = _functions(tools)
    choice = _choice(tool_choice, functions)
    if format not in FORMATS:
        raise GrammarError(f"unknown tool-call format {format!r}; choose one of "
                           f"{', '.join(FORMATS)}")
    if reasoning not in (False, True, "open"):
        raise GrammarError(f"reasoning is true, false or 'open', not {reasoning!r}")
    if choice not in ("auto", "none") and not functions:
        raise GrammarError(f"tool_choice {choice!r} needs at least one tool")
    marker = _Markers(tokenizer)
    calls = _FORMATS[format](functions, choice, parallel, marker)
    if reasoning:
        think = {"type": "tag", "begin": "" if reasoning == "open" else marker("<think>"),
                 "content": {"type": "any_text"}, "end": marker("</think>")}
        calls = {"type": "sequence", "elements": [
            think, {"type": "regex", "pattern": r"\s*"}, calls]}
    return {"type": "structural_tag", "format": calls}


def _hermes(functions: list[dict], choice: str, parallel: bool, marker) -> dict:
    tags = [_tag(f, '<tool_call>\n{"name": "', '", "arguments": ', "}\n</tool_call>")
            for f in _chosen(functions, choice)]
    if choice == "none":
        return {"type": "any_text", "excludes": ["<tool_call>"]}
    if choice == "auto":
        return {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": tags,
                "stop_after_first": not parallel}
    return _separated(tags, "\n", parallel)


def _llama3_json(functions: list[dict], choice: str, parallel: bool, marker) -> dict:
    tags = [_tag(f, '{"name": "', '", "parameters": ', "}") for f in _chosen(functions, choice)]
    return _calls_or_text(_separated(tags, "; ", parallel), choice)


def _mistral(functions: list[dict], choice: str, parallel: bool, marker) -> dict:
    if choice == "none":
        return {"type": "any_text", "excludes": ["[TOOL_CALLS]"]}
    tags = [_tag(f, '{"name": "', '", "arguments": ', "}") for f in _chosen(functions, choice)]
    begin = marker("[TOOL_CALLS]")
    calls = {"type": "tag", "begin": begin, "content": _separated(tags, ", ", parallel, "["),
             "end": "]"}
    if choice != "auto":
        return calls
    return {"type": "sequence", "elements": [
        {"type": "any_text", "excludes": ["[TOOL_CALLS]"]}, {"type": "optional", "content": calls}]}


def _json(functions: list[dict], choice: str, parallel: bool, marker) -> dict:
    tags = [_tag(f, '{"name": "', '", "arguments": ', "}") for f in _chosen(functions, choice)]
    calls = {"type": "tag", "begin": "[", "content": _separated(tags, ", ", True), "end": "]"} \
        if parallel and choice != "none" else _separated(tags, "", False)
    return _calls_or_text(calls, choice)


_FORMATS = {"hermes": _hermes, "llama3-json": _llama3_json, "mistral": _mistral,
            "json": _json}


def _tag(function: dict, before_name: str, after_name: str, end: str) -> dict:
    """One call of `function`: its name and arguments between a format's strings."""
    return {"type": "tag", "begin": before_name + function["name"] + after_name,
            "content": {"type": "json_schema", "json_schema": function["parameters"]},
            "end": end}


def _separated(tags: list[dict], separator: str, parallel: bool, prefix: str = "") -> dict:
    """One call (`parallel` false) or one or more separated by `separator`; `prefix` first."""
    calls = {"type": "tags_with_separator", "tags": tags, "separator": separator,
             "at_least_one": True, "stop_after_first": not parallel}
    if not prefix:
        return calls
    return {"type": "sequence", "elements": [{"type": "const_string", "value": prefix}, calls]}


def _calls_or_text(calls: dict, choice: str) -> dict:
    """For formats without a trigger: `auto` is free text that does not open like a call
    (nor at all like a JSON value) or the calls; `none` the free text alone."""
    text = {"type": "regex", "pattern": r"([^\[{\s][\s\S]*)?"}
    if choice == "none":
        return text
    return {"type": "or", "elements": [text, calls]} if choice == "auto" else calls


def _chosen(functions: list[dict], choice: str) -> list[dict]:
    return functions if choice in ("auto", "required", "none") else \
        [f for f in functions if f["name"] == choice]


class _Markers:
    """A format's marker: a `token` format where the tokenizer holds the marker as a special
    token (no text bytes), else the string."""

    def __init__(self, tokenizer: Tokenizer | None) -> None:
        self.special: dict[str, int] = {}
        if tokenizer is not None:
            for token_id, data in enumerate(tokenizer.token_bytes):
                if data is None and token_id not in tokenizer.eos_token_ids:
                    self.special.setdefault(tokenizer.token_text(token_id), token_id)

    def __call__(self, text: str) -> str | dict:
        token_id = self.special.get(text)
        return text if token_id is None else {"type": "token", "token": token_id}


def _functions(tools: Any) -> list[dict]:
    """The tools' functions as `{"name", "parameters"}`, checked (errors name a JSON pointer
    into the tools list)."""
    if not isinstance(tools, list):
        raise GrammarError("/: tools are a JSON list of OpenAI tools ({\"type\": \"function\", "
                           "\"function\": {...}})")
    out, seen = [], set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise GrammarError(f"/{i}: a tool is a JSON object")
        where = f"/{i}"
        if "function" in tool:
            if tool.get("type", "function") != "function":
                raise GrammarError(f"{where}/type: only function tools are supported, not "
                                   f"{tool.get('type')!r}")
            tool, where = tool["function"], f"/{i}/function"
            if not isinstance(tool, dict):
                raise GrammarError(f"{where}: a function is a JSON object")
        name = tool.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise GrammarError(f"{where}/name: a tool name is 1 to 256 letters, digits, _ . : "
                               f"or -, not {name!r}")
        if name in seen:
            raise GrammarError(f"{where}/name: the tool {name!r} is listed twice")
        seen.add(name)
        parameters = tool.get("parameters", _NO_PARAMETERS)
        if not isinstance(parameters, (dict, bool)):
            raise GrammarError(f"{where}/parameters: a JSON Schema (object or boolean)")
        out.append({"name": name, "parameters": parameters})
    return out


def _choice(tool_choice: Any, functions: list[dict]) -> str:
    """`auto`, `required`, `none` or a tool's name, from OpenAI's forms."""
    if isinstance(tool_choice, dict):
        function = tool_choice.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if tool_choice.get("type") != "function" or not isinstance(name, str):
            raise GrammarError('tool_choice is "auto", "required", "none", a tool name, or '
                               '{"type": "function", "function": {"name": ...}}')
        tool_choice = name
    if not isinstance(tool_choice, str):
        raise GrammarError(f"tool_choice is a string, not {tool_choice!r}")
    if tool_choice in TOOL_CHOICES:
        return tool_choice
    if tool_choice not in {f["name"] for f in functions}:
        raise GrammarError(f"tool_choice {tool_choice!r} is none of auto, required, none and "
                           "no tool of the list")
    return tool_choice
