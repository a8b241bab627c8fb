"""Artifact files: write and read grammarc tables (`.safetensors` or `.npz`), see docs/FORMAT.md.

Writing is deterministic (same tables and metadata give the same bytes) and atomic (a temp
file in the target directory, then a rename). Reading never executes code (npz without pickle)
and validates everything before a table is used: a corrupted, truncated or hand-edited file is
an `ArtifactError`, never a crash, a hang or an out-of-range index later.

This module needs only numpy and, for `.safetensors`, the `safetensors` package.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ArtifactError, GrammarcError
from ..files import write_atomically
from .table import (INT32_FIELDS, CallTables, CountRegisters, ExitTables, TokenTable,
                    stored_tensors)

FORMAT_NAME = "grammarc"
FORMAT_VERSION = 1        # one table: next = T[state, token]
CALLS_FORMAT_VERSION = 2  # machines linked by calls: tables plus a stack (docs/FORMAT.md)
COUNTERS_FORMAT_VERSION = 3  # version 2 and count registers of counted machines
TEXT_COUNTERS_FORMAT_VERSION = 4  # version 3 and counts across a pattern's states
EXITS_FORMAT_VERSION = 5  # version 4 and returns chosen by how a machine ends (unions)
TWINS_FORMAT_VERSION = 6  # version 5 and twins of loop states (unions that count)
NEWEST_FORMAT_VERSION = TWINS_FORMAT_VERSION
MAX_VOCAB_SIZE = 1 << 24   # a larger tokenizer.vocab_size is a forged file, not a vocabulary
LAYOUTS = ("factored", "csr", "dense")
SUFFIXES = (".safetensors", ".npz")
METADATA_KEY = "grammarc"           # safetensors: __metadata__ key holding the JSON document
NPZ_METADATA = "__metadata__"       # npz: uint8 array holding the same JSON document
_MAX_INFLATED_BYTES = 1 << 30       # npz: what compressed members may expand to, in all
_MOST_EXIT_CLASSES = 1 << 16        # version 5: exit classes of a union machine

_UNSIGNED = (np.uint8, np.uint16, np.uint32)
_DTYPE_CODES = {np.dtype("<u1"): "U8", np.dtype("<u2"): "U16", np.dtype("<u4"): "U32",
                np.dtype("<i1"): "I8", np.dtype("<i2"): "I16", np.dtype("<i4"): "I32"}
_SIGNED = (np.int8, np.int16, np.int32)

# tensor name -> (signedness, number of dimensions) for each layout
_COMMON = {
    "accepting": ("u", 1),
    "min_tokens_to_accept": ("i", 1),
    "byte_ptr": ("u", 1),
    "byte_ranges": ("u", 2),
    "byte_next": ("u", 1),
}
# present exactly when the metadata names the states (`state_names`: state-machine specs)
_STATE_NAMES = {"state_name": ("i", 1)}
# version 2 (factored layout only): calls, stack tokens, suffixes, push sequences
_CALL_TENSORS = stored_tensors(CallTables)
# version 3: version 2 and count registers (counted machines, the repetitions each token
# starts inside their loops, the counts stack tokens and suffixes end with)
_COUNTER_TENSORS = stored_tensors(CountRegisters, COUNTERS_FORMAT_VERSION)
# version 4: version 3 and, per state, whether it lies between repetitions and how many it
# still needs (a pattern's characters counted across its states)
_TEXT_COUNTER_TENSORS = stored_tensors(CountRegisters, TEXT_COUNTERS_FORMAT_VERSION)
# version 5: version 4 and exit classes, sites and the exit class of each suffix
_EXIT_TENSORS = stored_tensors(ExitTables, EXITS_FORMAT_VERSION)
# version 6: version 5 and the twin of each state inside a loop (unions that count)
_TWIN_COUNTER_TENSORS = stored_tensors(CountRegisters, TWINS_FORMAT_VERSION)
_LAYOUT_TENSORS = {
    "factored": {"class_ptr": ("u", 1), "class_tokens": ("u", 1), "state_row": ("u", 1),
                 "row_ptr": ("u", 1), "row_class": ("u", 1), "row_delta": ("i", 1)},
    "csr": {"csr_ptr": ("u", 1), "csr_tokens": ("u", 1), "csr_next": ("u", 1)},
    "dense": {"transitions": ("u", 2)},
}


@dataclass
class ArtifactData:
    """The decoded, validated content of an artifact file."""

    metadata: dict[str, Any]
    tensors: dict[str, np.ndarray]  # widened to int64 (bool for `accepting`)


# ------------------------------------------------------------------- layouts (docs/FORMAT.md)
def format_version(table: TokenTable) -> int:
    """The format version that holds `table`: 1, 2 with calls, 3 with count registers, 4
    with counts across a pattern's states, 5 with returns by exit class, 6 with twins of
    loop states."""
    return FORMAT_VERSION if table.calls is None else table.calls.version


def encode_table(table: TokenTable, metadata: dict[str, Any],
                 layout: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The metadata and tensors that write `table` in `layout` (factored, csr or dense)."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; use factored, csr or dense")
    if table.calls is not None and layout != "factored":
        raise ValueError("a grammar with calls is saved in the factored layout only")
    metadata = dict(metadata, layout=layout, num_states=table.num_states)
    tensors = {"accepting": table.accepting.astype(np.uint8),
               "min_tokens_to_accept": table.min_tokens_to_accept,
               "byte_ptr": table.byte_ptr, "byte_ranges": table.byte_ranges,
               "byte_next": table.byte_next}
    if table.state_labels is not None:
        tensors["state_name"] = table.state_labels
    if table.calls is not None:
        tensors.update(table.calls.tensors())
    if layout == "factored":
        # a stable sort on 16-bit keys is a radix sort in numpy
        keys = table.token_class.astype(np.uint16 if table.num_classes <= 1 << 16 else np.int64)
        order = np.argsort(keys, kind="stable")
        counts = np.bincount(table.token_class, minlength=table.num_classes)
        counts[0] = 0
        class_ptr = np.zeros(table.num_classes + 1, np.int64)
        np.cumsum(counts, out=class_ptr[1:])
        metadata.update(num_classes=table.num_classes, num_rows=table.num_rows)
        tensors.update(class_ptr=class_ptr, class_tokens=order[table.token_class[order] > 0],
                       state_row=table.state_row, row_ptr=table.row_ptr,
                       row_class=table.row_class, row_delta=table.row_delta)
        return metadata, tensors
    metadata.pop("num_classes", None)
    metadata.pop("num_rows", None)
    if layout == "csr":
        ptr, tokens, nxt = table.transitions()
        tensors.update(csr_ptr=ptr, csr_tokens=tokens, csr_next=nxt)
    else:
        tensors.update(transitions=table.dense())
    return metadata, tensors


def decode_table(data: ArtifactData) -> TokenTable:
    """The table of validated artifact content, whatever its layout."""
    t = data.tensors
    layout = data.metadata["layout"]
    vocab = int(data.metadata["tokenizer"]["vocab_size"])
    num_states = len(t["accepting"])
    if layout == "factored":
        token_class = np.zeros(vocab, np.int64)
        token_class[t["class_tokens"]] = np.repeat(np.arange(len(t["class_ptr"]) - 1),
                                                   np.diff(t["class_ptr"]))
        rows = dict(token_class=token_class, state_row=t["state_row"], row_ptr=t["row_ptr"],
                    row_class=t["row_class"], row_delta=t["row_delta"])
    else:
        if layout == "csr":
            ptr, tokens, nxt = t["csr_ptr"], t["csr_tokens"], t["csr_next"]
        else:
            states, tokens = np.nonzero(t["transitions"])
            nxt = t["transitions"][states, tokens]
            ptr = np.zeros(num_states + 1, np.int64)
            np.cumsum(np.bincount(states, minlength=num_states), out=ptr[1:])
        # every token its own class: class = token + 1
        owner = np.repeat(np.arange(num_states), np.diff(ptr))
        rows = dict(token_class=np.arange(1, vocab + 1), state_row=np.arange(num_states),
                    row_ptr=ptr, row_class=tokens + 1, row_delta=nxt - owner)
    version = data.metadata["format_version"]
    counters = None
    no_twins = {"count_twin": np.zeros(num_states, np.int64)}
    if version >= TWINS_FORMAT_VERSION:
        counters = CountRegisters(**{name: t[name] for name in _TWIN_COUNTER_TENSORS})
    elif version >= TEXT_COUNTERS_FORMAT_VERSION:
        counters = CountRegisters(**{name: t[name] for name in _TEXT_COUNTER_TENSORS},
                                  **no_twins)
    elif version >= COUNTERS_FORMAT_VERSION:
        counters = CountRegisters(**{name: t[name] for name in _COUNTER_TENSORS},
                                  **CountRegisters.loop_and_need(t["machine_loop"], num_states),
                                  **no_twins)
    exits = ExitTables(**{name: t[name] for name in _EXIT_TENSORS}) \
        if version >= EXITS_FORMAT_VERSION else None
    calls = CallTables(**{name: t[name] for name in _CALL_TENSORS}, counters=counters,
                       exits=exits) if version >= CALLS_FORMAT_VERSION else None
    return TokenTable(**rows, accepting=t["accepting"].astype(bool),
                      min_tokens_to_accept=t["min_tokens_to_accept"], byte_ptr=t["byte_ptr"],
                      byte_ranges=t["byte_ranges"], byte_next=t["byte_next"],
                      state_labels=t.get("state_name"), calls=calls)


def smallest_dtype(values: np.ndarray, signed: bool) -> np.dtype:
    """The narrowest dtype of the format's choices that holds every value."""
    lo = int(values.min()) if values.size else 0
    hi = int(values.max()) if values.size else 0
    for dtype in (_SIGNED if signed else _UNSIGNED):
        info = np.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return np.dtype(dtype)
    raise ValueError(f"values out of range for the artifact format: {lo}..{hi}")


