"""The base of the compiler's rooms: what every one reads of the document being compiled."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .schema import Compiler


class CompilerPart:
    """A room of one document's compiler, with one job; `compiler` is the whole, for the
    values inside the room's values (recursion) and the boolean operations."""

    def __init__(self, compiler: Compiler) -> None:
        self.compiler = compiler
        self.options = compiler.options
        self.registry = compiler.registry
        self.draft = compiler.draft
        self.calls = compiler.calls
        self.layout = compiler.layout
        self.ops = compiler.ops
        self.machines = compiler.machines
        self.value = compiler.value  # the values inside this room's values
