"""Packed token bitmasks, the layout serving engines apply (vLLM, SGLang, xgrammar).

Token `t` is bit `t % 32` of int32 word `t // 32`, least significant bit first; a set bit means
the token is allowed. A vocabulary of V tokens takes `ceil(V / 32)` words; words and bits past
it are 0 (forbidden). Numpy only; torch is used when the caller hands in tensors.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

import numpy as np

from .arrays import check_logits, is_torch


def bitmask_width(vocab_size: int) -> int:
    """Words of a bitmask over `vocab_size` tokens: ceil(vocab_size / 32)."""
    return (int(vocab_size) + 31) // 32


def pack(mask: np.ndarray) -> np.ndarray:
    """Boolean `mask` (V,) as read-only bytes, eight tokens a byte in the bitmask's bit order
    (`np.packbits(mask, bitorder="little")`): what `write_bitmask` copies into a row."""
    packed = np.packbits(mask, bitorder="little")
    packed.flags.writeable = False
    return packed


def allows(packed: np.ndarray, token: int) -> bool:
    """Whether the mask `packed` (as `pack` makes it) allows `token`, one of its tokens."""
    return bool(packed[token >> 3] >> (token & 7) & 1)


_WORD = np.dtype("<i4")


def _write_packed(packed: np.ndarray, out: np.ndarray) -> None:
    """Copy the bytes of a packed mask into the int32 words `out` (at least as many as
    they fill, as `write_bitmask` checks), clearing the words past them."""
    words = -(-len(packed) // 4)
    if len(packed) % 4:  # the last word is partly past the vocabulary
        padded = np.zeros(4 * words, np.uint8)
        padded[:len(packed)] = packed
        packed = padded
    out[:words] = packed.view(_WORD)
    if words < len(out):
        out[words:] = 0


def write_bitmask(out, rows: tuple[int, ...], vocab_size: int, masks: Iterable[np.ndarray]):
    """Copy each of `masks` (packed, as `pack` makes them) into a row of `out`, the buffer
    of `Grammar.fill_bitmask` (rows `(B,)`) and `Matcher.fill_bitmask` (rows `()`): an int32
    numpy array or torch tensor (any device) of shape `(*rows, W)` with W at least
    `bitmask_width(vocab_size)`; anything else is a `ValueError`. Returns `out`."""
    shape = getattr(out, "shape", None)
    if type(out) is np.ndarray and out.dtype == _WORD and len(shape) == len(rows) + 1 \
            and shape[:-1] == rows and shape[-1] >= bitmask_width(vocab_size):
        host, elsewhere = out, False  # an engine's numpy buffer: nothing else to check
    else:
        host, elsewhere = _host_words(out, rows, vocab_size)
    for row, packed in zip(host if rows else (host,), masks):
        _write_packed(packed, row)
    if elsewhere:
        out.copy_(sys.modules["torch"].from_numpy(host))
    return out


def _host_words(out, rows: tuple[int, ...], vocab_size: int) -> tuple[np.ndarray, bool]:
    """Where `write_bitmask` writes, after the checks of its docstring: `out` (a numpy
    array, or a CPU tensor's memory), or a host array to copy into `out` afterwards (a
    tensor on another device), and whether it is that copy."""
    if not (isinstance(out, np.ndarray) or is_torch(out)):
        raise TypeError(f"out must be a numpy array or a torch tensor, not {type(out).__name__}")
    shape = tuple(out.shape)
    int32 = out.dtype == np.int32 if isinstance(out, np.ndarray) else \
        str(out.dtype) == "torch.int32"
    if shape[:-1] != rows or len(shape) != len(rows) + 1 or not int32:
        wanted = ", ".join([*map(str, rows), "W"])
        raise ValueError(f"out must be an int32 array of shape ({wanted}), not {out.dtype} "
                         f"{shape}")
    if shape[-1] < bitmask_width(vocab_size):
        raise ValueError(f"a bitmask of {shape[-1]} words holds {32 * shape[-1]} tokens, not "
                         f"{vocab_size}")
    if isinstance(out, np.ndarray):
        return out, False
    if out.device.type == "cpu" and out.is_contiguous():
        return out.numpy(), False
    return np.empty(shape, np.int32), True


def unpack_bitmask(bitmask, vocab_size: int):
    """Booleans (..., vocab_size) from int32 words (..., W): True where a token is allowed.
    A numpy array or a torch tensor (on its device), as given."""
    if is_torch(bitmask):
        torch = sys.modules["torch"]
        shifts = torch.arange(32, dtype=torch.int32, device=bitmask.device)
        bits = (bitmask.to(torch.int32).unsqueeze(-1) >> shifts) & 1
        return bits.reshape(*bitmask.shape[:-1], -1)[..., :vocab_size].bool()
    words = np.ascontiguousarray(bitmask, dtype="<i4")
    bits = np.unpackbits(words.view(np.uint8), axis=-1, bitorder="little")
    return bits[..., :vocab_size].astype(np.bool_)


# per byte of a bitmask, what `np.fmin` takes for its 8 tokens: NaN keeps an allowed logit as
# it is (NaN included), -inf replaces a forbidden one
_BYTE_FLOOR = np.where(np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1,
                                     bitorder="little") == 1, np.float32(np.nan),
                       np.float32(-np.inf))
_NUMPY_FLOATS = frozenset({"torch.float16", "torch.float32", "torch.float64"})


def apply_bitmask(logits, bitmask, *, inplace: bool = False):
    """Set the logits of tokens whose bit is 0 to -inf: `logits` (V,) or (B, V) and `bitmask`
    (W,) or (B, W), numpy or torch alike. Columns past 32 * W are forbidden too.

    On the host (numpy, or a CPU tensor of a dtype numpy has) the words are expanded once per
    byte from a table into NaN (allowed) or -inf (forbidden) and merged by `np.fmin`, whose
    result is the masked fill's, without a branch per token (a boolean masked fill costs
    several times more on a mask of random bits)."""
    check_logits(logits)
    vocab = logits.shape[-1]
    width = min(vocab, 32 * bitmask.shape[-1])
    host = not is_torch(logits) or logits.device.type == "cpu" and \
        not logits.requires_grad and str(logits.dtype) in _NUMPY_FLOATS
    if not host:
        if not is_torch(bitmask):
            bitmask = sys.modules["torch"].from_numpy(np.ascontiguousarray(bitmask))
        allowed = unpack_bitmask(bitmask[..., :bitmask_width(vocab)].to(logits.device), width)
        out = logits if inplace else logits.clone()
        out[..., :width].masked_fill_(~allowed, float("-inf"))
        out[..., width:] = float("-inf")
        return out
    out = logits if inplace else (logits.clone() if is_torch(logits) else logits.copy())
    view = out.numpy() if is_torch(out) else out
    words = bitmask[..., :bitmask_width(vocab)]
    words = np.ascontiguousarray(words.cpu().numpy() if is_torch(words) else words, "<i4")
    floor = np.take(_BYTE_FLOOR, words.view(np.uint8), axis=0)
    floor = floor.reshape(*words.shape[:-1], -1)[..., :width]
    np.fmin(view[..., :width], floor, out=view[..., :width])
    view[..., width:] = -np.inf
    return out
