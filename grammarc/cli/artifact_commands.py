"""`grammarc verify`, `inspect`, `check` and `sample`: look into an artifact without compiling."""

from __future__ import annotations

import difflib
import hashlib
from pathlib import Path
from typing import Any

import click
import numpy as np

from ..format.artifact import read_artifact
from ..charsets import describe
from ..errors import GrammarcError, line_column
from ..runtime import Grammar, load, tokenizer_mismatches
from ..runtime.loading import grammar_from_artifact
from . import EXIT_CODES_HELP, main
from .common import (artifact_tokenizer, describe_difference, echo_json, flat_differences,
                     parse_ids, read_text_argument, short, shown_text)

_ARTIFACT = click.argument("artifact", type=click.Path(path_type=Path))
_JSON = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
_TOKENIZER_HELP = ("smollm2, deepseek-r1-distill-qwen, a tokenizer.json (or its folder), a .gguf "
                   "file, or a Hugging Face repo id in the local cache")
_MAX_DIFF_LINES = 40


# ----------------------------------------------------------------------------------- verify
@main.command("verify", epilog=EXIT_CODES_HELP,
              short_help="Check an artifact's integrity, tokenizer, source.")
@_ARTIFACT
@click.option("--tokenizer", "tokenizer_spec", metavar="TOKENIZER",
              help=f"Check the artifact was compiled for this vocabulary: {_TOKENIZER_HELP}.")
@click.option("--source", type=click.Path(path_type=Path),
              help="Check the artifact was compiled from this grammar file.")
