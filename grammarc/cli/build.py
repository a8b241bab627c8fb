"""`grammarc build`: compile what a `grammarc.toml` manifest lists, skipping fresh artifacts.

An artifact is fresh when the metadata it records (source sha256 and name, kind, options,
layout, tokenizer name, fingerprint and EOS ids, format and grammarc versions) equals what a
compile from the manifest would record now, and the file passes its checksum; rebuilding a
fresh artifact would give the same bytes. The manifest schema is in docs/cli.md.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import string
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import click

from ..format.artifact import LAYOUTS, SUFFIXES, read_artifact
from ..errors import ArtifactError, GrammarcError, line_column
from ..frontends import (KINDS, TOO_MANY_DIGITS, FrontendOptions, grammar_stem, long_number_offset,
                         too_many_digits)
from . import EXIT_CODES_HELP, main
from .common import describe_difference, echo_json, flat_differences

_FRONTEND_KEYS = tuple(f.name for f in dataclasses.fields(FrontendOptions) if f.name != "notice")


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_count(minimum: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= minimum


def _frontend_setting(key: str) -> tuple[Callable[[Any], bool], str]:
    """How to check a front-end option: by the type of its default in FrontendOptions."""
    default = getattr(FrontendOptions(), key)
    choices = FrontendOptions.CHOICES.get(key)
    if choices is not None:
        return (lambda v: v in choices), f"one of {', '.join(choices)}"
    if isinstance(default, bool):
        return (lambda v: isinstance(v, bool)), "true or false"
    if isinstance(default, int):
        minimum = FrontendOptions.MINIMUMS.get(key, 0)
        return _is_count(minimum), f"an integer >= {minimum}"
    return _is_str, "a string"


# setting -> (check, what it must be)
_SETTINGS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "tokenizer": (lambda v: _is_str(v) or (isinstance(v, list) and bool(v) and all(map(_is_str, v))),
                  "a tokenizer or a non-empty list of them"),
    "kind": (lambda v: v in KINDS, f"one of {', '.join(KINDS)}"),
    "layout": (lambda v: v in LAYOUTS, f"one of {', '.join(LAYOUTS)}"),
    "eos": (lambda v: isinstance(v, list) and all(map(_is_count(0), v)), "a list of token ids"),
    **{key: _frontend_setting(key) for key in _FRONTEND_KEYS},
}
_ENTRY_KEYS = ("source", "sources", "output")
# metadata a compile records that is not an input: the source text (its sha256 is compared) and
# the format version, which follows from the tables the inputs make (2 for a call grammar, 3
# with counted repetitions)
_OUTCOMES = ("source", "format_version")
_LABELS = {"built": "built", "fresh": "up to date", "stale": "stale", "missing": "missing",
           "invalid": "invalid"}


@dataclass(frozen=True)
class Target:
    """One artifact the manifest asks for."""

    source: Path
    output: Path
    tokenizer: str          # as written in the manifest; recorded in the artifact
    tokenizer_spec: str     # what load_tokenizer gets (a path resolved against the manifest)
    settings: dict[str, Any]

    def options(self, notice: Callable[[str], None]) -> FrontendOptions:
        return FrontendOptions(**{k: self.settings[k] for k in _FRONTEND_KEYS
                                  if k in self.settings}, notice=notice)


def read_manifest(path: Path) -> list[Target]:
    """The targets a manifest lists, every path resolved against the manifest's folder."""
    try:
        text = path.read_text(encoding="utf-8")
        document = tomllib.loads(text)
    except OSError as exc:
        raise GrammarcError(f"{path}: cannot read manifest: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise GrammarcError(f"{path}: invalid TOML: {exc}") from None
    except ValueError as exc:  # tomllib converts integers without a limit of its own
        if not too_many_digits(exc):
            raise
        line, column = line_column(text, long_number_offset(text) or 0)
        raise GrammarcError(f"{path}:{line}:{column}: invalid TOML: {TOO_MANY_DIGITS}") from None
    _known_keys(document, ("tokenizers", "defaults", "artifact"), f"{path}")
    names = document.get("tokenizers", {})
    if not isinstance(names, dict) or not all(map(_is_str, names.values())):
        raise GrammarcError(f"{path}: [tokenizers] must map names to tokenizers (strings)")
    defaults = document.get("defaults", {})
    if not isinstance(defaults, dict):
        raise GrammarcError(f"{path}: [defaults] must be a table")
    _check_settings(defaults, f"{path}: [defaults]")
    entries = document.get("artifact")
    if not isinstance(entries, list) or not entries:
        raise GrammarcError(f"{path}: no [[artifact]] entries")
    base = path.parent
    targets: list[Target] = []
    written: dict[Path, int] = {}  # each output, resolved, -> the entry that writes it
    for number, entry in enumerate(entries, 1):
        where = f"{path}: [[artifact]] {number}"
        _known_keys(entry, (*_ENTRY_KEYS, *_SETTINGS), where)
        settings = {**defaults, **{k: v for k, v in entry.items() if k not in _ENTRY_KEYS}}
        _check_settings(settings, where)
        if "tokenizer" not in settings:
            raise GrammarcError(f"{where}: no tokenizer (set it here or in [defaults])")
        if not _is_str(entry.get("output")):
            raise GrammarcError(f"{where}: 'output' (a path) is required")
        tokenizers = settings.pop("tokenizer")
        for source in _sources(entry, base, where):
            for name in [tokenizers] if _is_str(tokenizers) else tokenizers:
                output = Path(os.path.normpath(base / _expand(entry["output"], source, name,
                                                              where)))
                if output.suffix.lower() not in SUFFIXES:
                    raise GrammarcError(f"{where}: output {output} must end in "
                                        f"{' or '.join(SUFFIXES)}")
                first = written.get(output.resolve())
                if first is not None:
                    raise GrammarcError(f"{where}: output {output} " + (
                        "would be written twice (tell them apart with {stem} or {tokenizer})"
                        if first == number else f"is the output of [[artifact]] {first} too"))
                written[output.resolve()] = number
                spec = names.get(name, name)
                resolved = str(base / spec) if (base / spec).exists() else spec
                targets.append(Target(source, output, name, resolved, settings))
    return targets


def _known_keys(table: Any, known: tuple[str, ...], where: str) -> None:
    if not isinstance(table, dict):
        raise GrammarcError(f"{where}: expected a table")
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise GrammarcError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(known)})")


