"""`grammarc compile`: a grammar source and a tokenizer to an artifact; the front-end options
it shares with `grammarc dot`."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from ..format.artifact import artifact_suffix
from ..automaton import DEFAULT_MAX_STATES
from ..errors import GrammarcError
from ..frontends import KINDS, FrontendOptions, grammar_stem
from ..frontends.tool_calls import FORMATS as TOOL_FORMATS
from . import EXIT_CODES_HELP, main
from .common import parse_ids


class _AlignmentProgress:
    """A progress bar on a terminal's stderr, shown once alignment has run for half a second."""

    def __init__(self, quiet: bool) -> None:
        self.enabled = not quiet and sys.stderr.isatty()
        self.start: float | None = None
        self.bar = None
        self.shown = 0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self.start is None:
            self.start = time.perf_counter()
        if self.bar is None:
            if time.perf_counter() - self.start < 0.5:
                return
            self.bar = click.progressbar(length=total, label="aligning tokens", file=sys.stderr)
            self.bar.__enter__()
        self.bar.update(done - self.shown)
        self.shown = done

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)


def _check_output(output: Path) -> None:
    """Fail before compiling when the artifact could not be written anyway."""
    artifact_suffix(output)
    parent = output.parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else \
            "does not exist (create it first, e.g. mkdir -p)"
        raise GrammarcError(f"cannot write {output}: the directory {parent} {what}")


def frontend_options(command):
    """The options of the front ends (shared by the commands that read grammar sources)."""
    for option in reversed([
        click.option("--kind", type=click.Choice(KINDS),
                     help="Grammar kind; by default it follows the SOURCE suffix "
                          "(.regex, .json, .lark, .gbnf, .fsm.yaml, .tag.json)."),
        click.option("--max-states", type=click.IntRange(min=FrontendOptions.MINIMUMS["max_states"]),
                     default=DEFAULT_MAX_STATES, show_default=True,
                     help="Fail instead of building an automaton (final or intermediate) larger "
                          "than this."),
        click.option("--max-depth", type=click.IntRange(min=FrontendOptions.MINIMUMS["max_depth"]),
                     default=4, show_default=True,
                     help="How deep recursive rules and $refs are unrolled."),
        click.option("--start", metavar="RULE", help="Start rule of a Lark or GBNF grammar."),
        click.option("--whitespace", default="default", show_default=True, metavar="STYLE",
                     help="JSON whitespace: default, compact, flexible, or a regex."),
        click.option("--no-additional-properties", "strict_objects", is_flag=True,
                     help="JSON Schema: forbid properties a schema does not declare."),
        click.option("--lenient", is_flag=True,
                     help="JSON Schema: ignore unsupported keywords (with a notice) instead of "
                          "failing."),
        click.option("--integer-fractions", is_flag=True,
                     help="JSON Schema: also allow integers written with a zero fraction "
                          "(34.0; valid from draft 6 on)."),
        click.option("--key-order", type=click.Choice(FrontendOptions.CHOICES["key_order"]),
                     default="schema", show_default=True,
                     help="JSON Schema: object keys in the schema's order, or in any order "
                          "(each at most once)."),
    ]):
        command = option(command)
    return command


def make_frontend_options(max_states: int, max_depth: int, start: str | None, whitespace: str,
                          strict_objects: bool, lenient: bool, integer_fractions: bool,
                          key_order: str, quiet: bool) -> FrontendOptions:
    """`FrontendOptions` from the command-line options; notices go to stderr unless quiet."""
    return FrontendOptions(
        max_states=max_states, max_depth=max_depth, start=start, whitespace=whitespace,
        additional_properties=not strict_objects, lenient=lenient,
        integer_fractions=integer_fractions, key_order=key_order,
        notice=(lambda message: None) if quiet else
        (lambda message: click.echo(f"notice: {message}", err=True)))


@main.command("compile", epilog=EXIT_CODES_HELP)
@click.argument("source", required=False, type=click.Path(path_type=Path))
@click.option("--regex", "pattern", metavar="PATTERN",
              help="Compile this regex instead of a SOURCE file.")
