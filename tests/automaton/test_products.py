"""Products keep the DFAs they build: an operand made flat again (a new tree that spells the
same language the same way) is not determinised again, and the products stay right."""

from __future__ import annotations

import grammarc.automaton.products as products
from grammarc.automaton.expr import Call, CharSet, Expr, literal, repeat
from grammarc.automaton.products import Ops

DIGITS = CharSet(((48, 57),))


def fresh_digits(expr: Expr) -> Expr:
    """`flatten` as a front end gives it: each call becomes a tree built anew."""
    return repeat(CharSet(((48, 57),)), 1, 4) if isinstance(expr, Call) else expr


def test_an_operand_made_flat_again_is_determinised_once(monkeypatch):
    built = []
    original = products.build_dfa

    def counted(expr, **kwargs):
        built.append(expr)
        return original(expr, **kwargs)

    monkeypatch.setattr(products, "build_dfa", counted)
    ops = Ops(10_000, flatten=fresh_digits)
    first = ops.intersect(Call("n"), repeat(DIGITS, 2, None))
    second = ops.intersect(Call("n"), literal("12"))   # a new Call: made flat again
    third = ops.difference(Call("n"), literal("7"))
    assert sum(expr == fresh_digits(Call("n")) for expr in built) == 1, built
    dfa = {name: ops.dfa(result) for name, result in
           (("first", first), ("second", second), ("third", third))}
    for text, accepted in [(b"7", (False, False, False)), (b"12", (True, True, True)),
                           (b"3", (False, False, True)), (b"12345", (False, False, False)),
                           (b"999", (True, False, True))]:
        assert (dfa["first"].accepts(text), dfa["second"].accepts(text),
                dfa["third"].accepts(text)) == accepted, text