def _check_settings(settings: dict[str, Any], where: str) -> None:
    for key, value in settings.items():
        if key not in _SETTINGS:
            raise GrammarcError(f"{where}: unknown key {key!r} "
                                f"(known: {', '.join(_SETTINGS)})")
        check, expected = _SETTINGS[key]
        if not check(value):
            raise GrammarcError(f"{where}: {key} must be {expected}, not {value!r}")


def _sources(entry: dict[str, Any], base: Path, where: str) -> list[Path]:
    if ("source" in entry) == ("sources" in entry):
        raise GrammarcError(f"{where}: give either 'source' (a file) or 'sources' (a glob)")
    if "source" in entry:
        if not _is_str(entry["source"]):
            raise GrammarcError(f"{where}: 'source' must be a path")
        return [base / entry["source"]]
    pattern = entry["sources"]
    if not _is_str(pattern) or not pattern or os.path.isabs(pattern):
        raise GrammarcError(f"{where}: 'sources' must be a glob relative to the manifest")
    found = sorted(p for p in base.glob(pattern) if p.is_file())
    if not found:
        raise GrammarcError(f"{where}: no file matches {pattern!r}")
    return found


_PLACEHOLDERS = ("stem", "tokenizer")


def _expand(template: str, source: Path, tokenizer: str, where: str) -> str:
    """`template` with its placeholders, plain `{stem}` and `{tokenizer}` only (no attribute,
    index, format spec or conversion: `str.format` would run them), filled in; `{{` and `}}`
    are braces."""
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise GrammarcError(f"{where}: bad 'output' template {template!r} ({exc}); "
                            "placeholders are plain {stem} and {tokenizer}") from None
    out = []
    for literal, field, spec, conversion in parts:
        out.append(literal)
        if field is None:
            continue
        if field not in _PLACEHOLDERS or spec or conversion:
            whole = "{" + field + (f"!{conversion}" if conversion else "") + \
                (f":{spec}" if spec else "") + "}"
            raise GrammarcError(f"{where}: bad 'output' template {template!r}: {whole} is not a "
                                "placeholder; placeholders are plain {stem} and {tokenizer}")
        if field == "tokenizer" and ("/" in tokenizer or "\\" in tokenizer):
            raise GrammarcError(f"{where}: {{tokenizer}} in 'output' needs a tokenizer name "
                                f"without slashes; name {tokenizer!r} in [tokenizers]")
        out.append(grammar_stem(source) if field == "stem" else tokenizer)
    return "".join(out)


