"""The runtime API on numpy and torch, and the rule that it imports no compile-side package."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import grammarc

torch = pytest.importorskip("torch")

PATTERN = r"\d{4}-\d{2}-\d{2}|[^eE]{1,6}"


@pytest.fixture(scope="module")
def grammar(smollm2) -> grammarc.Grammar:
    return grammarc.compile(PATTERN, smollm2, kind="regex")


@pytest.fixture(scope="module")
def dense(grammar) -> np.ndarray:
    return grammar.to_dense()


def test_single_state_api(grammar, dense, smollm2):
    assert grammar.initial_state == 1
    ids = grammar.allowed(1)
    assert np.array_equal(ids, np.flatnonzero(dense[1]))
    assert np.array_equal(grammar.mask(1), dense[1] != 0)
    assert not grammar.mask(1).flags.writeable
    two = smollm2.token_bytes.index(b"2")
    state = grammar.next_state(1, two)
    assert state == dense[1, two] != 0
    assert grammar.next_state(1, smollm2.token_bytes.index(b"e")) == 0
    assert grammar.next_state(0, two) == 0 and not grammar.mask(0).any()
    assert grammar.next_state(1, 10**6) == 0
    assert grammar.is_accepting(state)  # "2" is a string without e
    with pytest.raises(ValueError, match="out of range"):
        grammar.mask(grammar.num_states)


def _expected(logits: np.ndarray, rows: np.ndarray, dense: np.ndarray) -> np.ndarray:
    allowed = dense[rows] != 0
    out = np.full(logits.shape, -np.inf, dtype=np.float64)
    width = allowed.shape[-1]
    out[..., :width] = np.where(allowed, logits[..., :width], -np.inf)
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("inplace", [False, True])
def test_numpy_apply(grammar, dense, dtype, inplace):
    rng = np.random.default_rng(0)
    states = np.array([1, 0, grammar.num_states - 1, 1, 5])
    logits = rng.standard_normal((len(states), grammar.vocab_size + 3)).astype(dtype)
    before = logits.copy()
    out = grammar.apply(logits, states, inplace=inplace)
    assert (out is logits) == inplace
    if not inplace:
        assert np.array_equal(logits, before)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.astype(np.float64),
                                  _expected(before.astype(np.float64), states, dense))
    one = grammar.apply(before[0], 1)
    np.testing.assert_array_equal(one, out[0])


def test_numpy_advance_matches_next_state(grammar, dense):
    rng = np.random.default_rng(1)
    states = rng.integers(0, grammar.num_states, 500)
    tokens = rng.integers(0, grammar.vocab_size, 500)
    tokens[:50] = grammar.allowed(1)[:50]
    states[:50] = 1
    assert np.array_equal(grammar.advance(states, tokens), dense[states, tokens])
    assert grammar.advance(np.array([1]), np.array([-1]))[0] == 0


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("padding", [0, 5])
def test_torch_apply(grammar, dense, dtype, inplace, padding):
    states = torch.tensor([1, 0, grammar.num_states - 1, 3])
    logits = torch.randn(len(states), grammar.vocab_size + padding, dtype=getattr(torch, dtype))
    before = logits.clone()
    out = grammar.apply(logits, states, inplace=inplace)
    assert (out is logits) == inplace
    assert out.dtype == logits.dtype and out.device == logits.device
    expected = _expected(before.float().numpy().astype(np.float64), states.numpy(), dense)
    np.testing.assert_array_equal(out.float().numpy().astype(np.float64), expected)
    one = grammar.apply(before[0].clone(), 1)
    assert torch.equal(one, out[0])


def test_torch_advance_stays_on_device(grammar, dense):
    states = torch.randint(0, grammar.num_states, (300,))
    tokens = torch.randint(0, grammar.vocab_size, (300,))
    states[:40] = 1
    tokens[:40] = torch.as_tensor(grammar.allowed(1)[:40])
    out = grammar.advance(states, tokens)
    assert isinstance(out, torch.Tensor) and out.device == states.device
    assert np.array_equal(out.numpy(), dense[states.numpy(), tokens.numpy()])


def test_torch_packed_mask_table(grammar, dense, monkeypatch):
    from grammarc.runtime import _torch

    monkeypatch.setattr(_torch, "_BOOL_TABLE_LIMIT", 0)
    tables = _torch.TorchTables(grammar.table, grammar.eos_token_ids, torch.device("cpu"))
    assert tables.packed
    rows = torch.as_tensor(grammar.table.state_row[[0, 1, 2, grammar.num_states - 1]])
    allowed = tables.allowed_rows(rows).numpy()
    assert np.array_equal(allowed, dense[[0, 1, 2, grammar.num_states - 1]] != 0)


def test_mask_cache_keeps_more_masks_packed_than_it_keeps_unpacked():
    """A walk that cycles through more masks than the boolean level holds builds each mask
    once while the packed level holds them all; a mask is packed when the boolean level lets
    it go, and built again only when the packed level has dropped it too."""
    from grammarc.runtime.masks import MaskCache

    vocab = 37  # not a multiple of 8: the packed masks end inside a byte
    rng = np.random.default_rng(1)
    truth = {key: rng.random(vocab) < 0.5 for key in range(4)}
    built: list[int] = []

    def get(cache, key):
        def build():
            built.append(key)
            return truth[key].copy()
        mask = cache.get(key, build)
        assert mask.dtype == np.bool_ and np.array_equal(mask, truth[key])
        assert not mask.flags.writeable

    cache = MaskCache(vocab, recent_bytes=2 * vocab, packed_bytes=3 * 5)
    for _ in range(3):
        for key in range(3):
            get(cache, key)
    assert built == [0, 1, 2]

    built.clear()
    cache = MaskCache(vocab, recent_bytes=vocab, packed_bytes=2 * 5)  # one mask, two packed
    # 0 is packed as 1 comes and found there; 1 is packed as 0 comes back (after 0 there);
    # 2 is packed as 3 comes, and the packed level drops 0, its least recently used
    for key in (0, 1, 0, 2, 3):
        get(cache, key)
    assert built == [0, 1, 2, 3]
    get(cache, 1)
    get(cache, 0)
    assert built == [0, 1, 2, 3, 0]
    packed = cache.packed(0, lambda: truth[0].copy())  # held unpacked only: packed now
    assert np.array_equal(packed, np.packbits(truth[0], bitorder="little"))
    assert not packed.flags.writeable and built == [0, 1, 2, 3, 0]


@pytest.mark.parametrize("source,kind", [(PATTERN, "regex"),
                                         ("grammars/tree.schema.json", None)])
def test_warm_masks_are_the_masks_of_the_table(smollm2, dense, source, kind):
    """`warm` computes each distinct row's mask ahead; masks met after it are the table's
    (rows that allow the same classes share one mask, a call grammar's plain states the
    row's own)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    grammar = grammarc.compile(source if kind else root / source, smollm2, kind=kind)
    cold = grammarc.compile(source if kind else root / source, smollm2, kind=kind)
    rows = grammar.table.mask_rows()
    assert 0 < grammar.warm(limit=2) == min(2, len(rows))
    assert grammar.warm() == len(rows) <= grammar.num_rows
    with pytest.raises(ValueError):
        grammar.warm(limit=-1)
    with pytest.raises(TypeError):
        grammar.warm(limit=1.5)
    state, rng = grammar.initial_state, np.random.default_rng(7)
    for _ in range(60):  # a random walk: each mask against a cold grammar's
        mask = grammar.mask(state)
        assert np.array_equal(mask, cold.mask(cold.state_from_ints(grammar.state_to_ints(state))))
        if kind:
            assert np.array_equal(mask[:len(dense[state])], dense[state] > 0)
        allowed = np.flatnonzero(mask)
        token = int(rng.choice(allowed))
        if token in grammar.eos_token_ids:
            state = grammar.initial_state
            continue
        state = grammar.next_state(state, token)


def test_bad_shapes_are_clear_errors(grammar):
    with pytest.raises(ValueError, match="columns but the vocabulary has"):
        grammar.apply(np.zeros(10, np.float32), 1)
    with pytest.raises(ValueError, match="rows of logits but 1 states"):
        grammar.apply(np.zeros((2, grammar.vocab_size), np.float32), [1])
    with pytest.raises(TypeError, match="numpy array or a torch tensor"):
        grammar.apply([0.0] * grammar.vocab_size, 1)


def test_runtime_imports_no_compile_side_package(grammar, tmp_path):
    """A service with only numpy + safetensors can load and use an artifact, and the generic
    logits processor."""
    path = tmp_path / "g.safetensors"
    grammar.save(path)
    script = textwrap.dedent(f"""
        import sys
        BLOCKED = ("lark", "tokenizers", "torch", "scipy", "click", "gguf",
                   "transformers", "accelerate", "grammarc._core")
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED or name in BLOCKED:
                    raise ImportError("blocked: " + name)
        sys.meta_path.insert(0, Block())
        import numpy as np
        import grammarc
        g = grammarc.load({str(path)!r})
        logits = g.apply(np.zeros((2, g.vocab_size), np.float32), [1, 2])
        assert (logits[0] == 0).sum() == len(g.allowed(1))
        print(g.advance(np.array([1]), g.allowed(1)[:1])[0] > 0)
        from grammarc.integrations import GrammarProcessor
        step = GrammarProcessor(g, max_new_tokens=20)(np.array([7]), np.zeros(g.vocab_size))
        assert np.array_equal(step == 0, g.mask_within(1, 20))
        print(sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["True", "[]"]
