"""The base of the compiler's rooms, and what every one reads of the document being compiled
(`Document`: `schema.Compiler` is one, so no room imports the compiler)."""

from __future__ import annotations

from typing import Any, Callable, Protocol

import numpy as np

from ...automaton import Expr, Ops
from ...automaton.expr import Call
from .layout import Layout
from .positions import Position, Schemas
from .resolution import Ref


class MachineRegistry(Protocol):
    """What a room asks of the document's machines (`linker.Machines`)."""

    def machine(self, name: str, build: Callable[[], Expr]) -> Call:
        """A call of the machine `name`, its body built by `build()` the first time."""

    def starting_bytes(self, expr: Expr) -> np.ndarray | None:
        """A superset of the bytes the texts of `expr` start with (None: any)."""


class Document(Schemas, Protocol):
    """The whole of one document's compiler as its rooms see it: the values inside a room's
    values (recursion) and the boolean operations."""

    calls: bool
    value_machines: bool
    layout: Layout
    ops: Ops
    machines: MachineRegistry

    def value(self, ref: Ref, position: Position) -> Expr:
        """The JSON texts of the values `ref` accepts at `position`."""

    def intersect_all(self, parts: list[Expr]) -> Expr:
        """The texts of every part."""

    def difference(self, a: Expr, b: Expr) -> Expr:
        """The values of `a` that are not values of `b`, exact on numbers."""

    def refuse_approximated_format(self, keyword: str, ref: Ref) -> None:
        """Raise if `ref`, which `keyword` subtracts, holds a format checked on a subset."""

    def canonical(self, expr: Expr) -> Expr:
        """The texts of `expr` whose numbers are spelled canonically."""

    def of_types(self, expr: Expr, types: set[str]) -> Expr | None:
        """The values of `expr` of one of `types` (None where the first byte cannot tell)."""

    def starting_with(self, expr: Expr, allowed: np.ndarray, label: str) -> Expr | None:
        """The texts of `expr` that start with an `allowed` byte, without a product."""

    def in_progress(self, node: Any) -> bool:
        """Whether the values of `node`, a `$ref` target, are being compiled."""


class CompilerPart:
    """A room of one document's compiler, with one job; `compiler` is the whole, for the
    values inside the room's values (recursion) and the boolean operations."""

    def __init__(self, compiler: Document) -> None:
        self.compiler = compiler
        self.options = compiler.options
        self.registry = compiler.registry
        self.draft = compiler.draft
        self.calls = compiler.calls
        self.layout = compiler.layout
        self.ops = compiler.ops
        self.machines = compiler.machines
        self.value = compiler.value  # the values inside this room's values