def checksum(metadata: dict[str, Any], tensors: dict[str, np.ndarray]) -> str:
    """sha256 over the canonical metadata JSON (without `checksum`) and every tensor's name,
    dtype code, shape and little-endian bytes, in sorted name order (docs/FORMAT.md)."""
    digest = hashlib.sha256(_canonical_json({k: v for k, v in metadata.items()
                                             if k != "checksum"}).encode("utf-8"))
    for name in sorted(tensors):
        arr = tensors[name]
        code = _DTYPE_CODES.get(arr.dtype.newbyteorder("<"), arr.dtype.str)
        shape = ",".join(str(n) for n in arr.shape)
        digest.update(f"\0{name}\0{code}\0{shape}\0".encode("utf-8"))
        digest.update(np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes())
    return digest.hexdigest()


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def write_artifact(path: str | os.PathLike, metadata: dict[str, Any],
                   tensors: dict[str, np.ndarray]) -> None:
    """Write an artifact atomically; the container follows the suffix of `path`."""
    path = Path(path)
    suffix = artifact_suffix(path)
    spec = _tensor_spec(metadata)
    if set(tensors) != set(spec):
        raise ValueError(f"tensors for layout {metadata['layout']!r} must be {sorted(spec)}")
    stored = {name: np.ascontiguousarray(arr, dtype=smallest_dtype(arr, spec[name][0] == "i"))
              for name, arr in tensors.items()}
    metadata = dict(metadata, checksum=checksum(metadata, stored))
    document = _canonical_json(metadata)
    if suffix == ".safetensors":
        from safetensors.numpy import save

        payload = save(stored, metadata={METADATA_KEY: document})
    else:
        stored[NPZ_METADATA] = np.frombuffer(document.encode("utf-8"), np.uint8)
        payload = _npz_bytes(stored)
    try:
        write_atomically(path, lambda handle: handle.write(payload))
    except OSError as exc:
        raise GrammarcError(f"cannot write {path}: {exc.strerror or exc}") from None


