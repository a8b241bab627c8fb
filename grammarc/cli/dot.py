"""`grammarc dot`: the character-level automaton of a grammar source or an artifact, as DOT."""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np

from ..format.artifact import SUFFIXES, read_artifact
from ..errors import GrammarcError
from . import EXIT_CODES_HELP, main
from .compile_command import frontend_options, make_frontend_options


@main.command("dot", epilog=EXIT_CODES_HELP)
@click.argument("source", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the DOT text here instead of to standard output.")
@frontend_options
@click.option("-q", "--quiet", is_flag=True, help="Print no notices.")
def dot_command(source: Path, output: Path | None, kind: str | None, max_states: int,
                max_depth: int, start: str | None, whitespace: str, strict_objects: bool,
                lenient: bool, integer_fractions: bool, key_order: str,
                quiet: bool) -> None:
    """Print the automaton of SOURCE (a grammar file, or a .safetensors / .npz artifact) in
    Graphviz DOT: edges labelled with character ranges, accepting states as double circles,
    the states of a state-machine spec grouped by name. Render it with `dot -Tsvg`."""
    from ..graphviz import dot_source

    if source.suffix.lower() in SUFFIXES:
        data = read_artifact(source)
        t = data.tensors
        calls = []
        if "call_ptr" in t:
            names = data.metadata["machines"]
            owner = np.repeat(np.arange(len(t["call_ptr"]) - 1), np.diff(t["call_ptr"]))
            calls = [(int(q), int(t["machine_start"][m]), names[m], int(r))
                     for q, m, r in zip(owner, t["call_machine"], t["call_return"])]
        text = dot_source(t["byte_ptr"], t["byte_ranges"], t["byte_next"], t["accepting"],
                          t.get("state_name"), data.metadata.get("state_names", ()), calls)
    else:
        from ..automaton.pushdown import PushdownDFA
        from ..compiler import build_automaton, read_source

        kind, grammar, name = read_source(source, kind)
        options = make_frontend_options(max_states, max_depth, start, whitespace,
                                        strict_objects, lenient, integer_fractions, key_order,
                                        quiet)
        automaton = build_automaton(kind, grammar, name, options)
        if isinstance(automaton, PushdownDFA):
            owner = np.repeat(np.arange(len(automaton.call_ptr) - 1),
                              np.diff(automaton.call_ptr))
            calls = [(int(q), int(automaton.machine_start[m]), automaton.machine_names[m],
                      int(r)) for q, m, r in zip(owner, automaton.call_machine,
                                                 automaton.call_return)]
            text = dot_source(*automaton.dfa.ranges(), automaton.dfa.accepting, calls=calls)
        else:
            text = dot_source(*automaton.ranges(), automaton.accepting, automaton.labels,
                              automaton.label_names)
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise GrammarcError(f"cannot write {output}: {exc.strerror or exc}") from None
