"""The compile pipeline: source → expression tree → byte DFA → token table → `Grammar`.

Each stage is a separate function call, timed when the caller passes a `timings` dict, so the
benchmarks and the CLI can report where time goes.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import time
from contextlib import contextmanager
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Iterator

from ._version import __version__
from .alignment.flat import align, tokenizer_trie
from .alignment.calls import align_calls
from .alignment.row_masks import row_masks
from .format.artifact import FORMAT_NAME, FORMAT_VERSION, format_version
from .automaton import ByteDFA
from .automaton.linking import language_automaton
from .automaton.pushdown import PushdownDFA
from .deepcall import call_with_deep_stack
from .errors import AmbiguityError, GrammarcError, GrammarError, TooManyStatesError
from .frontends import FrontendOptions, kind_for_path, parser_for, source_text
from .runtime import CallGrammar, Grammar
from .runtime.loading import grammar_for
from .tokenizers import Tokenizer, load_tokenizer
from .tokenizers.special import TokenNames

MAX_SOURCE_BYTES = 16 << 20  # a grammar file larger than this is data given by mistake

Progress = Callable[[int, int], None]


def compile(source: str | os.PathLike, tokenizer: Tokenizer | str | os.PathLike,
            kind: str | None = None, *, options: FrontendOptions | None = None,
            progress: Progress | None = None,
            timings: dict[str, float] | None = None) -> Grammar:
    """Compile a grammar for a tokenizer.

    `source` is the grammar text (then `kind` is required) or a path to a grammar file (the
    kind follows its suffix: .regex, .json, .lark, .gbnf, .fsm.yaml). `tokenizer` is a
    `Tokenizer` or anything `load_tokenizer` accepts. `options` are the front ends' options
    (recursion depth, start rule, JSON whitespace, the `max_states` bound, ...); notices such
    as unrolled recursion are issued as `GrammarcNotice` warnings unless `options.notice` says
    otherwise.
    """
    kind, text, name = read_source(source, kind)
    tok = load_tokenizer(tokenizer)
    options = options or FrontendOptions()
    names = TokenNames(tok)
    automaton = build_automaton(kind, text, name, replace(options, tokens=names.terminal),
                                timings)
    with _timed(timings, "trie"):
        trie = tokenizer_trie(tok, names.named)
    metadata = grammar_metadata(kind, text, name, tok, options)
    if names.named:
        metadata["special_tokens"] = {str(i): names.named[i] for i in sorted(names.named)}
    try:
        if isinstance(automaton, PushdownDFA):
            table = align_calls(automaton, trie, tok.vocab_size, tok.eos_token_ids,
                                progress=progress, timings=timings)
        else:
            table = align(automaton, trie, tok.vocab_size, tok.eos_token_ids,
                          progress=progress, timings=timings)
    except MemoryError:  # freed by unwinding; a clean error like the automaton stage's
        raise TooManyStatesError(f"the token tables of {automaton.num_states:,} states do not "
                                 "fit in memory (lower --max-states or simplify the grammar)",
                                 source_name=name) from None
    if isinstance(automaton, PushdownDFA):
        metadata["machines"] = list(automaton.machine_names)
    elif automaton.labels is not None:
        metadata["state_names"] = list(automaton.label_names)
    metadata["format_version"] = format_version(table)
    grammar = grammar_for(metadata, table)
    with _timed(timings, "row masks"):
        grammar.keep_row_masks(*row_masks(table))
    if isinstance(grammar, CallGrammar):
        with _timed(timings, "stack tables"):
            grammar.plan()
    return grammar


def grammar_metadata(kind: str, text: str, name: str | None, tok: Tokenizer,
                     options: FrontendOptions) -> dict[str, Any]:
    """The artifact metadata a compile records: every input that decides the tables (the
    layout and checksum are added when it is saved)."""
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "grammarc_version": __version__,
        "kind": kind,
        "source": text,
        "source_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "source_name": name,
        "options": options.to_metadata(),
        "tokenizer": {"name": tok.name, "fingerprint": tok.fingerprint,
                      "vocab_size": tok.vocab_size, "eos_token_ids": list(tok.eos_token_ids)},
        "start_state": 1,
        "dead_state": 0,
    }


def build_automaton(kind: str, text: str, name: str | None, options: FrontendOptions,
                    timings: dict[str, float] | None = None) -> ByteDFA | PushdownDFA:
    """The character-level automaton of a grammar source: its front end, then the minimal
    byte DFA, or machines linked by calls when the front end made some and the next byte
    always decides between calling, returning and going on (otherwise the calls are inlined,
    recursion to `--max-depth`). Runs on a deep stack (`deepcall`), so grammars nested
    thousands of levels deep compile. Errors of the automaton stage name the source file, and
    a too-many-states error repeats the front end's notices (e.g. which rules were unrolled).
    Each notice is issued once, however often its part of the grammar is read.

    A JSON Schema with `key_order="any"` whose automaton needs more states than
    `--max-states` (its machines linked by calls counted together, which in the schema's
    order may take ten times as many) is compiled again in the schema's key order (a subset
    of the same values' texts, so still exact), with a notice; the first attempt's notices
    are then dropped, and it leaves the front end's alternative machines, where a count
    spelled out passes the bound, to the second (`linking.deterministic_pushdown`)."""
    notices: list[str] = []

    def notice(message: str) -> None:
        if message not in notices:  # a schema object read again says nothing new
            notices.append(message)
            options.notice(message)

    def automaton(opts: FrontendOptions, sink: Callable[[str], None]) -> ByteDFA | PushdownDFA:
        with _timed(timings, "front end"):
            expr = parser_for(kind)(text, name, replace(opts, notice=sink))
        with _timed(timings, "byte DFA"):
            try:
                return language_automaton(expr, opts.max_states, opts.max_depth, sink,
                                          past_limit=opts.key_order != "any")
            except GrammarError as exc:
                if exc.line is not None:
                    raise
                if isinstance(exc, AmbiguityError) and kind == "fsm":
                    from .frontends.fsm import state_offset

                    raise GrammarError(exc.message, source_name=name, text=text,
                                       offset=state_offset(text, name, exc.states)) from None
                message = "; ".join([exc.message, *notices]) \
                    if isinstance(exc, TooManyStatesError) else exc.message
                raise type(exc)(message, source_name=name) from None

    def build() -> ByteDFA | PushdownDFA:
        if kind != "json-schema" or options.key_order != "any":
            return automaton(options, notice)
        held: list[str] = []  # the notices of the attempt in any key order
        try:
            result = automaton(options, held.append)
            if result.num_states > options.max_states:  # machines linked by calls, in all
                raise TooManyStatesError(f"the automaton needs {result.num_states:,} states, "
                                         f"more than --max-states {options.max_states:,}")
        except TooManyStatesError as exc:
            if exc.line is not None:
                for message in held:
                    notice(message)
                raise
            from .frontends.json_schema import largest_unordered_objects

            largest = ", ".join(f"{pointer} ({count} properties)"
                                for pointer, count in largest_unordered_objects(
                                    text, options.max_states))
            notice(f"{exc.message.split('; ')[0]} with the keys of objects in any order; "
                   "they follow the schema's order instead (as with --key-order schema): "
                   "raise --max-states, or split large objects and unions of objects"
                   + (f" (the largest in any order: {largest})" if largest else ""))
            return automaton(replace(options, key_order="schema"), notice)
        for message in held:
            notice(message)
        return result

    try:
        return call_with_deep_stack(build)
    except RecursionError:  # deeper than even the deep stack allows: a clean, located error
        raise TooManyStatesError("the grammar nests too deeply to compile (Python's recursion "
                                 "limit)", source_name=name) from None
    except MemoryError:  # an allocation no estimate foresaw; freed by unwinding
        raise TooManyStatesError("the automaton does not fit in memory (lower --max-states "
                                 "or simplify the grammar)", source_name=name) from None


def compile_json_schema(schema: dict | bool | str | type,
                        tokenizer: Tokenizer | str | os.PathLike, **kwargs) -> Grammar:
    """Compile a JSON Schema given as a Python object (`dict` or `bool`), as JSON text (a
    `str`: no schema is a string), or the schema of a Pydantic model class (its
    `model_json_schema()`), as peers accept.

    The schema is stored in the artifact as JSON text (property order kept). Keyword arguments
    are those of `compile` (`options=FrontendOptions(whitespace="compact")`, ...).
    """
    if isinstance(schema, type):
        to_schema = getattr(schema, "model_json_schema", None)
        if not callable(to_schema):
            raise GrammarcError(f"{schema.__name__} is a class without model_json_schema(): "
                                "give a schema (dict or bool) or a Pydantic model class")
        schema = to_schema()
    text = schema if isinstance(schema, str) else \
        json.dumps(schema, ensure_ascii=False, default=_json_default)
    return compile(text, tokenizer, "json-schema", **kwargs)


def compile_tools(tools: list | str | os.PathLike, tokenizer: Tokenizer | str | os.PathLike, *,
                  format: str = "hermes", tool_choice: Any = "auto", parallel: bool = True,
                  reasoning: bool | str = False, **kwargs) -> Grammar:
    """Compile the tool calls of an OpenAI `tools` list (or a JSON file holding one) in a
    model's format (`hermes`, `llama3-json`, `mistral`, `json`), with OpenAI's `tool_choice`
    (`auto`, `required`, `none`, a tool name) and `parallel_tool_calls`, and an optional
    `<think>` block first (`reasoning`: True, or "open" where the prompt opened it); see
    `frontends.tool_calls`. The artifact records the structural tag it compiles (kind
    `structural-tag`). Keyword arguments are those of `compile`."""
    from .frontends.json_schema import read_json
    from .frontends.tool_calls import tool_calls_tag

    name = None
    if isinstance(tools, (str, os.PathLike)):
        kind, text, name = read_source(tools, "json-schema")
        tools = read_json(text, name)
    tok = load_tokenizer(tokenizer)
    try:
        spec = tool_calls_tag(tools, format=format, tool_choice=tool_choice, parallel=parallel,
                              reasoning=reasoning, tokenizer=tok)
    except GrammarError as exc:
        raise GrammarError(f"{name}: {exc}" if name else str(exc)) from None
    text = json.dumps(spec, ensure_ascii=False, default=_json_default)
    return compile(text, tok, "structural-tag", **kwargs)


def _json_default(value):
    if isinstance(value, Decimal):
        return float(value) if value != value.to_integral_value() else int(value)
    raise TypeError(f"not JSON serialisable: {value!r}")


def read_source(source: str | os.PathLike, kind: str | None) -> tuple[str, str, str | None]:
    """(kind, source text, file name or None) for a grammar given as text or as a path."""
    is_path = isinstance(source, os.PathLike) or (
        kind is None and isinstance(source, str) and kind_for_path(source) is not None)
    if not is_path:
        if kind is None:
            raise GrammarcError("cannot tell what kind of grammar this text is; pass kind= "
                                "(regex, json-schema, lark, gbnf or fsm) or a file path")
        text = str(source)
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise GrammarcError(f"the grammar text is not valid Unicode (character "
                                f"{exc.start + 1} is a lone surrogate)") from None
        if size > MAX_SOURCE_BYTES:
            raise GrammarcError(f"the grammar text is larger than {MAX_SOURCE_BYTES:,} bytes")
        return kind, text, None
    path = Path(source)
    kind = kind or kind_for_path(path)
    if kind is None:
        raise GrammarcError(f"{path}: cannot tell the grammar kind from the file name; "
                            "use a suffix such as .regex, .json, .lark, .gbnf, .fsm.yaml "
                            "or pass the kind explicitly")
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_SOURCE_BYTES + 1)
    except OSError as exc:
        raise GrammarcError(f"{path}: cannot read grammar file: {exc.strerror or exc}") from None
    if len(raw) > MAX_SOURCE_BYTES:
        raise GrammarcError(f"{path}: the grammar file is larger than {MAX_SOURCE_BYTES:,} "
                            "bytes; grammarc reads grammars, not data")
    mark = len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0
    try:
        text = raw[mark:].decode("utf-8")  # a byte order mark (Windows editors write one)
    except UnicodeDecodeError as exc:
        raise GrammarcError(f"{path}: not UTF-8 text (byte {mark + exc.start})") from None
    return kind, source_text(kind, text), path.name


@contextmanager
def _timed(timings: dict[str, float] | None, stage: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        if timings is not None:
            timings[stage] = timings.get(stage, 0.0) + time.perf_counter() - start