def read_artifact(path: str | os.PathLike) -> ArtifactData:
    """Read and validate an artifact; any problem is an `ArtifactError` naming the file."""
    path = Path(path)
    suffix = artifact_suffix(path)
    if not path.is_file():
        raise ArtifactError(f"{path}: no such artifact file")
    try:
        if suffix == ".safetensors":
            document, raw = _read_safetensors(path)
        else:
            document, raw = _read_npz(path)
        metadata = _parse_metadata(document)
        tensors = _validate(metadata, raw)
    except ArtifactError as exc:
        raise ArtifactError(f"{path}: {exc}") from None
    except Exception as exc:  # the containers' own parse errors: corrupt or truncated files
        raise ArtifactError(f"{path}: not a readable grammarc artifact "
                            f"({type(exc).__name__}: {_one_line(exc)})") from None
    return ArtifactData(metadata, tensors)


def _tensor_spec(metadata: dict[str, Any]) -> dict[str, tuple[str, int]]:
    """Name -> (signedness, number of dimensions) of the tensors an artifact must hold."""
    spec = {**_COMMON, **_LAYOUT_TENSORS[metadata["layout"]]}
    if "state_names" in metadata:
        spec.update(_STATE_NAMES)
    if metadata["format_version"] >= CALLS_FORMAT_VERSION:
        spec.update(_CALL_TENSORS)
    version = metadata["format_version"]
    if version >= COUNTERS_FORMAT_VERSION:
        spec.update(_TWIN_COUNTER_TENSORS if version >= TWINS_FORMAT_VERSION else
                    _TEXT_COUNTER_TENSORS if version >= TEXT_COUNTERS_FORMAT_VERSION else
                    _COUNTER_TENSORS)
    if metadata["format_version"] >= EXITS_FORMAT_VERSION:
        spec.update(_EXIT_TENSORS)
    return spec


