"""Context-free rules to one expression, or to machines linked by calls where they recurse.

Shared by the Lark and GBNF front ends. A rule body is an expression tree (`automaton.expr`)
whose leaves may also be `Ref`s to rules. References are inlined, except for recursion:

- A rule whose only recursion is a reference to itself at the very end of its body
  (`R ::= A | B R`) or at the very start (`R ::= A | R B`) is regular and is replaced by its
  exact solution `B* A` or `A B*` (Arden's lemma). Lark's own `x*` / `x+` rules are of this
  kind, and so are idioms like `ws ::= ([ \\t\\n] ws)?` or `list ::= item | list "," item`.
- Other recursion: in every group of mutually recursive rules a few rules are chosen so that
  every cycle of references passes through one of them (the *cycle heads*). Each head becomes
  a machine (`automaton.expr`), every reference to it a `Call`, and the other rules are
  inlined, so nesting is exact at any depth. The first choice makes the fewest machines.
  When the next byte cannot always decide between calling, returning and going on with it,
  the compiler tries a second choice: each recursive reference between two terminals of its
  sequence becomes, from just after the opening terminal through the closing one, a rule of
  its own (a *span*: `statement* "}"` in `"{" statement* "}"`), and spans are the preferred
  heads. A span is entered after its opening terminal was read in the caller (so `(` read as
  a parenthesis or as an argument list is the same byte there) and returns on its closing
  terminal, where nothing inside can go on. When neither choice can be decided, the calls are
  inlined, recursion unrolled to `options.max_depth` (an under-approximation, with a notice).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from ..automaton.callgraph import is_cyclic, strongly_connected
from ..automaton.expr import (
    EMPTY, NOTHING, Alt, Call, Concat, Expr, MachineSet, Repeat, alt, concat, nullable, repeat,
)
from ..errors import GrammarError
from . import FrontendOptions


@dataclass(frozen=True)
class Ref:
    """A reference to the rule `name` inside a rule body (`offset`: where it is written)."""

    name: str
    offset: int | None = field(default=None, compare=False)


def expand_rules(rules: dict[str, Expr], start: str, options: FrontendOptions,
                 source_name: str | None, what: str = "rules") -> Expr | MachineSet:
    """The language of rule `start`: its expression with every reference inlined, or machines
    linked by calls when rules recurse (see the module docstring): first with the cycle heads
    that make the fewest machines, then, as their alternative, with bracketed spans as heads,
    then the unrolled expression as the last fallback. `rules` maps each rule name to its
    body; every reference must name a rule of `rules`.
    """
    refs = _RefCache()
    rules = {name: _solve_linear_recursion(name, body, refs) for name, body in rules.items()}

    def guarded(build):
        try:
            return build()
        except RecursionError:
            raise GrammarError(f"the {what} nest too deeply to be expanded",
                               source_name=source_name) from None

    fewest = _Heads(rules, start, refs, prefer_brackets=False)
    if not fewest.heads:
        return guarded(fewest.root)

    def unrolled() -> Expr:
        # names starting with "__" are helper rules a front end made up (Lark's `x*` rules)
        shown = [name for name in rules if name in fewest.recursive and not name.startswith("__")]
        options.notice(f"recursive {what} {', '.join(shown)} unrolled to depth "
                       f"{options.max_depth} (--max-depth); strings that nest deeper are left "
                       "out")
        return guarded(lambda: fewest.unrolled(options.max_depth))

    def bracketed() -> MachineSet:
        spans = _Heads(_with_bracketed_spans(rules, refs), start, refs, prefer_brackets=True)
        return MachineSet(guarded(spans.root), guarded(spans.machines), unrolled)

    return MachineSet(guarded(fewest.root), guarded(fewest.machines), unrolled, bracketed)


class _Heads:
    """One choice of cycle heads for a set of rules: every other rule inlined, every
    reference to a head a call (`root`, `machines`), or every head unrolled (`unrolled`)."""

    def __init__(self, rules: dict[str, Expr], start: str, refs: "_RefCache",
                 prefer_brackets: bool) -> None:
        self.rules, self.start, self.refs = rules, start, refs
        succ = {name: sorted(refs(body)) for name, body in rules.items()}
        reachable = _reachable(start, succ)
        graph = {name: [s for s in succ[name] if s in reachable] for name in reachable}
        rank = {name: (name.startswith(_SPAN), _opens_with_terminal(rules[name], refs))
                if prefer_brackets else () for name in graph}
        self.component: dict[str, int] = {}
        self.heads: set[str] = set()
        self.recursive: set[str] = set()
        for index, members in enumerate(strongly_connected(graph)):
            for name in members:
                self.component[name] = index
            if is_cyclic(members, graph):
                self.recursive.update(members)
                self.heads.update(_cycle_heads(members, graph, rank))
        self._inlined: dict[str, Expr] = {}

    def _with_calls(self, expr: Expr) -> Expr:
        if isinstance(expr, Ref):
            if expr.name in self.heads:
                return Call(expr.name)
            if expr.name not in self._inlined:  # no cycle without a head: this ends
                self._inlined[expr.name] = _substitute(self.rules[expr.name], self.refs,
                                                       self._with_calls)
            return self._inlined[expr.name]
        return _substitute(expr, self.refs, self._with_calls)

    def root(self) -> Expr:
        return self._with_calls(Ref(self.start))

    def machines(self) -> tuple[tuple[str, Expr], ...]:
        return tuple((name, self._with_calls(self.rules[name]))
                     for name in self.rules if name in self.heads)

    def unrolled(self, max_depth: int) -> Expr:
        """The start rule with the heads re-entered at most `max_depth` times along any chain
        of expansions (deeper references match nothing)."""
        memo: dict[tuple[str, int], Expr] = {}

        def at_depth(comp: int, depth: int):
            def replace(expr: Expr) -> Expr:
                if not isinstance(expr, Ref):
                    return _substitute(expr, self.refs, replace)
                if self.component[expr.name] != comp:  # entering a group: no recursion yet
                    return expand_rule(expr.name, 0)
                target = depth + (expr.name in self.heads)
                return NOTHING if target > max_depth else expand_rule(expr.name, target)
            return replace

        def expand_rule(name: str, depth: int) -> Expr:
            if (name, depth) not in memo:
                memo[(name, depth)] = _substitute(self.rules[name], self.refs,
                                                  at_depth(self.component[name], depth))
            return memo[(name, depth)]

        return at_depth(-1, 0)(Ref(self.start))


_SPAN = "__span"  # rules made of a bracketed recursive span ("__": not shown in notices)


def _with_bracketed_spans(rules: dict[str, Expr], refs: "_RefCache") -> dict[str, Expr]:
    """`rules` with every recursive reference that sits between two terminals of its
    sequence moved, with what follows it through the closing terminal, into a rule of its
    own (`__span1`, ...: `statement* "}"` out of `"{" statement* "}"`), equal spans shared."""
    succ = {name: sorted(refs(body)) for name, body in rules.items()}
    group_of: dict[str, frozenset[str]] = {}
    for members in strongly_connected(succ):
        if is_cyclic(members, succ):
            for name in members:
                group_of[name] = frozenset(members)
    spans: dict[Expr, str] = {}

    def delimiter(part: Expr) -> bool:
        return not refs(part) and not nullable(part)

    def extract(expr: Expr, group: frozenset[str]) -> Expr:
        if not refs(expr) & group:
            return expr
        if isinstance(expr, Alt):
            return alt(*(extract(o, group) for o in expr.options))
        if isinstance(expr, Repeat):
            return repeat(extract(expr.item, group), expr.min, expr.max)
        if not isinstance(expr, Concat):
            return expr
        parts = [extract(p, group) for p in expr.parts]
        inside = [i for i, part in enumerate(parts) if refs(part) & group]
        if not inside:
            return concat(*parts)
        before = [i for i in range(inside[0]) if delimiter(parts[i])]
        after = [j for j in range(inside[-1] + 1, len(parts)) if delimiter(parts[j])]
        if not before or not after:
            return concat(*parts)
        first, last = before[-1], after[0]
        span = concat(*parts[first + 1:last + 1])
        name = spans.setdefault(span, f"{_SPAN}{len(spans) + 1}")
        return concat(*parts[:first + 1], Ref(name), *parts[last + 1:])

    out = {name: extract(body, group_of[name]) if name in group_of else body
           for name, body in rules.items()}
    out.update((name, body) for body, name in spans.items())
    return out


def _opens_with_terminal(body: Expr, refs: "_RefCache") -> bool:
    """Whether every text of `body` starts with a terminal written in the rule itself
    (`unary ::= "-" factor`), not with a reference."""
    if isinstance(body, Alt):
        return all(_opens_with_terminal(option, refs) for option in body.options)
    if isinstance(body, Concat):
        return bool(body.parts) and _opens_with_terminal(body.parts[0], refs)
    return not refs(body) and not nullable(body)


def _substitute(expr: Expr, refs: "_RefCache", replace) -> Expr:
    """`expr` with each rule reference `r` in it replaced by `replace(r)`."""
    if not refs(expr):
        return expr
    if isinstance(expr, Ref):
        return replace(expr)
    if isinstance(expr, Concat):
        return concat(*(_substitute(p, refs, replace) for p in expr.parts))
    if isinstance(expr, Alt):
        return alt(*(_substitute(o, refs, replace) for o in expr.options))
    if isinstance(expr, Repeat):
        return repeat(_substitute(expr.item, refs, replace), expr.min, expr.max)
    raise TypeError(f"a rule reference inside {type(expr).__name__}")


class _RefCache:
    """The rule names an expression refers to, cached by node identity (bodies are shared)."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[Expr, frozenset[str]]] = {}

    def __call__(self, expr: Expr) -> frozenset[str]:
        hit = self._cache.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        if isinstance(expr, Ref):
            found = frozenset((expr.name,))
        elif isinstance(expr, Concat):
            found = frozenset().union(*(self(p) for p in expr.parts))
        elif isinstance(expr, Alt):
            found = frozenset().union(*(self(o) for o in expr.options))
        elif isinstance(expr, Repeat):
            found = self(expr.item)
        else:
            found = frozenset()
        self._cache[id(expr)] = (expr, found)
        return found


