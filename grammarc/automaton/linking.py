"""The linking strategy: a front end's language to machines linked by calls where the next
byte decides them, and the fallback policy where it does not (`fallback_language`).

`deterministic_pushdown` calls the copies of a machine (equal DFAs) as one, inlines the
machines at fault that do not recurse and links again; when a recursive one is at fault,
`language_automaton` takes what `fallback_language` gives instead: the front end's alternative
machines, if it offers some, then one flat automaton.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import _core
from ..errors import EmptyLanguageError, GrammarError, TooManyStatesError
from .bytedfa import ByteDFA
from .callgraph import (
    call_codes, called_names, code_paths, is_cyclic, reachable_machines, recursive_machines,
    replace_calls, strongly_connected, without_codes,
)
from .counters import is_counted, most_counted
from .dfa import build_dfa
from .expr import NOTHING, Automaton, Call, Expr, MachineSet, fingerprint, same_spelling
from .pushdown import PushdownDFA, build_pushdown, built_dfa
from .signals import NotDeterministicError, UnresolvedCallError


#: The most repetitions of a counted machine in doubt with text that are spelled out in
#: states (inlined) before the front end's alternative machines are tried: a longer count
#: spelled out takes more states than most whole schemas.
SPELLED_COUNTS = 1024


def language_automaton(language: Expr | MachineSet, max_states: int, max_depth: int,
                       notice: Callable[[str], None],
                       past_limit: bool = True) -> ByteDFA | PushdownDFA:
    """The automaton of a front end's result: machines linked by calls when the next byte
    always decides between calling, returning and going on; otherwise what
    `fallback_language` gives instead, in turn (with a notice where the calls are inlined,
    recursion unrolled `max_depth` levels); a flat language's minimal DFA. Without
    `past_limit`, a caller that has its own way past `max_states` (the schema's key order)
    does not have the front end's alternative machines tried there (`deterministic_pushdown`)."""
    # the machine sets that failed, with how: a fallback may lead back to one (the value
    # machines' own fallback is the set they retried), whose linking is not done twice
    failed: list[tuple[MachineSet, NotDeterministicError]] = []
    while isinstance(language, MachineSet):
        failure = next((known for seen, known in failed if seen.root is language.root and
                        seen.machines is language.machines), None)
        if failure is None:
            try:
                return deterministic_pushdown(language, max_states, past_limit=past_limit)
            except NotDeterministicError as exc:  # kept as a copy, with no traceback
                failure = NotDeterministicError(str(exc), exc.machines, exc.with_text)
                failed.append((language, failure))
        linked, reason = language, str(failure)

        def inlined() -> Expr:
            notice(f"calls inlined ({reason}); recursion unrolled to depth {max_depth} "
                   "(--max-depth)")
            return inline_calls(linked, max_depth, max_states)

        language = fallback_language(failure, inlined, linked)
    return build_dfa(language, max_states=max_states)


def fallback_language(failure: NotDeterministicError | UnresolvedCallError,
                      flat: Callable[[], Expr | MachineSet],
                      linked: MachineSet | None = None) -> Expr | MachineSet:
    """The fallback policy, in one place: the language to take instead of machines linked by
    calls that failed.

    - A boolean operation needed a call flat while its machine was still being built
      (`UnresolvedCallError`, raised while a front end builds its language): `flat()`, the
      language built again without calls.
    - The next byte cannot decide the calls of the machine set `linked`
      (`NotDeterministicError`, from `deterministic_pushdown`): the front end's alternative
      machines if it offers some, else its own flat under-approximation (`unrolled`), else
      `flat()`: the calls inlined, recursion unrolled (`inline_calls`).
    """
    if isinstance(failure, NotDeterministicError):
        if linked.alternative is not None:
            return linked.alternative()
        if linked.unrolled is not None:
            return linked.unrolled()
    return flat()


def deterministic_pushdown(machines: MachineSet, max_states: int,
                           alternatives: bool = True, past_limit: bool = True) -> PushdownDFA:
    """`build_pushdown`, after inlining the machines whose calls the next byte cannot decide,
    as long as they do not recurse (inlining them is then exact); when a recursive one is at
    fault, or one that counts in doubt only with other calls (inlined, its count would be
    spelled out in states), with unions of the machines in doubt (`unions`), inlining in
    turn the machines that do not recurse and stay in doubt inside a union; or
    `NotDeterministicError`. Where inlining a machine that counts (in doubt with its
    caller's own text) would spell out more than `SPELLED_COUNTS` repetitions, or (with
    `past_limit`) ends past `max_states`, the front end's alternative machines are linked
    instead if it offers some (with `alternatives`: every value a machine of its own, whose
    unions keep the count). Machines that can never return are dropped, their calls dead,
    before the result is returned (`_unproductive_machines`)."""
    built: dict[tuple, tuple] = {}
    codes = call_codes(["", *(name for name, _ in machines.machines)])
    unite = False
    inlined: list[str] = []
    instead: Callable[[], MachineSet] | None = None  # the alternative to counts spelled out
    while True:
        try:
            machines = _without_copies(machines, max_states, built, codes)
            pd = build_pushdown(machines, max_states, built, codes, unions=unite)
            unproductive = _unproductive_machines(pd) & {name for name, _ in machines.machines}
            if not unproductive:
                return pd
            machines = _without_machines(machines, unproductive)
        except NotDeterministicError as exc:
            bodies = dict(machines.machines)
            counted = [name for name in exc.machines if name in bodies and
                       is_counted(bodies[name])]
            if not exc.machines or not exc.machines <= bodies.keys() or \
                    exc.machines & recursive_machines(bodies) or \
                    (not unite and any(name not in exc.with_text for name in counted)):
                if unite:
                    raise
                unite = True  # from now on, and again after inlining what unions leave
                continue
            if counted and alternatives:
                instead = instead or machines.alternative
                if instead is not None and \
                        max(most_counted(bodies[name]) for name in counted) > SPELLED_COUNTS:
                    alternatives = False  # tried once
                    try:
                        return deterministic_pushdown(instead(), max_states, False)
                    except (NotDeterministicError, GrammarError):
                        instead = None
            machines = _inlined(machines, exc.machines, built, codes)
            inlined += sorted(exc.machines)
        except TooManyStatesError as exc:
            if not inlined or exc.line is not None:
                raise
            if instead is not None and past_limit:
                try:
                    return deterministic_pushdown(instead(), max_states, False)
                except (NotDeterministicError, GrammarError):
                    pass
            raise TooManyStatesError(
                f"{exc.message} once the machines {', '.join(map(repr, inlined))} are inlined "
                "(the next byte does not tell their calls apart)") from None


def _without_copies(machines: MachineSet, max_states: int, built: dict[tuple, tuple],
                    codes: dict[str, bytes]) -> MachineSet:
    """The machine set with each group of machines whose DFAs are equal (so their languages,
    calls included) called as one, the first of the group; again until no two are equal (the
    callers of merged machines may become equal in turn). A machine that recurses and one
    that does not are never merged: the latter stays free to be inlined. A machine whose DFA
    is the root's lends the root its body, so that the two, rewritten alike by later
    inlining, are built once (`build_pushdown` links that machine as the root).

    A machine that matches no text (its body is empty once built: the `oneOf` of two equal
    schemas, or only calls of such machines) is dropped and its calls become NOTHING, so the
    branches that call it are dead and the rest of the grammar is kept."""
    while True:
        first_of: dict[tuple, str] = {}
        alias: dict[str, str] = {}
        keys: dict[str, tuple] = {}
        empty: set[str] = set()
        recursive = recursive_machines(dict(machines.machines))
        for name, body in machines.machines:
            try:
                keys[name] = built_dfa(body, True, max_states, built, codes)[3]
            except EmptyLanguageError:
                empty.add(name)
                continue
            alias[name] = first_of.setdefault((name in recursive, *keys[name]), name)
        if empty:
            machines = _without_machines(machines, empty)
            continue
        if all(name == kept for name, kept in alias.items()):
            root_key = built_dfa(machines.root, False, max_states, built, codes)[3]
            copy = next((body for name, body in machines.machines if keys[name] == root_key),
                        machines.root)
            return machines if copy is machines.root else MachineSet(
                copy, machines.machines, machines.unrolled, machines.alternative)

        def renamed(name: str) -> Expr:
            return Call(alias.get(name, name))

        merged = [name for name, kept in alias.items() if name != kept]
        machines = MachineSet(
            replace_calls(machines.root, renamed, merged),
            tuple((name, replace_calls(body, renamed, merged)) for name, body in machines.machines
                  if alias[name] == name), machines.unrolled, machines.alternative)


def _unproductive_machines(pd: PushdownDFA) -> set[str]:
    """The machines of `pd` that can never return: no path from their start reaches one of
    their final states through their own text and calls of machines that can (the
    productive symbols of a context-free grammar, the least fixpoint). A call of one can
    never be completed, so no token may enter it: such a machine is the `$ref` of an object
    that requires itself, `{"required": ["n"], "properties": {"n": {"$ref": "#"}}}`.

    Machines are decided callees first, a strongly connected group of them at a time. One
    in no cycle that calls only machines that can return can (its minimal DFA has a path to
    a final state, and each call on it returns): no walk. The others are walked
    (`_returning`). Counts are not read, and a union's site returns by any exit class, so a
    machine is found unproductive only where it is. Where the root (machine 0) is one, the
    language is empty."""
    num_machines = len(pd.machine_names)
    callers = np.repeat(np.arange(pd.num_states), np.diff(pd.call_ptr))
    # each call's return states: its return state, or the returns of its site by exit class
    ret = pd.call_return.astype(np.int64)
    site_size = np.diff(pd.site_ptr)[ret]
    fan = np.maximum(site_size, 1)
    edge = np.repeat(np.arange(len(ret)), fan)
    nth = np.arange(len(edge)) - np.repeat(np.cumsum(fan) - fan, fan)
    target = ret[edge]
    at_site = site_size[edge] > 0
    target[at_site] = pd.site_next[pd.site_ptr[target[at_site]] + nth[at_site]]
    calls = _Calls(callers[edge], pd.state_machine[callers[edge]], pd.call_machine[edge],
                   target)
    callees: dict[int, set[int]] = {machine: set() for machine in range(num_machines)}
    for caller, callee in set(zip(calls.caller.tolist(), calls.callee.tolist())):
        callees[caller].add(callee)
    productive = np.zeros(num_machines, bool)
    for group in strongly_connected(callees):  # callees first
        group.sort()
        if not is_cyclic(group, callees) and all(productive[c] for c in callees[group[0]]):
            productive[group[0]] = True
            continue
        while True:  # from none of the group, until no more of it is found productive
            found = _returning(pd, calls, group, productive)
            if (found == productive[group]).all():
                break
            productive[group] = found
            if found.all():
                break
    if not productive[0]:
        raise EmptyLanguageError("the grammar matches no string at all (its language is "
                                 "empty: every text calls a machine that never returns)")
    return {name for name, ok in zip(pd.machine_names, productive.tolist()) if not ok}


@dataclass(frozen=True)
class _Calls:
    """The call edges of a pushdown automaton, one per return state they may lead to."""

    source: np.ndarray  # the calling state
    caller: np.ndarray  # its machine
    callee: np.ndarray  # the machine called
    target: np.ndarray  # a state the call may return to


def _returning(pd: PushdownDFA, calls: _Calls, group: list[int],
               productive: np.ndarray) -> np.ndarray:
    """For each machine of `group`, whether its start reaches a final state through its text
    and the calls of `productive` machines (one walk over the group's states)."""
    in_group = pd.state_machine == group[0] if len(group) == 1 else \
        np.isin(pd.state_machine, group)
    states = np.flatnonzero(in_group)
    # the group's states numbered from 1; every state outside it is the dead state 0
    local = np.zeros(pd.num_states, np.int32)
    local[states] = np.arange(1, len(states) + 1, dtype=np.int32)
    text = local[pd.dfa.trans[states]]
    mine = np.flatnonzero(in_group[calls.source])
    returns = np.where(productive[calls.callee[mine]], local[calls.target[mine]], 0)
    owner = np.concatenate([np.repeat(np.arange(1, len(states) + 1), text.shape[1]),
                            local[calls.source[mine]]])
    order = np.argsort(owner, kind="stable")
    ptr = np.zeros(len(states) + 2, np.int64)
    np.cumsum(np.bincount(owner, minlength=len(states) + 1), out=ptr[1:])
    distances = _core.min_tokens_to_accept(
        ptr, np.concatenate([text.reshape(-1), returns]).astype(np.int32)[order],
        np.concatenate([[False], pd.dfa.accepting[states]]))
    return distances[local[pd.machine_start[group]]] >= 0


def _without_machines(machines: MachineSet, names: set[str]) -> MachineSet:
    """The machine set without the machines `names`, each of their calls NOTHING."""
    def dead(name: str) -> Expr:
        return NOTHING

    return MachineSet(replace_calls(machines.root, dead, names),
                      tuple((name, replace_calls(body, dead, names))
                            for name, body in machines.machines if name not in names),
                      machines.unrolled, machines.alternative)


def _inlined(machines: MachineSet, names: frozenset[str], built: dict[tuple, tuple],
             codes: dict[str, bytes]) -> MachineSet:
    """The machine set with the (non-recursive) machines `names` inlined where called, and
    without the machines no longer called. A body whose DFA is in `built` (the inlined ones,
    and their callers) becomes that DFA with its calls as edges (`_respelled`), so that the
    next build determinises minimal DFAs, not the bodies' expressions again."""
    bodies = dict(machines.machines)
    flat: dict[str, Expr] = {}

    def body_of(name: str) -> Expr:
        if name not in names:
            return Call(name)
        if name not in flat:
            flat[name] = rewritten(bodies[name])
        return flat[name]

    def rewritten(body: Expr) -> Expr:
        respelled = _respelled(body, body_of, built, codes)
        return replace_calls(body, body_of, names) if respelled is None else respelled

    try:
        kept = {name: body if names.isdisjoint(called_names(body)) else rewritten(body)
                for name, body in bodies.items() if name not in names}
        root = machines.root if names.isdisjoint(called_names(machines.root)) else \
            rewritten(machines.root)
    finally:
        del body_of, rewritten  # a recursive closure is a cycle: free it now
    reached = reachable_machines(called_names(root), kept)
    return MachineSet(root, tuple((name, body) for name, body in kept.items()
                                  if name in reached), machines.unrolled,
                      machines.alternative)


def _respelled(body: Expr, replacement: Callable[[str], Expr], built: dict[tuple, tuple],
               codes: dict[str, bytes]) -> Automaton | None:
    """The language of `body` with every `Call(name)` replaced by `replacement(name)`, as
    the body's DFA (in `built`) whose call codes are edges reading the replacements: the
    substitution of a DFA's code symbols, so the same language as the body's expression so
    replaced. None where the DFA was not built or the body keeps a counter (its shape
    matters)."""
    hit = built.get((fingerprint(body), False))
    if hit is None or is_counted(body) or not same_spelling(hit[0], body):
        return None
    dfa = hit[1]
    name_of = {code: name for name, code in codes.items()}
    return Automaton(without_codes(dfa), None, tuple(
        (state, replacement(name_of[code]), ret)
        for state, code, ret in code_paths(dfa.trans, dfa.byte_class, len(codes[""]) - 1)))


def inline_calls(machines: MachineSet, depth: int, max_states: int) -> Expr:
    """The root with every call replaced by its machine, nested calls `depth` levels deep at
    most (deeper ones match nothing): the flat under-approximation of recursive machines.
    Each machine level becomes a minimal DFA, so every use embeds it once."""
    bodies = dict(machines.machines)
    levels: dict[tuple[str, int], Expr] = {}

    def machine(name: str, level: int) -> Expr:
        if level <= 0:
            return NOTHING
        if (name, level) not in levels:
            body = replace_calls(bodies[name], lambda callee: machine(callee, level - 1))
            levels[(name, level)] = flat_language(body, max_states)
        return levels[(name, level)]

    try:
        return replace_calls(machines.root, lambda callee: machine(callee, depth))
    finally:
        del machine  # a recursive closure is a cycle: free it now


def flat_language(expr: Expr, max_states: int) -> Expr:
    """`expr` (with no call) as one minimal DFA leaf, or NOTHING for the empty language."""
    try:
        return Automaton(build_dfa(expr, max_states=max_states))
    except GrammarError as exc:
        if "matches no string" not in str(exc):
            raise
        return NOTHING