def artifact_suffix(path: Path) -> str:
    """The container suffix of an artifact path, or a `GrammarcError` for any other."""
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise GrammarcError(f"{path}: unknown artifact type {path.suffix or '(no suffix)'!r}; "
                            "use .safetensors or .npz")
    return suffix


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:200]


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """An uncompressed .npz with fixed timestamps, members in name order (deterministic)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name in sorted(arrays):
            member = io.BytesIO()
            np.lib.format.write_array(member, arrays[name], allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            archive.writestr(info, member.getvalue())
    return buffer.getvalue()


def _read_safetensors(path: Path) -> tuple[str, dict[str, np.ndarray]]:
    from safetensors import safe_open

    with safe_open(str(path), framework="np") as handle:
        header = handle.metadata() or {}
        if METADATA_KEY not in header:
            raise ArtifactError("not a grammarc artifact (no grammarc metadata)")
        tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    return header[METADATA_KEY], tensors


def _read_npz(path: Path) -> tuple[str, dict[str, np.ndarray]]:
    if not zipfile.is_zipfile(path):
        raise ArtifactError("not an .npz archive (not a zip file)")
    with zipfile.ZipFile(path) as archive:  # names and sizes first: nothing is inflated yet
        members = archive.infolist()
    for member in members:
        if not re.fullmatch(r"[A-Za-z0-9_]+\.npy", member.filename):
            raise ArtifactError(f"unexpected member {member.filename[:60]!r} in the archive")
    inflated = sum(m.file_size for m in members if m.compress_type != zipfile.ZIP_STORED)
    if inflated > _MAX_INFLATED_BYTES:
        raise ArtifactError(f"its compressed members expand to {inflated:,} bytes, more than "
                            f"{_MAX_INFLATED_BYTES:,} (grammarc writes .npz uncompressed)")
    with np.load(path, allow_pickle=False) as archive:
        tensors = {name: archive[name] for name in archive.files}
    if NPZ_METADATA not in tensors:
        raise ArtifactError("not a grammarc artifact (no grammarc metadata)")
    raw = tensors.pop(NPZ_METADATA)
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise ArtifactError("metadata must be a 1-D uint8 array")
    return raw.tobytes().decode("utf-8"), tensors


def _parse_metadata(document: str) -> dict[str, Any]:
    try:
        metadata = json.loads(document)
    except ValueError:
        raise ArtifactError("its metadata is not valid JSON") from None
    if not isinstance(metadata, dict) or metadata.get("format") != FORMAT_NAME:
        raise ArtifactError("not a grammarc artifact (metadata 'format' is not 'grammarc')")
    version = metadata.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ArtifactError(f"invalid format_version {version!r}")
    if version > NEWEST_FORMAT_VERSION:
        raise ArtifactError(f"artifact format version {version} is newer than this grammarc "
                            f"reads (up to {NEWEST_FORMAT_VERSION}); upgrade grammarc")
    _require(metadata.get("layout") in LAYOUTS, f"unknown layout {metadata.get('layout')!r}")
    if version >= CALLS_FORMAT_VERSION:
        _require(metadata["layout"] == "factored",
                 f"a version {version} artifact has the factored layout")
        names = metadata.get("machines")
        _require(isinstance(names, list) and len(names) >= 1 and
                 all(isinstance(n, str) for n in names), "machines must be a list of names")
    tokenizer = metadata.get("tokenizer")
    _require(isinstance(tokenizer, dict), "metadata has no 'tokenizer' section")
    vocab_size = tokenizer.get("vocab_size")
    _require(_is_int(vocab_size) and vocab_size > 0, "invalid tokenizer.vocab_size")
    _require(vocab_size <= MAX_VOCAB_SIZE, f"tokenizer.vocab_size {vocab_size:,} is larger "
             f"than any vocabulary (at most {MAX_VOCAB_SIZE:,})")
    _require(all(isinstance(tokenizer.get(k), str) for k in ("name", "fingerprint")),
             "invalid tokenizer.name or tokenizer.fingerprint")
    _require(all(isinstance(metadata.get(k), str) for k in ("kind", "source")),
             "invalid kind or source")
    _require(isinstance(metadata.get("options", {}), dict), "invalid options")
    eos = tokenizer.get("eos_token_ids")
    _require(isinstance(eos, list) and all(_is_int(e) and 0 <= e < vocab_size for e in eos),
             "invalid tokenizer.eos_token_ids")
    for key in ("num_states", "num_classes", "num_rows"):
        if key in metadata:
            _require(_is_int(metadata[key]) and metadata[key] >= 0, f"invalid {key}")
    _require(version >= CALLS_FORMAT_VERSION or "machines" not in metadata,
             "machines in a version 1 artifact")
    for key, types in (("grammarc_version", str), ("source_sha256", str),
                       ("source_name", (str, type(None)))):
        _require(isinstance(metadata.get(key, ""), types), f"invalid {key}")
    for key, state in (("start_state", 1), ("dead_state", 0)):
        _require(metadata.get(key, state) == state and not isinstance(metadata.get(key), bool),
                 f"{key} must be {state}")
    if "state_names" in metadata:
        names = metadata["state_names"]
        _require(isinstance(names, list) and all(isinstance(n, str) for n in names),
                 "state_names must be a list of strings")
    return metadata


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ArtifactError(message)


def _validate(metadata: dict[str, Any], raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Check names, dtypes, shapes and every index range; return the arrays widened to the
    table's types (int64, the row entries int32)."""
    layout = metadata["layout"]
    spec = _tensor_spec(metadata)
    missing = sorted(set(spec) - set(raw))
    extra = sorted(set(raw) - set(spec))
    _require(not missing, f"missing tensors: {', '.join(missing)}")
    _require(not extra, f"unexpected tensors: {', '.join(extra)}")
    t: dict[str, np.ndarray] = {}
    for name, (kind, ndim) in spec.items():
        arr = raw[name]
        allowed = _SIGNED if kind == "i" else _UNSIGNED
        _require(arr.dtype in [np.dtype(d) for d in allowed],
                 f"tensor {name} has dtype {arr.dtype}, expected one of "
                 f"{', '.join(np.dtype(d).name for d in allowed)}")
        _require(arr.ndim == ndim, f"tensor {name} must have {ndim} dimension(s)")
        # a table over the vocabulary per loop state keeps its narrow dtype, the row entries
        # the table's int32 (a value of an unsigned tensor past it turns negative, out of range)
        t[name] = arr.copy() if name == "count_table" else \
            arr.astype(np.int32 if name in INT32_FIELDS else np.int64)
        if name in INT32_FIELDS:  # read-only: the table keeps them without a copy
            t[name].flags.writeable = False
    _require(metadata.get("checksum") == checksum(metadata, {n: raw[n] for n in spec}),
             "its content does not match its checksum (the file is corrupted or was edited)")

    vocab_size = metadata["tokenizer"]["vocab_size"]
    num_states = len(t["accepting"])
    _require(num_states >= 2, "an artifact needs at least the dead and the start state")
    _require(metadata.get("num_states", num_states) == num_states,
             "metadata num_states does not match the tables")
    _require(bool(np.all(t["accepting"] <= 1)), "accepting must hold 0 or 1")
    _require(t["accepting"][0] == 0, "the dead state 0 cannot be accepting")
    _require(len(t["min_tokens_to_accept"]) == num_states, "min_tokens_to_accept has the wrong length")
    _require(bool(np.all(t["min_tokens_to_accept"] >= -1)), "min_tokens_to_accept below -1")

    _check_ptr(t["byte_ptr"], num_states, len(t["byte_next"]), "byte_ptr")
    ranges = t["byte_ranges"]
    _require(ranges.shape == (len(t["byte_next"]), 2), "byte_ranges must have shape (E, 2)")
    _require(bool(np.all(ranges <= 255)) and bool(np.all(ranges[:, 0] <= ranges[:, 1])),
             "byte_ranges must hold ranges lo <= hi within 0..255")
    _require(bool(np.all((t["byte_next"] >= 1) & (t["byte_next"] < num_states))),
             "byte_next out of range")
    if "state_name" in t:
        labels = t["state_name"]
        _require(len(labels) == num_states, "state_name has the wrong length")
        _require(bool(np.all((labels >= -1) & (labels < len(metadata["state_names"])))),
                 "state_name out of range")
        _require(labels[0] == -1, "the dead state 0 cannot have a name")

    if layout == "factored":
        num_classes = len(t["class_ptr"]) - 1
        _check_ptr(t["class_ptr"], num_classes, len(t["class_tokens"]), "class_ptr")
        _require(num_classes >= 1 and t["class_ptr"][1] == 0, "class 0 must list no tokens")
        tokens = t["class_tokens"]
        _require(bool(np.all(tokens < vocab_size)), "class_tokens out of range")
        _require(len(np.unique(tokens)) == len(tokens), "a token is listed in two classes")
        _require(len(t["state_row"]) == num_states, "state_row has the wrong length")
        num_rows = len(t["row_ptr"]) - 1
        _check_ptr(t["row_ptr"], num_rows, len(t["row_class"]), "row_ptr")
        _require(bool(np.all(t["state_row"] < num_rows)), "state_row out of range")
        _require(len(t["row_delta"]) == len(t["row_class"]), "row_delta has the wrong length")
        row_class = t["row_class"]
        _require(bool(np.all((row_class >= 1) & (row_class < num_classes))), "row_class out of range")
        _check_sorted_within(t["row_ptr"], row_class, "row_class")
        # each row's least and largest step, by segment (rows are contiguous; `ufunc.at`
        # took seconds on a table of 14 million entries)
        nonempty = np.diff(t["row_ptr"]) > 0
        starts = t["row_ptr"][:-1][nonempty]
        lo = np.zeros(num_rows, np.int64)
        hi = np.zeros(num_rows, np.int64)
        lo[nonempty] = np.minimum.reduceat(t["row_delta"], starts)
        hi[nonempty] = np.maximum.reduceat(t["row_delta"], starts)
        states = np.arange(num_states)
        used = np.diff(t["row_ptr"])[t["state_row"]] > 0
        _require(bool(np.all(states[used] + lo[t["state_row"][used]] >= 1)) and
                 bool(np.all(states[used] + hi[t["state_row"][used]] < num_states)),
                 "a row leads to the dead state or a state out of range")
        _require(not used[0], "the dead state 0 must allow nothing")
        _require(metadata.get("num_classes") == num_classes and
                 metadata.get("num_rows") == num_rows,
                 "metadata num_classes or num_rows does not match the tables")
    else:
        _require("num_classes" not in metadata and "num_rows" not in metadata,
                 f"num_classes and num_rows are metadata of the factored layout, not {layout}")
    if layout == "csr":
        _check_ptr(t["csr_ptr"], num_states, len(t["csr_tokens"]), "csr_ptr")
        _require(len(t["csr_next"]) == len(t["csr_tokens"]), "csr_next has the wrong length")
        _require(bool(np.all(t["csr_tokens"] < vocab_size)), "csr_tokens out of range")
        _require(bool(np.all((t["csr_next"] >= 1) & (t["csr_next"] < num_states))),
                 "csr_next out of range")
        _check_sorted_within(t["csr_ptr"], t["csr_tokens"], "csr_tokens")
        _require(t["csr_ptr"][1] == 0, "the dead state 0 must allow nothing")
    elif layout == "dense":
        table = t["transitions"]
        _require(table.shape == (num_states, vocab_size),
                 f"transitions must have shape ({num_states}, {vocab_size})")
        _require(bool(np.all(table < num_states)), "transitions out of range")
        _require(not table[0].any(), "the dead state 0 must allow nothing")
    if metadata["format_version"] >= CALLS_FORMAT_VERSION:
        _validate_calls(t, metadata, num_states, vocab_size)
    t["accepting"] = t["accepting"].astype(bool)
    return t


