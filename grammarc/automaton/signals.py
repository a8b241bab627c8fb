"""Signals between the stages of linking machines by calls: exceptions by which a stage says
that machines linked by calls failed, so that another way is taken (`linking.fallback_language`
decides which). They never reach a user, so they are not `GrammarcError`s: one that escaped
would be a bug."""

from __future__ import annotations


class NotDeterministicError(Exception):
    """The machines' calls and returns cannot be decided by the next byte alone. `machines`
    names the machines whose inlining removes every conflict found (empty: none does);
    `with_text` those of them in doubt with text that is not a call (their caller's own
    bytes, or what follows their return), which no union of calls decides."""

    def __init__(self, message: str, machines: frozenset[str] = frozenset(),
                 with_text: frozenset[str] = frozenset()) -> None:
        super().__init__(message)
        self.machines = machines
        self.with_text = with_text


class UnresolvedCallError(Exception):
    """A `Call` reached a construction that needs one flat automaton (a product)."""