@_JSON
def verify_command(artifact: Path, tokenizer_spec: str | None, source: Path | None,
                   as_json: bool) -> None:
    """Check ARTIFACT is intact and, when given, built for TOKENIZER and from SOURCE.

    Exit 0 when everything matches; 1 with one line per differing field otherwise.
    """
    grammar = load(artifact)
    checked = ["integrity"]
    differences: list[tuple[str, Any, Any]] = []
    source_diff: list[str] = []
    if tokenizer_spec is not None:
        checked.append("tokenizer")
        differences += [(f"tokenizer.{field}", recorded, actual) for field, recorded, actual
                        in tokenizer_mismatches(grammar, tokenizer_spec)]
    if source is not None:
        from ..compiler import read_source

        checked.append("source")
        kind, text, _name = read_source(source, None)
        wanted = {"kind": kind, "source_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}
        differences += flat_differences(grammar.metadata, wanted)
        if grammar.source != text:
            source_diff = list(difflib.unified_diff(
                grammar.source.splitlines(), text.splitlines(), f"{artifact} (source)",
                str(source), lineterm=""))[:_MAX_DIFF_LINES]
    ok = not differences
    if as_json:
        echo_json({"ok": ok, "artifact": str(artifact), "checked": checked,
                   "differences": [{"field": f, "artifact": r, "given": g}
                                   for f, r, g in differences],
                   "source_diff": source_diff})
    elif ok:
        matched = [f"tokenizer {tokenizer_spec}"] * (tokenizer_spec is not None) + \
            [str(source)] * (source is not None)
        click.echo(f"ok: {artifact} is intact" +
                   (f" and matches {' and '.join(matched)}" if matched else ""))
    else:
        click.echo(f"{artifact} does not match:")
        for field, recorded, given in differences:
            click.echo("  " + describe_difference(field, recorded, given, "given"))
        for line in source_diff:
            click.echo(f"  {line}")
    if not ok:
        click.get_current_context().exit(1)


# ---------------------------------------------------------------------------------- inspect
@main.command("inspect", epilog=EXIT_CODES_HELP,
              short_help="Show what an artifact holds.")
@_ARTIFACT
@_JSON
def inspect_command(artifact: Path, as_json: bool) -> None:
    """Show what ARTIFACT holds: grammar, options, tokenizer and table statistics."""
    data = read_artifact(artifact)
    grammar = grammar_from_artifact(data)
    meta = data.metadata
    counts = grammar.allowed_counts()[1:]
    shortest = grammar.tokens_to_accept(grammar.initial_state)
    source = grammar.source
    info = {
        "artifact": str(artifact),
        "file_size": artifact.stat().st_size,
        "format_version": meta["format_version"],
        "grammarc_version": meta.get("grammarc_version"),
        "layout": meta["layout"],
        "kind": grammar.kind,
        "source": {"name": meta.get("source_name"), "sha256": meta.get("source_sha256"),
                   "characters": len(source), "lines": len(source.splitlines()),
                   "first_line": source.splitlines()[0] if source else ""},
        "options": meta.get("options", {}),
        "tokenizer": meta["tokenizer"],
        "states": grammar.num_states,
        "accepting_states": len(grammar.accepting_states),
        "token_classes": meta.get("num_classes"),
        "rows": meta.get("num_rows"),
        "allowed_tokens_per_state": {"min": int(counts.min()), "median": float(np.median(counts)),
                                     "max": int(counts.max())},
        "shortest_accepted_tokens": shortest if shortest >= 0 else None,
    }
    if "machines" in meta:
        info["machines"] = {"names": meta["machines"], "calls": len(data.tensors["call_machine"]),
                            "stack_tokens": len(data.tensors["stack_token"])}
    if as_json:
        echo_json(info)
        return
    src, tok = info["source"], info["tokenizer"]
    rows = [
        ("artifact", f"{artifact} ({info['file_size']:,} bytes)"),
        ("format", f"version {info['format_version']}, {info['layout']} layout, "
                   f"grammarc {info['grammarc_version']}"),
        ("kind", info["kind"] + (f" ({src['name']})" if src["name"] else "")),
        ("source", f"{_summary(src['first_line'])} ({_plural(src['characters'], 'character')}, "
                   f"{_plural(src['lines'], 'line')}, sha256 {short(src['sha256'])})"),
        ("options", ", ".join(f"{k}={v}" for k, v in info["options"].items())),
        ("tokenizer", f"{tok['name']}: {tok['vocab_size']:,} tokens, EOS "
                      f"{', '.join(map(str, tok['eos_token_ids'])) or 'none'}, "
                      f"fingerprint {short(tok['fingerprint'])}"),
        ("states", f"{info['states']:,} ({info['accepting_states']:,} accepting, "
                   "the dead state 0 included)"),
        ("token classes", "-" if info["token_classes"] is None else
         f"{info['token_classes']:,} ({info['rows']:,} rows)"),
        ("allowed tokens", "per live state: min {min:,}, median {median:,g}, max {max:,}"
         .format(**info["allowed_tokens_per_state"])),
        ("shortest string", "no token sequence is accepted" if shortest < 0 else
         f"{_plural(shortest, 'token')} (+ EOS)"),
    ]
    if "machines" in info:
        machines = info["machines"]
        rows.append(("machines", f"{len(machines['names'])} linked by "
                     f"{_plural(machines['calls'], 'call')} (root, "
                     f"{', '.join(machines['names'][1:])}); "
                     f"{_plural(machines['stack_tokens'], 'stack token')}"))
    for label, value in rows:
        click.echo(f"{label:<16} {value}")


def _summary(line: str) -> str:
    """A source line for one line of a report: cut at 60 characters, quoted if not printable."""
    cut = line if len(line) <= 60 else line[:59] + "…"
    return cut if cut.isprintable() else repr(cut)


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


# ------------------------------------------------------------------------------------ check
@main.command("check", epilog=EXIT_CODES_HELP,
              short_help="Is a text or token sequence in the language?")
@_ARTIFACT
@click.argument("text", required=False)
@click.option("--tokens", "token_ids", metavar="IDS",
              help="Check these comma-separated token ids instead of a text.")
@click.option("--tokenizer", "tokenizer_spec", metavar="TOKENIZER",
              help=f"With --tokens: the tokenizer to show tokens with ({_TOKENIZER_HELP}); "
                   "default: the one named in the artifact.")
@_JSON
def check_command(artifact: Path, text: str | None, token_ids: str | None,
                  tokenizer_spec: str | None, as_json: bool) -> None:
    """Check whether TEXT (or stdin with -) or --tokens is in ARTIFACT's language.

    A text is walked through the byte DFA stored in the artifact (no tokenizer needed). On
    failure, print where it failed and which characters could come there instead; exit 1.
    With -, stdin is taken byte for byte: a trailing newline (as `echo` adds) is part of the
    text (use `printf` or `echo -n` for a text without one).
    """
    if (text is None) == (token_ids is None):
        raise click.UsageError("give either TEXT (- for stdin) or --tokens IDS")
    if tokenizer_spec is not None and token_ids is None:
        raise click.UsageError("--tokenizer only applies with --tokens")
    grammar = load(artifact)
    if text is not None:
        report = _check_text(grammar, read_text_argument(text))
    else:
        ids = parse_ids(token_ids) or []
        bad = [i for i in ids if not 0 <= i < grammar.vocab_size]
        if bad:
            raise GrammarcError(f"token id {bad[0]} is out of range for a vocabulary of "
                                f"{grammar.vocab_size} tokens")
        tokenizer = artifact_tokenizer(grammar, tokenizer_spec, str(artifact))
        report = _check_tokens(grammar, ids, tokenizer)
    if as_json:
        echo_json(report)
    else:
        _echo_check(report)
    if not report["ok"]:
        click.get_current_context().exit(1)


def _check_text(grammar: Grammar, data: bytes) -> dict[str, Any]:
    matched, state = grammar.walk_prefix(data)
    if matched == len(data) and grammar.is_accepting(state):
        return {"ok": True, "mode": "text"}
    report = {"ok": False, "mode": "text",
              "reason": "incomplete" if matched == len(data) else "mismatch"}
    report.update(_expected_after(grammar, data[:matched], state))
    if report["reason"] == "mismatch":
        report["found"] = _first_character(data[report["byte_offset"]:])
    if grammar.kind == "json-schema":
        expected = _canonical_json(grammar, data)
        if expected is not None:
            report["canonical"] = expected
    return report


def _canonical_json(grammar: Grammar, data: bytes) -> str | None:
    """For a JSON value the schema accepts but written another way (key order, whitespace,
    number form): the text the table expects; None otherwise."""
    import json
    from decimal import Decimal

    from ..frontends.json_schema import canonical_dumps

    try:
        instance = json.loads(data, parse_float=Decimal)
        schema = json.loads(grammar.source)
        style = grammar.metadata.get("options", {}).get("whitespace", "default")
        text = canonical_dumps(schema, instance, whitespace="compact" if style == "compact"
                               else "default")
    except (ValueError, RecursionError):
        return None
    return text if grammar.matches(text) else None


def _first_character(data: bytes) -> str | None:
    """The character `data` starts with, or None when it does not start with valid UTF-8."""
    for size in range(1, 5):
        try:
            return data[:size].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return None


def _check_tokens(grammar: Grammar, ids: list[int], tokenizer) -> dict[str, Any]:
    eos = set(grammar.eos_token_ids)
    state = grammar.initial_state
    for index, token in enumerate(ids):
        reason = "after_eos" if index and ids[index - 1] in eos else None
        following = grammar.next_state(state, token)
        if reason or not following:
            report = {"ok": False, "mode": "tokens", "reason": reason or "forbidden_token",
                      "token_index": index, "token_id": token,
                      "token_text": tokenizer.token_text(token)}
            report.update(_expected_after(grammar, tokenizer.decode_bytes(ids[:index])))
            report["allowed_tokens"] = int(np.count_nonzero(grammar.mask(state)))
            if reason:  # nothing follows the end of the sequence
                report.update(expected=[], can_end=False, allowed_tokens=0,
                              expected_text="nothing (generation ends at the end-of-sequence token)")
            return report
        state = following
    if grammar.is_accepting(state):
        return {"ok": True, "mode": "tokens"}
    report = {"ok": False, "mode": "tokens", "reason": "incomplete"}
    report.update(_expected_after(grammar, tokenizer.decode_bytes(ids)))
    return report


def _expected_after(grammar: Grammar, prefix: bytes,
                    state=None) -> dict[str, Any]:
    """Where a walk stopped (the last character boundary of the live `prefix`) and the
    characters the language allows there; `state`: the state after `prefix`, when known."""
    boundary = len(prefix)
    while boundary > max(0, len(prefix) - 3):  # an unfinished UTF-8 character at the end
        try:
            prefix[:boundary].decode("utf-8")
            break
        except UnicodeDecodeError:
            boundary -= 1
    text = prefix[:boundary].decode("utf-8", errors="backslashreplace")
    line, column = line_column(text, len(text))
    if state is None or boundary < len(prefix):
        state = grammar.walk_bytes(prefix[:boundary])
    ranges = grammar.allowed_characters(state)
    can_end = grammar.is_accepting(state)
    described = describe(ranges)  # 'x', a class [...] or [^...], or any
    described = "one of " + described if described.startswith("[") else \
        "any character" if described == "any" else described
    expected = "the end of the text" if can_end and not ranges else \
        described + (", or the end of the text" if can_end else "")
    return {"byte_offset": boundary, "char_offset": len(text), "line": line, "column": column,
            "matched": text, "expected": [[chr(lo), chr(hi)] for lo, hi in ranges],
            "can_end": can_end, "expected_text": expected}


def _echo_check(report: dict[str, Any]) -> None:
    what = "the text" if report["mode"] == "text" else "the token sequence"
    if report["ok"]:
        click.echo(f"ok: {what} is in the language")
        return
    where = (f"line {report['line']}, column {report['column']}" if "\n" in report["matched"]
             else f"character {report['char_offset'] + 1}")
    where += f" (byte {report['byte_offset']})"
    reason = report["reason"]
    if reason == "mismatch":
        found = report["found"]
        click.echo(f"no: unexpected {found!r} at {where}" if found is not None
                   else f"no: a byte that is not UTF-8 at {where}")
    elif reason == "incomplete":
        click.echo(f"no: {what} ended early; more must follow at {where}")
    else:
        token = f"the token at index {report['token_index']} (id {report['token_id']}, " \
                f"{report['token_text']!r})"
        click.echo(f"no: {token} comes after the end-of-sequence token" if reason == "after_eos"
                   else f"no: {token} is not allowed at {where}; "
                        f"{_count(report['allowed_tokens'], 'token')} allowed there")
    matched = report["matched"]
    click.echo(f"  matched: {matched[-60:]!r}" if len(matched) <= 60
               else f"  matched: …{matched[-60:]!r}")
    click.echo(f"  expected: {report['expected_text']}")
    if "canonical" in report:
        click.echo("  the value itself is valid, written differently (key order, whitespace or "
                   f"number form); the table expects: {report['canonical']}")


# ----------------------------------------------------------------------------------- sample
@main.command("sample", epilog=EXIT_CODES_HELP,
              short_help="Print random strings of the language.")
@_ARTIFACT
@click.option("-n", "--count", type=click.IntRange(min=1), default=5, show_default=True,
              help="How many strings.")
@click.option("--seed", type=int, help="Random seed, for the same samples every run.")
@click.option("--max-tokens", type=click.IntRange(min=1), default=64, show_default=True,
              help="Longest sample in tokens, the end-of-sequence token included.")
@click.option("--tokenizer", "tokenizer_spec", metavar="TOKENIZER",
              help=f"Tokenizer to decode with ({_TOKENIZER_HELP}); "
                   "default: the one named in the artifact.")
def sample_command(artifact: Path, count: int, seed: int | None, max_tokens: int,
                   tokenizer_spec: str | None) -> None:
    """Print random strings of ARTIFACT's language, one per line.

    Each is a walk over tokens picked uniformly among those that can still finish within
    --max-tokens; strings that are not printable are shown as Python string literals.
    """
    grammar = load(artifact)
    shortest = grammar.tokens_to_accept(grammar.initial_state)
    if shortest < 0:
        raise GrammarcError(f"{artifact}: no token sequence reaches an accepting state")
    if shortest + 1 > max_tokens:
        raise GrammarcError(f"no string of the language fits in {max_tokens} tokens: the "
                            f"shortest takes {shortest} tokens and the end-of-sequence token; "
                            "raise --max-tokens")
    tokenizer = artifact_tokenizer(grammar, tokenizer_spec, str(artifact))
    rng = np.random.default_rng(seed)
    for _ in range(count):
        click.echo(shown_text(tokenizer.decode_bytes(grammar.sample_tokens(max_tokens, rng))))


def _count(number: int, noun: str) -> str:
    """`1 token is`, `3 tokens are`."""
    return f"1 {noun} is" if number == 1 else f"{number:,} {noun}s are"