def _validate_calls(t: dict[str, np.ndarray], metadata: dict[str, Any], num_states: int,
                    vocab_size: int) -> None:
    """Index ranges of the version 2 tensors (docs/FORMAT.md)."""
    num_machines = len(metadata["machines"])
    starts = t["machine_start"]
    _require(len(starts) == num_machines and bool(np.all((starts >= 1) & (starts < num_states))),
             "machine_start out of range")
    _require(t["machine_first"].shape == (num_machines, 256) and
             bool(np.all(t["machine_first"] <= 1)), "machine_first must be (machines, 256) of 0/1")
    _check_ptr(t["call_ptr"], num_states, len(t["call_machine"]), "call_ptr")
    _require(len(t["call_return"]) == len(t["call_machine"]), "call_return has the wrong length")
    _require(bool(np.all(t["call_machine"] < num_machines)), "call_machine out of range")
    _require(bool(np.all((t["call_return"] >= 1) & (t["call_return"] < num_states))),
             "call_return out of range")
    num_sequences = len(t["push_ptr"]) - 1
    _check_ptr(t["push_ptr"], num_sequences, len(t["push_states"]), "push_ptr")
    _require(bool(np.all((t["push_states"] >= 1) & (t["push_states"] < num_states))),
             "push_states out of range")
    num_suffixes = suffix_count(t["suffix_id"], t["stack_next"], t["stack_arg"],
                                t["suffix_next"], t["suffix_arg"])
    _check_ptr(t["stack_ptr"], num_states, len(t["stack_token"]), "stack_ptr")
    _require(bool(np.all(t["stack_token"] < vocab_size)), "stack_token out of range")
    _check_sorted_within(t["stack_ptr"], t["stack_token"], "stack_token")
    for prefix, count in (("stack", len(t["stack_token"])), ("suffix", len(t["suffix_id"]))):
        nxt, arg = t[f"{prefix}_next"], t[f"{prefix}_arg"]
        _require(len(nxt) == count and len(arg) == count, f"{prefix}_next or {prefix}_arg has "
                 "the wrong length")
        _require(bool(np.all((nxt >= -1) & (nxt < num_states) & (nxt != 0))),
                 f"{prefix}_next out of range")
        _require(bool(np.all(arg[nxt >= 1] < num_sequences)), f"{prefix}_arg out of range")
    _require(len(t["suffix_state"]) == len(t["suffix_id"]), "suffix_state has the wrong length")
    _require(bool(np.all((t["suffix_state"] >= 1) & (t["suffix_state"] < num_states))),
             "suffix_state out of range")
    keys = t["suffix_state"] * max(num_suffixes, 1) + t["suffix_id"]
    _require(bool(np.all(np.diff(keys) > 0)), "suffix entries must be sorted by (state, suffix)")
    _check_first_bytes(t)
    if metadata["format_version"] >= COUNTERS_FORMAT_VERSION:
        _validate_counters(t, num_machines, num_states, vocab_size,
                           metadata["format_version"] >= TEXT_COUNTERS_FORMAT_VERSION,
                           metadata["format_version"] >= TWINS_FORMAT_VERSION)
    if metadata["format_version"] >= EXITS_FORMAT_VERSION:
        _require(len(t["exit_class"]) == num_states, "exit_class has the wrong length")
        _require(bool(np.all(t["exit_class"] < _MOST_EXIT_CLASSES)), "exit_class out of range")
        _check_ptr(t["site_ptr"], num_states, len(t["site_next"]), "site_ptr")
        _require(bool(np.all(t["site_next"] < num_states)), "site_next out of range")
        _require(len(t["suffix_class"]) >= num_suffixes and
                 bool(np.all(t["suffix_class"] < _MOST_EXIT_CLASSES)),
                 "suffix_class has the wrong length or is out of range")