@main.command("build", epilog=EXIT_CODES_HELP,
              short_help="Build the artifacts grammarc.toml lists.")
@click.argument("manifest", default="grammarc.toml",
                type=click.Path(dir_okay=False, path_type=Path))
@click.option("--check", is_flag=True,
              help="Write nothing; exit 1 listing stale, missing or damaged artifacts (for CI).")
@click.option("--force", is_flag=True, help="Rebuild every artifact, fresh or not.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def build_command(manifest: Path, check: bool, force: bool, as_json: bool) -> None:
    """Build the artifacts MANIFEST (default grammarc.toml) lists; skip the fresh ones."""
    if check and force:
        raise click.UsageError("--check and --force exclude each other")
    targets = read_manifest(manifest)
    from ..compiler import compile as compile_grammar  # the compile side: after the cheap checks
    from ..compiler import grammar_metadata, read_source

    loaded: dict[tuple[str, str, tuple[int, ...] | None], Any] = {}
    results = []
    for target in targets:
        eos = target.settings.get("eos")
        key = (target.tokenizer_spec, target.tokenizer, None if eos is None else tuple(eos))
        if key not in loaded:
            loaded[key] = _named_tokenizer(target.tokenizer_spec, target.tokenizer, eos)
        tokenizer = loaded[key]
        options = target.options(lambda message: click.echo(f"notice: {message}", err=True))
        layout = target.settings.get("layout", "factored")
        kind, text, name = read_source(target.source, target.settings.get("kind"))
        wanted = {k: v for k, v in grammar_metadata(kind, text, name, tokenizer,
                                                    options).items() if k not in _OUTCOMES}
        status, reasons = _freshness(target.output, {**wanted, "layout": layout})
        if not check and (force or status != "fresh"):
            started = time.perf_counter()
            grammar = compile_grammar(target.source, tokenizer, kind, options=options)
            target.output.parent.mkdir(parents=True, exist_ok=True)
            grammar.save(target.output, layout=layout)
            status = "built"
            reasons = reasons + [f"{grammar.num_states} states, "
                                 f"{time.perf_counter() - started:.2f} s"]
        results.append({"output": str(target.output), "source": str(target.source),
                        "tokenizer": target.tokenizer, "status": status, "reasons": reasons})
        if not as_json:
            click.echo(f"{_LABELS[status]:<11} {target.output}" +
                       (f": {'; '.join(reasons)}" if reasons else ""))
    ok = not check or all(r["status"] == "fresh" for r in results)
    if as_json:
        echo_json({"ok": ok, "manifest": str(manifest), "artifacts": results})
    else:
        statuses = [r["status"] for r in results]
        summary = ", ".join(f"{statuses.count(status)} {_LABELS[status]}" for status in _LABELS
                            if status in statuses)
        click.echo(f"{summary}; run grammarc build" if not ok else summary)
    if not ok:
        click.get_current_context().exit(1)


def _named_tokenizer(spec: str, name: str, eos: list[int] | None):
    """The tokenizer of `spec`, named as the manifest names it (its name goes into artifacts,
    so it must not depend on where the manifest is)."""
    from ..tokenizers import load_tokenizer

    tokenizer = load_tokenizer(spec, eos_token_ids=eos)
    if tokenizer.name != name:
        tokenizer = copy.copy(tokenizer)
        tokenizer.name = name
    return tokenizer


def _freshness(output: Path, wanted: dict[str, Any]) -> tuple[str, list[str]]:
    """`fresh`, `stale`, `missing` or `invalid`, with what differs."""
    if not output.exists():
        return "missing", []
    try:
        recorded = read_artifact(output).metadata
    except ArtifactError as exc:
        return "invalid", [str(exc).removeprefix(f"{output}: ")]
    differences = flat_differences(recorded, wanted)
    return ("stale" if differences else "fresh",
            [describe_difference(f, r, w, "manifest") for f, r, w in differences])
