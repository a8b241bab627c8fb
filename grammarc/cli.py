"""Command line: `grammarc compile`, `grammarc --version`.

Exit codes: 0 success, 1 bad input (a one-line `error: ...` on stderr, no traceback), 2 usage.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from ._version import __version__
from .artifact import artifact_suffix
from .automaton import DEFAULT_MAX_STATES
from .errors import GrammarcError
from .frontends import KINDS, grammar_stem

EXIT_CODES_HELP = "Exit codes: 0 success, 1 bad input or failed check, 2 usage error."


class _ErrorsAsExitCodes(click.Group):
    """Turn `GrammarcError` into one line on stderr and exit code 1."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except GrammarcError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)


@click.group(cls=_ErrorsAsExitCodes, epilog=EXIT_CODES_HELP)
@click.version_option(__version__, prog_name="grammarc")
def main() -> None:
    """Compile regexes and grammars into exact token tables for constrained LLM decoding."""


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


def _parse_ids(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated token ids, got {text!r}") from None


def _check_output(output: Path) -> None:
    """Fail before compiling when the artifact could not be written anyway."""
    artifact_suffix(output)
    parent = output.parent
    if not parent.is_dir():
        raise GrammarcError(f"cannot write {output}: {parent} is not a directory")


@main.command("compile", epilog=EXIT_CODES_HELP)
@click.argument("source", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--regex", "pattern", metavar="PATTERN",
              help="Compile this regex instead of a SOURCE file.")
@click.option("--kind", type=click.Choice(KINDS),
              help="Grammar kind; by default it follows the SOURCE suffix "
                   "(.regex, .json, .lark, .gbnf, .fsm.yaml).")
@click.option("--tokenizer", "tokenizer_spec", required=True, metavar="TOKENIZER",
              help="smollm2, a tokenizer.json (or its folder), a .gguf file, or a Hugging Face "
                   "repo id in the local cache.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Artifact path (.safetensors or .npz). Default: SOURCE's name with "
                   ".safetensors, in the current directory.")
@click.option("--eos", "eos_ids", metavar="IDS",
              help="Comma-separated end-of-sequence token ids (default: the model's end tokens).")
@click.option("--layout", type=click.Choice(["factored", "csr", "dense"]), default="factored",
              show_default=True, help="How the token table is stored.")
@click.option("--max-states", type=click.IntRange(min=2), default=DEFAULT_MAX_STATES,
              show_default=True, help="Fail instead of building a DFA larger than this.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
def compile_command(source: Path | None, pattern: str | None, kind: str | None,
                    tokenizer_spec: str, output: Path | None, eos_ids: str | None, layout: str,
                    max_states: int, quiet: bool) -> None:
    """Compile SOURCE (or --regex PATTERN) into a token-table artifact."""
    from .compiler import compile as compile_grammar
    from .tokenizers import load_tokenizer

    if (source is None) == (pattern is None):
        raise click.UsageError("give either a SOURCE file or --regex PATTERN")
    if output is None:
        if source is None:
            raise click.UsageError("--regex needs -o/--output")
        output = Path(grammar_stem(source) + ".safetensors")
    eos = _parse_ids(eos_ids)
    _check_output(output)
    started = time.perf_counter()
    tokenizer = load_tokenizer(tokenizer_spec, eos_token_ids=eos)
    progress = _AlignmentProgress(quiet)
    try:
        if pattern is not None:
            grammar = compile_grammar(pattern, tokenizer, kind or "regex", max_states=max_states,
                                      progress=progress)
        else:
            grammar = compile_grammar(source, tokenizer, kind, max_states=max_states,
                                      progress=progress)
    finally:
        progress.close()
    grammar.save(output, layout=layout)
    if not quiet:
        size = output.stat().st_size
        click.echo(f"wrote {output}: {grammar.num_states} states, {grammar.num_classes} token "
                   f"classes, {grammar.num_rows} rows, {size:,} bytes "
                   f"({time.perf_counter() - started:.2f} s)", err=True)