@frontend_options
@click.option("--tokenizer", "tokenizer_spec", required=True, metavar="TOKENIZER",
              help="smollm2, deepseek-r1-distill-qwen, a tokenizer.json (or its folder), a .gguf "
                   "file, or a Hugging Face repo id in the local cache.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Artifact path (.safetensors or .npz). Default: SOURCE's name with "
                   ".safetensors, in the current directory.")
@click.option("--eos", "eos_ids", metavar="IDS",
              help="Comma-separated end-of-sequence token ids (default: the model's end tokens).")
@click.option("--layout", type=click.Choice(["factored", "csr", "dense"]), default="factored",
              show_default=True, help="How the token table is stored.")
@click.option("--tools", "tool_format", type=click.Choice(TOOL_FORMATS),
              help="SOURCE is an OpenAI tools list: compile the tool calls in this model format.")
@click.option("--tool-choice", default="auto", show_default=True, metavar="CHOICE",
              help="With --tools: auto, required, none, or a tool's name (OpenAI's meaning).")
@click.option("--parallel-tool-calls/--no-parallel-tool-calls", default=True, show_default=True,
              help="With --tools: allow several calls in one output.")
@click.option("--reasoning", is_flag=True,
              help="With --tools: a <think> block of free text comes first.")
@click.option("--reasoning-open", is_flag=True,
              help="With --tools: the prompt opened <think>; the output starts inside it.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
def compile_command(source: Path | None, pattern: str | None, kind: str | None,
                    tokenizer_spec: str, output: Path | None, eos_ids: str | None, layout: str,
                    tool_format: str | None, tool_choice: str, parallel_tool_calls: bool,
                    reasoning: bool, reasoning_open: bool,
                    max_states: int, max_depth: int, start: str | None, whitespace: str,
                    strict_objects: bool, lenient: bool, integer_fractions: bool,
                    key_order: str, quiet: bool) -> None:
    """Compile SOURCE (or --regex PATTERN) into a token-table artifact; with --tools, SOURCE
    is an OpenAI tools list and the artifact constrains the model's tool calls."""
    from ..compiler import compile as compile_grammar
    from ..compiler import compile_tools
    from ..tokenizers import load_tokenizer

    if (source is None) == (pattern is None):
        raise click.UsageError("give either a SOURCE file or --regex PATTERN")
    if tool_format is None and (tool_choice != "auto" or not parallel_tool_calls or reasoning
                                or reasoning_open):
        raise click.UsageError("--tool-choice, --no-parallel-tool-calls and --reasoning go "
                               "with --tools FORMAT")
    if tool_format is not None and (pattern is not None or kind is not None):
        raise click.UsageError("--tools reads a tools list from SOURCE (no --regex, no --kind)")
    if output is None:
        if source is None:
            raise click.UsageError("--regex needs -o/--output")
        output = Path(grammar_stem(source) + ".safetensors")
    eos = parse_ids(eos_ids)
    _check_output(output)
    started = time.perf_counter()
    tokenizer = load_tokenizer(tokenizer_spec, eos_token_ids=eos)
    options = make_frontend_options(max_states, max_depth, start, whitespace, strict_objects,
                                    lenient, integer_fractions, key_order, quiet)
    progress = _AlignmentProgress(quiet)
    try:
        if tool_format is not None:
            grammar = compile_tools(source, tokenizer, format=tool_format,
                                    tool_choice=tool_choice, parallel=parallel_tool_calls,
                                    reasoning="open" if reasoning_open else reasoning,
                                    options=options, progress=progress)
        else:
            grammar = compile_grammar(pattern if pattern is not None else source, tokenizer,
                                      kind or ("regex" if pattern is not None else None),
                                      options=options, progress=progress)
    finally:
        progress.close()
    if layout != "factored" and grammar.table.calls is not None:
        raise GrammarcError(f"--layout {layout}: the grammar compiles to machines linked by "
                            "calls, which only the factored layout stores (docs/FORMAT.md)")
    grammar.save(output, layout=layout)
    if not quiet:
        size = output.stat().st_size
        click.echo(f"wrote {output}: {grammar.num_states} states, {grammar.num_classes} token "
                   f"classes, {grammar.num_rows} rows, {size:,} bytes "
                   f"({time.perf_counter() - started:.2f} s)", err=True)
