"""Structural tag front end: xgrammar's JSON format for outputs that mix free text, tagged
regions, special tokens and JSON (tool calls, reasoning blocks), as vLLM's
`response_format: {"type": "structural_tag", ...}` passes it.

A source is `{"type": "structural_tag", "format": FORMAT}` or a FORMAT alone (or the older
`{"structures": [...], "triggers": [...]}`, with an optional `"type": "structural_tag"` and
`at_least_one`). Formats, each a language:

- `const_string` (`value`), `regex` (`pattern`), `grammar` (`grammar`: GBNF when it has `::=`,
  else Lark; `syntax` may say which), `json_schema` (`json_schema`, compiled by the JSON Schema
  front end with the compile's options), `token` (`token`: one token by id or text, allowed
  exactly there);
- `any_text`: any text not containing one of `excludes` (nor, inside a `tag`, its end), at
  most `max_chars` characters;
- `sequence`, `or` (`elements`), `optional`, `star`, `plus` (`content`), `repeat` (`min`,
  `max`: -1 for no bound, `content`);
- `tag`: `begin` (a string or a `token` format), `content`, `end` (a string, a list of
  strings, or a `token` format); an `any_text` or `triggered_tags` content (or the last
  element of a `sequence` content) stops at the end: its free text never contains it;
- `triggered_tags`: free text containing none of `triggers` (nor `excludes`), where each
  trigger begins one of `tags` (each tag's `begin` starts with a trigger); `at_least_one`: no
  free text before the first tag (free text and tags may follow it, as without the flag);
  `stop_after_first`: nothing after the first tag;
- `tags_with_separator`: `tags` separated by `separator`, nothing else; the same two flags.

Each sub-language keeps its own machines (a JSON Schema's recursion, a grammar's rules),
renamed apart and linked by calls, so tools grow the grammar linearly. Where they cannot all
be linked, the sub-languages that offer other machines for their language (a JSON Schema's
retries) take them, as their own compiles would; only then is recursion unrolled, with a
notice. The free text around them is a regular language, exact: the text before a tag is the
concatenation of free text and the tag (where a trigger overlaps itself, xgrammar's scanner
may see a trigger earlier). Errors name the spec's JSON pointer. Token-level formats other
than `token` (`any_tokens`, `exclude_token`, `token_triggered_tags`, `token_dispatch`) and
`dispatch` are refused.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from ..automaton.expr import (
    MAX_CODE_POINT, Call, CharSet, Expr, MachineSet, alt, concat, literal, normalize_ranges,
    repeat,
)
from ..automaton.callgraph import replace_calls
from ..automaton.linking import inline_calls
from ..automaton.products import Ops
from ..errors import GrammarError, UnsupportedError
from . import FrontendOptions
from .json_schema import compile_schema, read_json

_ANY_CHAR = CharSet(normalize_ranges([(0, MAX_CODE_POINT)]))
_ANY_TEXT = repeat(_ANY_CHAR, 0, None)
_UNSUPPORTED = ("any_tokens", "exclude_token", "token_triggered_tags", "token_dispatch",
                "dispatch")
# fields of each format type: required, then optional
_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "const_string": (("value",), ()),
    "json_schema": (("json_schema",), ("style", "any_order")),
    "regex": (("pattern",), ()),
    "grammar": (("grammar",), ("syntax",)),
    "any_text": ((), ("excludes", "max_chars")),
    "sequence": (("elements",), ()),
    "or": (("elements",), ()),
    "optional": (("content",), ()),
    "star": (("content",), ()),
    "plus": (("content",), ()),
    "repeat": (("content", "min", "max"), ()),
    "tag": (("begin", "content", "end"), ()),
    "triggered_tags": (("triggers", "tags"), ("at_least_one", "stop_after_first", "excludes")),
    "tags_with_separator": (("tags", "separator"), ("at_least_one", "stop_after_first")),
    "token": (("token",), ()),
}


class _SpecError(Exception):
    """A malformed or unsupported spec at a JSON pointer (made a `GrammarError` on the way
    out, with the source's name)."""

    def __init__(self, pointer: str, message: str,
                 cls: type[GrammarError] = GrammarError) -> None:
        super().__init__(f"{pointer or '/'}: {message}")
        self.cls = cls


def parse_structural_tag(text: str, source_name: str | None = None,
                         options: FrontendOptions | None = None) -> Expr | MachineSet:
    """The language of a structural tag given as JSON text."""
    spec = read_json(text, source_name)
    return structural_language(spec, options or FrontendOptions(), source_name)


def structural_language(spec: Any, options: FrontendOptions,
                        source_name: str | None = None) -> Expr | MachineSet:
    """The language of a structural tag given as a parsed JSON value."""
    try:
        return _language(spec, options, source_name)
    except _SpecError as exc:
        raise exc.cls(str(exc), source_name=source_name) from None


def _language(spec: Any, options: FrontendOptions,
              source_name: str | None) -> Expr | MachineSet:
    if isinstance(spec, dict) and "structures" in spec and "format" not in spec and \
            spec.get("type", "structural_tag") == "structural_tag":
        spec, pointer = _legacy(spec), ""
    elif isinstance(spec, dict) and spec.get("type") == "structural_tag":
        _fields(spec, "", ("format",), ("type",))
        spec, pointer = spec["format"], "/format"
    else:
        pointer = ""
    builder = _Builder(options)
    root = builder.format(spec, pointer, ())
    if not builder.machines:
        return root
    first = builder.languages  # the sub-languages' first attempts

    def unrolled() -> Expr:  # only sub-languages built already: no spec error left
        options.notice("the machines of the tags' schemas and grammars cannot all be linked "
                       f"by calls; their recursion is unrolled to depth {options.max_depth} "
                       "and deeper values are not accepted (--max-depth)")
        return _Builder(options, first, flat=True).format(spec, pointer, ())

    return _linked(spec, pointer, options, builder, root, unrolled)


def _linked(spec: Any, pointer: str, options: FrontendOptions, built: _Builder, root: Expr,
            unrolled: Callable[[], Expr]) -> MachineSet:
    """The machines of the tag `built` built. Where they cannot be linked, the alternative is
    the tag built again with each sub-language that offers other machines for its language (a
    JSON Schema's retries) taking them, as its own compile would; once none is left,
    `unrolled` (the first attempts inlined, as the sub-languages' own flat fallbacks)."""
    retries = {at: language.alternative for at, language in built.languages.items()
               if isinstance(language, MachineSet) and language.alternative is not None}

    def alternative() -> Expr | MachineSet:
        again = _Builder(options, {**built.languages, **{at: _retried(at, retry)
                                                         for at, retry in retries.items()}})
        again_root = again.format(spec, pointer, ())
        return _linked(spec, pointer, options, again, again_root, unrolled) \
            if again.machines else again_root

    return MachineSet(root, tuple(built.machines), unrolled, alternative if retries else None)


def _retried(pointer: str, retry: Callable[[], Expr | MachineSet]) -> Expr | MachineSet:
    """A sub-language's alternative machines (built while linking, after the spec was read:
    an error names the sub-language's pointer itself)."""
    try:
        return retry()
    except GrammarError as exc:
        raise type(exc)(f"{pointer or '/'}: {exc.message}") from None


def _legacy(spec: dict) -> dict:
    """xgrammar's older form `{"structures": [{"begin", "schema", "end"}], "triggers"}` (as
    vLLM and SGLang pass it: with `"type": "structural_tag"` and an optional `at_least_one`)
    as the `triggered_tags` it stands for."""
    _fields(spec, "", ("structures", "triggers"), ("type", "at_least_one"))
    structures = _list(spec, "structures", "")
    tags = []
    for i, item in enumerate(structures):
        _fields(item, f"/structures/{i}", ("begin", "schema", "end"), ())
        tags.append({"type": "tag", "begin": item["begin"], "end": item["end"],
                     "content": {"type": "json_schema", "json_schema": item["schema"]}})
    return {"type": "triggered_tags", "triggers": spec["triggers"], "tags": tags,
            **({"at_least_one": spec["at_least_one"]} if "at_least_one" in spec else {})}


class _Builder:
    """Formats to expressions. Sub-languages (JSON schemas, grammars) are built once each and
    kept in `languages` by pointer (or given, built before); machine sets among them are
    linked by calls (their machines renamed apart into `machines`), or, for the flat fallback
    (`flat`), inlined with recursion unrolled to `options.max_depth`."""

    def __init__(self, options: FrontendOptions,
                 languages: dict[str, Expr | MachineSet] | None = None,
                 flat: bool = False) -> None:
        self.options = options
        self.languages: dict[str, Expr | MachineSet] = dict(languages or {})
        self.flat = flat
        self.machines: list[tuple[str, Expr]] = []
        self.ops = Ops(options.max_states)

    def format(self, node: Any, pointer: str, stops: tuple[str, ...]) -> Expr:
        """The language of the format `node` at `pointer`; `stops` are the end strings of the
        enclosing tag, which its free text may not contain."""
        if not isinstance(node, dict):
            raise _SpecError(pointer, f"a format is a JSON object, not {_kind(node)}")
        kind = node.get("type")
        if kind in _UNSUPPORTED:
            raise _SpecError(pointer, f"format type {kind!r} is not supported (token-level "
                             "formats other than 'token', and 'dispatch')", UnsupportedError)
        if kind not in _FIELDS:
            raise _SpecError(pointer, f"unknown format type {kind!r}; the types are "
                             f"{', '.join(_FIELDS)}")
        required, optional = _FIELDS[kind]
        _fields(node, pointer, required, ("type", *optional))
        return getattr(self, "_" + kind)(node, pointer, stops)

    def _const_string(self, node: dict, pointer: str, stops: tuple[str, ...]) -> Expr:
        return literal(_string(node, "value", pointer))

    def _regex(self, node: dict, pointer: str, stops: tuple[str, ...]) -> Expr:
        from .regex import parse_regex

        pattern = _string(node, "pattern", pointer)
        try:
            return parse_regex(pattern, options=self.options)
        except GrammarError as exc:
            raise _SpecError(f"{pointer}/pattern", exc.message, type(exc)) from None

    def _grammar(self, node: dict, pointer: str, stops: tuple[str, ...]) -> Expr:
        text = _string(node, "grammar", pointer)
        syntax = node.get("syntax", "gbnf" if "::=" in text else "lark")
        if syntax not in ("gbnf", "lark"):
            raise _SpecError(f"{pointer}/syntax", f"syntax is 'lark' or 'gbnf', not {syntax!r}")

        def build() -> Expr | MachineSet:
            from .gbnf import parse_gbnf
            from .lark_grammar import parse_lark

            parse = parse_gbnf if syntax == "gbnf" else parse_lark
            try:
                return parse(text, None, replace(self.options, start=None))
            except GrammarError as exc:
                where = f" (line {exc.line}, column {exc.column})" if exc.line else ""
                raise _SpecError(f"{pointer}/grammar", exc.message + where,
                                 type(exc)) from None

        return self.embed(pointer, build)

    def _json_schema(self, node: dict, pointer: str, stops: tuple[str, ...]) -> Expr:
        if node.get("style", "json") != "json":
            raise _SpecError(f"{pointer}/style", f"style {node['style']!r} is not supported "
                             "(only 'json')", UnsupportedError)
        if node.get("any_order", False) is not False:
            raise _SpecError(f"{pointer}/any_order", "any_order is not supported: keys come "
                             "in the schema's order", UnsupportedError)

        def build() -> Expr | MachineSet:
            try:
                return compile_schema(node["json_schema"], self.options)
            except GrammarError as exc:
                message = exc.message if exc.message.startswith("/") else f": {exc.message}"
                raise _SpecError(f"{pointer}/json_schema{message}", "", type(exc)) from None

        return self.embed(pointer, build)

    def _token(self, node: dict, pointer: str, stops: tuple[str, ...]) -> Expr:
        spec = node["token"]
        if isinstance(spec, bool) or not isinstance(spec, (int, str)):
            raise _SpecError(f"{pointer}/token", f"a token is an id or a text, not {_kind(spec)}")
        try:
            return self.options.token(spec)
        except GrammarError as exc:
            raise _SpecError(f"{pointer}/token", exc.message) from None

    def _any_text(self, node: dict, pointer: str, stops: tuple[str, ...]) -> Expr:
        excludes = _strings(node, "excludes", pointer, default=[])
        text = self.free_text((*excludes, *stops))
        max_chars = node.get("max_chars")
        if max_chars is None:
            return text
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 0:
            raise _SpecError(f"{pointer}/max_chars", "max_chars is an integer >= 0")
        return self.ops.intersect(text, repeat(_ANY_CHAR, 0, max_chars))

    def _sequence(self, node: dict, pointer: str, stops: tuple[str, ...]) -> Expr:
        elements = _list(node, "elements", pointer)
        last = len(elements) - 1
        return concat(*(self.format(e, f"{pointer}/elements/{i}", stops if i == last else ())
                        for i, e in enumerate(elements)))

    def _or(self, node: dict, pointer: str, stops: tuple[str, ...]) -> Expr:
        elements = _list(node, "elements", pointer)
        if not elements:
            raise _SpecError(f"{pointer}/elements", "an 'or' needs at least one element")
        return alt(*(self.format(e, f"{pointer}/elements/{i}", stops)
                     for i, e in enumerate(elements)))

    def _optional(self, node: dict, pointer: str, stops: tuple[str, ...]) -> Expr:
        return repeat(self.format(node["content"], f"{pointer}/content", stops), 0, 1)

    def _star(self, node: dict, pointer: str, stops: tuple[str, ...]) -> Expr:
        return repeat(self.format(node["content"], f"{pointer}/content", stops), 0, None)

    def _plus(self, node: dict, pointer: str, stops: tuple[str, ...]) -> Expr:
        return repeat(self.format(node["content"], f"{pointer}/content", stops), 1, None)

    def _repeat(self, node: dict, pointer: str, stops: tuple[str, ...]) -> Expr:
        lo, hi = node["min"], node["max"]
        for key, value in (("min", lo), ("max", hi)):
            if isinstance(value, bool) or not isinstance(value, int) or value < -1 or \
                    (key == "min" and value < 0):
                raise _SpecError(f"{pointer}/{key}", f"{key} is an integer >= "
                                 f"{0 if key == 'min' else -1}")
        if hi != -1 and hi < lo:
            raise _SpecError(f"{pointer}/max", f"max {hi} is below min {lo}")
        content = self.format(node["content"], f"{pointer}/content", stops)
        return repeat(content, lo, None if hi == -1 else hi)

    def _tag(self, node: dict, pointer: str, stops: tuple[str, ...]) -> Expr:
        begin = self.delimiter(node["begin"], f"{pointer}/begin", many=False)
        end_node = node["end"]
        end = self.delimiter(end_node, f"{pointer}/end", many=True)
        texts = tuple(end_node) if isinstance(end_node, list) else \
            (end_node,) if isinstance(end_node, str) else ()
        content = self.format(node["content"], f"{pointer}/content", texts)
        return concat(begin, content, end)

    def delimiter(self, value: Any, pointer: str, many: bool) -> Expr:
        """A tag's begin or end: a string, a `token` format, or (`many`) a list of strings."""
        if isinstance(value, str):
            return literal(value)
        if many and isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return alt(*(literal(v) for v in value))
        if isinstance(value, dict) and value.get("type") == "token":
            return self.format(value, pointer, ())
        expected = "a string, a list of strings or a token" if many else "a string or a token"
        raise _SpecError(pointer, f"expected {expected}, not {_kind(value)}")

    def _triggered_tags(self, node: dict, pointer: str, stops: tuple[str, ...]) -> Expr:
        triggers = _strings(node, "triggers", pointer)
        if not triggers or "" in triggers:
            raise _SpecError(f"{pointer}/triggers", "triggers are one or more non-empty strings")
        tags = self.tags(node, pointer, triggers)
        text = self.free_text((*triggers, *_strings(node, "excludes", pointer, default=[]),
                               *stops))
        first, stop = _flags(node, pointer)
        if first and stop:
            return tags
        if stop:
            return concat(text, repeat(tags, 0, 1))
        loop = repeat(concat(tags, text), 0, None)
        return concat(tags, text, loop) if first else concat(text, loop)

    def _tags_with_separator(self, node: dict, pointer: str, stops: tuple[str, ...]) -> Expr:
        separator = _string(node, "separator", pointer)
        tags = self.tags(node, pointer, ())
        first, stop = _flags(node, pointer)
        some = tags if stop else concat(tags, repeat(concat(literal(separator), tags), 0, None))
        return some if first else repeat(some, 0, 1)

    def tags(self, node: dict, pointer: str, triggers: tuple[str, ...] | list[str]) -> Expr:
        """The union of a node's `tags`; with `triggers`, each begin starts with one."""
        tags = _list(node, "tags", pointer)
        if not tags:
            raise _SpecError(f"{pointer}/tags", "at least one tag is needed")
        options = []
        for i, tag in enumerate(tags):
            where = f"{pointer}/tags/{i}"
            if not isinstance(tag, dict) or tag.get("type", "tag") != "tag":
                raise _SpecError(where, "each of 'tags' is a 'tag' format")
            if triggers:
                begin = tag.get("begin")
                if not isinstance(begin, str):
                    raise _SpecError(f"{where}/begin", "a triggered tag begins with a string")
                if not any(begin.startswith(t) for t in triggers):
                    raise _SpecError(f"{where}/begin", f"{begin!r} starts with none of the "
                                     "triggers")
            options.append(self.format({"type": "tag", **tag}, where, ()))
        return alt(*options)

    def free_text(self, excludes: tuple[str, ...] | list[str]) -> Expr:
        """Any text containing none of `excludes` (each of them non-empty)."""
        excluded = [e for e in dict.fromkeys(excludes) if e]
        if not excluded:
            return _ANY_TEXT
        return self.ops.difference(
            _ANY_TEXT, concat(_ANY_TEXT, alt(*(literal(e) for e in excluded)), _ANY_TEXT))

    def embed(self, pointer: str, build) -> Expr:
        """A sub-language built once (by `build`): a flat one as it is; the root of a machine
        set with its machines renamed apart (or, in the flat fallback, inlined)."""
        if pointer not in self.languages:
            self.languages[pointer] = build()
        language = self.languages[pointer]
        if not isinstance(language, MachineSet):
            return language
        if self.flat:
            unrolled = language.unrolled() if language.unrolled else None
            if unrolled is not None and not isinstance(unrolled, MachineSet):
                return unrolled
            return inline_calls(language, self.options.max_depth, self.options.max_states)
        prefix = f"{pointer}#"
        renamed = {name: prefix + name for name, _ in language.machines}

        def call(name: str) -> Expr:
                return Call(renamed[name])

        self.machines.extend((renamed[name], replace_calls(body, call))
                             for name, body in language.machines)
        return replace_calls(language.root, call)


def _fields(node: Any, pointer: str, required: tuple[str, ...],
            optional: tuple[str, ...]) -> None:
    """Checks that `node` is an object with the `required` fields and no unknown ones."""
    if not isinstance(node, dict):
        raise _SpecError(pointer, f"expected a JSON object, not {_kind(node)}")
    for key in required:
        if key not in node:
            raise _SpecError(pointer, f"missing field {key!r}")
    unknown = [key for key in node if key not in required and key not in optional]
    if unknown:
        raise _SpecError(f"{pointer}/{unknown[0]}", f"unknown field {unknown[0]!r} (the "
                         f"fields are {', '.join((*required, *optional))})")


def _flags(node: dict, pointer: str) -> tuple[bool, bool]:
    """A node's `at_least_one` and `stop_after_first` (false when absent)."""
    values = []
    for key in ("at_least_one", "stop_after_first"):
        value = node.get(key, False)
        if not isinstance(value, bool):
            raise _SpecError(f"{pointer}/{key}", f"{key} is true or false")
        values.append(value)
    return values[0], values[1]


def _string(node: dict, key: str, pointer: str) -> str:
    value = node[key]
    if not isinstance(value, str):
        raise _SpecError(f"{pointer}/{key}", f"expected a string, not {_kind(value)}")
    return value


def _strings(node: dict, key: str, pointer: str, default: list | None = None) -> list[str]:
    value = node.get(key, default)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _SpecError(f"{pointer}/{key}", "expected a list of strings")
    return value


def _list(node: dict, key: str, pointer: str) -> list:
    value = node[key]
    if not isinstance(value, list):
        raise _SpecError(f"{pointer}/{key}", f"expected a list, not {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    """How a JSON value is named in an error."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)) or type(value).__name__ == "Decimal":
        return "a number"
    return {str: "a string", list: "a list", dict: "an object"}.get(type(value), repr(value))


__all__ = ["parse_structural_tag", "structural_language"]