def _check_first_bytes(t: dict[str, np.ndarray]) -> None:
    """What makes the byte rules of version 2 end (docs/FORMAT.md): no called machine accepts
    the empty text, no machine calls itself before reading a byte (left recursion), and
    `machine_first` holds exactly the bytes the tables begin each machine with, so a call
    taken on a byte reads it within a chain of calls as long as the machines are many."""
    starts, call_ptr, call_machine = t["machine_start"], t["call_ptr"], t["call_machine"]
    called = np.zeros(len(starts), bool)
    called[call_machine] = True
    called[1:] = True
    _require(not (t["accepting"][starts] & called).any(),
             "a called machine accepts the empty text")
    first = np.zeros((len(starts), 256), bool)
    for m, start in enumerate(starts.tolist()):
        lo, hi = t["byte_ptr"][start], t["byte_ptr"][start + 1]
        for (a, b), nxt in zip(t["byte_ranges"][lo:hi].tolist(), t["byte_next"][lo:hi].tolist()):
            first[m, a:b + 1] |= nxt != 0
    callees = [np.unique(call_machine[call_ptr[s]:call_ptr[s + 1]]).tolist()
               for s in starts.tolist()]
    # depth first over the calls at start states: a callee's first bytes are complete
    # before its caller's, and a callee met again on the path is left recursion
    status = [0] * len(starts)  # 0 not seen, 1 on the path, 2 done
    for root in range(len(starts)):
        if status[root]:
            continue
        status[root], path = 1, [(root, iter(callees[root]))]
        while path:
            m, todo = path[-1]
            callee = next(todo, None)
            if callee is None:
                status[m] = 2
                path.pop()
                for c in callees[m]:
                    first[m] |= first[c]
                continue
            _require(status[callee] != 1, "a machine calls itself before reading a byte")
            if not status[callee]:
                status[callee] = 1
                path.append((callee, iter(callees[callee])))
    _require(np.array_equal(first, t["machine_first"] != 0),
             "machine_first does not hold the bytes the machines begin with")


