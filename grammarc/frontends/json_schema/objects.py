"""Objects: the values of the keys a condition names (`_KeyValues`), the states that track
the condition while keys are read (`_residual_states`), and the keys that tell objects of
`oneOf` branches apart (`_ObjectKeys`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ...automaton import Expr, alt
from .conditions import Formula, KeyCondition, holds
from .node import _TYPES, _types_tested
from .positions import Position
from .resolution import Ref

if TYPE_CHECKING:
    from .schema import Compiler

class _KeyValues:
    """The values of a key that a condition names, split by which of its tests (sub-schemas)
    they satisfy, built only as far as the condition needs: where every set of satisfied tests
    leads to the same state, the values stay whole (no product); a split by one test is one
    product, or none where the first byte decides (a test of types only) or the key's own
    schema accepts any value (then the values that satisfy the test are the test's own)."""

    def __init__(self, compiler: Compiler, language: Expr, anything: bool,
                 tests: list[tuple[Any, str]], sets: list[frozenset[int]],
                 position: Position) -> None:
        self.compiler = compiler
        self.language = language
        self.anything = anything  # `language` is any JSON value
        self.tests = tests
        self.sets = sets  # the sets of tests a value can satisfy together (numbered)
        self.position = position
        self._compiled: dict[int, Expr] = {}
        self._splits: dict[tuple[int, bool], Expr] = {}
        self._groups: dict[frozenset[int], Expr] = {}

    @property
    def num_sets(self) -> int:
        return len(self.sets)

    def by_next_state(self, following: np.ndarray, state: int,
                      weight: int) -> list[tuple[Expr, int]]:
        """(values, next state) for each live next state of `state`, given the states
        `following` it by the digit of this key (weight `weight`)."""
        groups: dict[int, list[int]] = {}
        for m in range(self.num_sets):
            after = int(following[state + (m + 1) * weight])
            if after >= 0:
                groups.setdefault(after, []).append(m)
        return [(self.values(frozenset(sets)), after) for after, sets in groups.items()]

    def values(self, sets: frozenset[int]) -> Expr:
        """The values whose set of satisfied tests is one of the numbered `sets`."""
        found = self._groups.get(sets)
        if found is None:
            if len(sets) == self.num_sets:
                found = self.language
            else:
                single = [(i, i in self.sets[m]) for m in [min(sets)]
                          for i in range(len(self.tests))
                          if sets == {n for n in range(self.num_sets)
                                      if (i in self.sets[n]) == (i in self.sets[m])}]
                found = self._split(*single[0]) if single else \
                    alt(*(self._exactly(self.sets[m]) for m in sorted(sets)))
            self._groups[sets] = found
        return found

    def _exactly(self, satisfied: frozenset[int]) -> Expr:
        """The values that satisfy the tests `satisfied` and no other."""
        out = self.language
        for i in range(len(self.tests)):
            out = self.compiler.ops.intersect(out, self._split(i, i in satisfied))
        return out

    def _split(self, i: int, satisfied: bool) -> Expr:
        """The values that satisfy test i (or do not)."""
        key = (i, satisfied)
        found = self._splits.get(key)
        if found is None:
            compiler, language = self.compiler, self.language
            schema, _ = self.tests[i]
            types = _types_tested(schema)
            by_type = None if types is None else compiler._of_types(
                language, types if satisfied else set(_TYPES) - types)
            if by_type is not None:
                found = by_type
            elif satisfied:
                test = self._test(i)
                found = test if self.anything else compiler.ops.intersect(language, test)
            else:
                found = compiler.difference(language, self._test(i))
            self._splits[key] = found
        return found

    def _test(self, i: int) -> Expr:
        """Test i's values at this key, narrowed to the first bytes of the key's values."""
        found = self._compiled.get(i)
        if found is None:
            compiler = self.compiler
            schema, base = self.tests[i]
            found = compiler.value(Ref(schema, base), self.position)
            first = compiler._starting_bytes(self.language)
            if first is not None:
                label = "".join(chr(b) for b in np.flatnonzero(first))
                narrowed = compiler._starting_with(found, first, label)
                found = found if narrowed is None else narrowed
            self._compiled[i] = found
        return found


def _residual_states(condition: KeyCondition | None, named: list[str],
                     regions: dict[str, _KeyValues]) -> tuple[list[int], list[np.ndarray]]:
    """The states an object's automaton needs for `condition` while its `named` keys are read
    in order. A state numbers what the keys read so far hold, in mixed radix (digit j, of
    weight `weights[j]`: 0 when the j-th named key is absent, m + 1 when its value satisfies
    the set of tests numbered m, `_KeyValues.sets`). `residual[j][state]`, for a state of
    the first j keys, is the smallest state with the same verdict for every way the other keys
    can follow (-1: no way satisfies the condition), so that prefixes with the same future
    share the rest of the automaton."""
    weights = [1]
    for name in named:
        weights.append(weights[-1] * (1 + regions[name].num_sets))
    verdict = np.ones(weights[-1], bool)
    if condition is not None:
        states = np.arange(weights[-1])
        digits = {name: states // weights[j] % (1 + regions[name].num_sets)
                  for j, name in enumerate(named)}

        def leaf(formula: Formula) -> Any:
            if formula[0] == "object":
                return True
            digit = digits[formula[1]]
            if formula[0] == "present":
                return digit != 0
            satisfied = [True] + [formula[2] in tests for tests in regions[formula[1]].sets]
            return np.array(satisfied)[digit]  # an absent key satisfies every test

        verdict[:] = holds(condition.formula, leaf)
    residual = []
    for width in weights:
        table = verdict.reshape(-1, width)  # a row per future, a column per state
        # each state's column of verdicts as one opaque value (numpy's row-wise unique goes
        # through a structured type per column, slow on wide tables)
        columns = np.ascontiguousarray(np.packbits(table.T, axis=1))
        keys = columns.view(np.dtype((np.void, columns.shape[1]))).reshape(-1)
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        canonical = first[inverse.reshape(-1)].astype(np.int64)
        canonical[~table.any(axis=0)] = -1
        residual.append(canonical)
    return weights, residual


class _ObjectKeys(NamedTuple):
    """A schema of objects only, as `exactly_one` tells branches apart: each key it requires
    with its explicit values (None: not limited to a few), and the parts it is made of."""

    required: dict[str, set | None]
    parts: list[Ref]
