"""Products keep the DFAs they build: an operand made flat again (a new tree that spells the
same language the same way) is not determinised again, and the products stay right; a large
operand is read before minimisation, with the same results."""

from __future__ import annotations

import random

import grammarc.automaton.products as products
from grammarc.automaton.expr import Call, CharSet, Expr, alt, concat, literal, repeat
from grammarc.automaton.products import Ops

DIGITS = CharSet(((48, 57),))


def fresh_digits(expr: Expr) -> Expr:
    """`flatten` as a front end gives it: each call becomes a tree built anew."""
    return repeat(CharSet(((48, 57),)), 1, 4) if isinstance(expr, Call) else expr


def test_an_operand_made_flat_again_is_determinised_once(monkeypatch):
    built = []
    original = products.subset_dfa

    def counted(expr, **kwargs):
        built.append(expr)
        return original(expr, **kwargs)

    monkeypatch.setattr(products, "subset_dfa", counted)
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


def _random_language(rng: random.Random, depth: int = 3) -> Expr:
    """A small regular language over a, b, c whose subset DFA is often not minimal
    (alternatives that spell one text two ways)."""
    if depth == 0 or rng.random() < 0.25:
        return literal(rng.choice(["a", "b", "ab", "ba", "c", "abc"]))
    parts = [_random_language(rng, depth - 1) for _ in range(rng.randint(2, 3))]
    kind = rng.random()
    if kind < 0.4:
        return alt(*parts)
    if kind < 0.8:
        return concat(*parts)
    low = rng.randint(0, 2)
    return repeat(parts[0], low, rng.choice([None, low + rng.randint(0, 3)]))


def _same_dfa(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return a.trans.shape == b.trans.shape and (a.trans == b.trans).all() and \
        (a.byte_class == b.byte_class).all() and (a.accepting == b.accepting).all()


def test_products_of_operands_read_before_minimisation_are_the_same(monkeypatch):
    rng = random.Random(63)
    pairs = [(_random_language(rng), _random_language(rng)) for _ in range(60)]

    def products_of(minimised_up_to: int) -> tuple[list, int]:
        monkeypatch.setattr(products, "_MINIMISED_UP_TO", minimised_up_to)
        ops, out, raw = Ops(10_000), [], 0
        for a, b in pairs:
            built = ops._built(a)
            raw += built.operand is not None and built.operand is not built.dfa
            out += [ops.dfa(ops.intersect(a, b)), ops.dfa(ops.difference(a, b)),
                    ops.dfa(ops.difference(b, a))]
        return out, raw

    minimal, _ = products_of(10**9)
    read_raw, raw = products_of(0)
    assert raw >= 40  # most operands were read before minimisation
    unminimised = sum(ops_dfa.num_states < products.subset_dfa(a).num_states for a, _ in pairs
                      if (ops_dfa := Ops(10_000).dfa(a)) is not None)
    assert unminimised >= 10  # and their subset DFAs were larger than the minimal ones
    assert all(_same_dfa(x, y) for x, y in zip(minimal, read_raw))
    texts = ["".join(rng.choice("abc") for _ in range(rng.randint(0, 8))) for _ in range(300)]
    for (a, b), i in zip(pairs, range(0, len(minimal), 3)):
        dfa_a, dfa_b = Ops(10_000).dfa(a), Ops(10_000).dfa(b)
        for text in texts:
            in_a = dfa_a is not None and dfa_a.accepts(text.encode())
            in_b = dfa_b is not None and dfa_b.accepts(text.encode())
            got = [d is not None and d.accepts(text.encode()) for d in read_raw[i:i + 3]]
            assert got == [in_a and in_b, in_a and not in_b, in_b and not in_a], (text, a, b)
