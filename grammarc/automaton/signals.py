"""Signals between the stages of linking machines by calls: exceptions by which a stage says
that machines linked by calls failed, so that another way is taken (`linking.fallback_language`
decides which). They never reach a user, so they are not `GrammarcError`s: one that escaped
would be a bug."""

from __future__ import annotations


class NotDeterministicError(Exception):
    """The machines' calls and returns cannot be decided by the next byte alone. `machines`
    names the machines whose inlining removes every conflict found (empty: none does)."""

    def __init__(self, message: str, machines: frozenset[str] = frozenset()) -> None:
        super().__init__(message)
        self.machines = machines


class UnresolvedCallError(Exception):
    """A `Call` reached a construction that needs one flat automaton (a product)."""