def _validate_counters(t: dict[str, np.ndarray], num_machines: int, num_states: int,
                       vocab_size: int, across_states: bool, twins: bool) -> None:
    """Index ranges of the count registers (docs/FORMAT.md, counted machines; version 4's
    `across_states`, version 6's `twins`)."""
    starts, loop = t["machine_start"], t["machine_loop"]
    _require(bool(np.all(np.diff(starts) > 0)), "machine_start must increase (with counters)")
    for name in ("machine_loop", "machine_count_min", "machine_count_max", "machine_item_cost"):
        _require(len(t[name]) == num_machines, f"{name} has the wrong length")
    for name in ("count_row", "count_complete_cost"):
        _require(len(t[name]) == num_states, f"{name} has the wrong length")
    row, table = t["count_row"], t["count_table"]
    _require(table.shape[1:] == (vocab_size,), f"count_table must be (rows, {vocab_size})")
    _require(bool(np.all((row >= -1) & (row < len(table)))), "count_row out of range")
    counted = loop > 0
    _require(not counted[0] and bool(np.all(loop < num_states)), "machine_loop out of range")
    machine_of = np.searchsorted(starts, np.arange(num_states), side="right") - 1
    _require(bool(np.all(row[loop[counted]] >= 0)) and
             bool(np.all(machine_of[loop[counted]] == np.flatnonzero(counted))),
             "a machine's loop state must be one of its states inside the loop")
    inside = np.flatnonzero(row >= 0)
    _require(bool(np.all((machine_of[inside] >= 0) & counted[machine_of[inside]])),
             "count_row gives a row to a state outside every counted machine")
    _require(not np.diff(t["call_ptr"])[inside].any(), "a state inside a loop calls a machine")
    bound = t["machine_count_max"]
    _require(bool(np.all(bound >= -1)) and
             bool(np.all((bound == -1) | (bound >= t["machine_count_min"]))),
             "machine_count_max must be -1 (no bound) or at least machine_count_min")
    for name in ("count_complete_cost", "machine_item_cost"):
        _require(bool(np.all(t[name] >= -1)), f"{name} below -1")
    _require(len(t["stack_reps"]) == len(t["stack_token"]), "stack_reps has the wrong length")
    _require(len(t["suffix_reps"]) == len(t["suffix_id"]), "suffix_reps has the wrong length")
    if across_states:
        for name in ("count_loop", "count_need"):
            _require(len(t[name]) == num_states, f"{name} has the wrong length")
        _require(bool(np.all(t["count_loop"] <= 1)) and
                 not (t["count_loop"] & (row < 0)).any() and
                 bool(np.all(t["count_loop"][loop[counted]] == 1)),
                 "count_loop must be 0/1, 1 only inside loops, and 1 at each machine's loop state")
        _require(not (t["count_need"] * (row < 0)).any(),
                 "count_need must be 0 outside loops")
    if twins:
        twin = t["count_twin"]
        _require(len(twin) == num_states and bool(np.all(twin < num_states)),
                 "count_twin has the wrong length or is out of range")
        has = np.flatnonzero(twin)
        _require(bool(np.all(row[has] >= 0)) and bool(np.all(row[twin[has]] < 0)) and
                 bool(np.all(machine_of[twin[has]] == machine_of[has])),
                 "count_twin must lead from a state inside a loop to one outside it, in its "
                 "machine")