def _solve_linear_recursion(name: str, body: Expr, refs: _RefCache) -> Expr:
    """`B* A` for `name ::= A | B name`, `A B*` for `name ::= A | name B`; else `body`."""
    if name not in refs(body):
        return body
    for at_end in (True, False):
        split = _split(body, name, at_end, refs)
        if split is not None:
            base, factor = split
            loop = repeat(factor, 0, None)
            return concat(loop, base) if at_end else concat(base, loop)
    return body


def _split(expr: Expr, name: str, at_end: bool, refs: _RefCache) -> tuple[Expr, Expr] | None:
    """(A, B) with expr = A | B·name (`at_end`) or A | name·B, or None when `name` occurs
    anywhere else."""
    if name not in refs(expr):
        return expr, NOTHING
    if isinstance(expr, Ref):
        return NOTHING, EMPTY
    if isinstance(expr, Repeat) and (expr.min, expr.max) == (0, 1):
        expr = Alt((expr.item, EMPTY))
    if isinstance(expr, Alt):
        parts = [_split(o, name, at_end, refs) for o in expr.options]
        if any(p is None for p in parts):
            return None
        return alt(*(p[0] for p in parts)), alt(*(p[1] for p in parts))
    if isinstance(expr, Concat):
        if at_end:
            edge, rest = expr.parts[-1], expr.parts[:-1]
        else:
            edge, rest = expr.parts[0], expr.parts[1:]
        inner = _split(edge, name, at_end, refs)
        if inner is None or any(name in refs(p) for p in rest):
            return None
        if at_end:
            return concat(*rest, inner[0]), concat(*rest, inner[1])
        return concat(inner[0], *rest), concat(inner[1], *rest)
    return None


def _reachable(start: str, succ: dict[str, list[str]]) -> set[str]:
    seen = {start}
    stack = [start]
    while stack:
        for nxt in succ[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def _cycle_heads(members: Iterable[str], graph: dict[str, list[str]],
                 rank: dict[str, tuple]) -> list[str]:
    """Rules that every cycle inside `members` passes through, chosen greedily until no cycle
    is left: the highest `rank` first (e.g. spans, then rules that open with a terminal:
    their calls are decided by that terminal), then the rule with the most references in
    and out of its group."""
    remaining = set(members)
    heads: list[str] = []
    while True:
        sub = {n: [s for s in graph[n] if s in remaining] for n in remaining}
        cyclic = [c for c in strongly_connected(sub) if is_cyclic(c, sub)]
        if not cyclic:
            return heads
        for group in cyclic:
            inside = set(group)
            indegree = {n: 0 for n in group}
            for n in group:
                for s in sub[n]:
                    if s in inside:
                        indegree[s] += 1
            best = max(sorted(group), key=lambda n: (rank[n], indegree[n] * sum(
                s in inside for s in sub[n])))
            heads.append(best)
            remaining.discard(best)