def suffix_count(suffix_id: np.ndarray, stack_next: np.ndarray, stack_arg: np.ndarray,
                 suffix_next: np.ndarray, suffix_arg: np.ndarray) -> int:
    """The number of suffix ids a version 2 artifact uses (keys are state * count + id)."""
    used = [suffix_id, stack_arg[stack_next == -1], suffix_arg[suffix_next == -1]]
    return max(int(a.max(initial=-1)) for a in used) + 1


def _check_ptr(ptr: np.ndarray, count: int, total: int, name: str) -> None:
    _require(len(ptr) == count + 1, f"{name} has the wrong length")
    _require(ptr[0] == 0 and ptr[-1] == total, f"{name} must run from 0 to {total}")
    _require(bool(np.all(np.diff(ptr) >= 0)), f"{name} must not decrease")


def _check_sorted_within(ptr: np.ndarray, values: np.ndarray, name: str) -> None:
    """Values strictly increase inside each segment [ptr[i], ptr[i+1])."""
    if len(values) < 2:
        return
    steps = np.diff(values) > 0
    starts = np.zeros(len(values), bool)
    starts[ptr[:-1][ptr[:-1] < len(values)]] = True
    _require(bool(np.all(steps | starts[1:])), f"{name} must be strictly increasing within each row")
