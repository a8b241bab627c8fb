"""Artifact files: round trips, byte-identical rebuilds, and rejection of damaged files."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import rewrite_artifact
from safetensors.numpy import save_file

import grammarc
from grammarc.format.artifact import NEWEST_FORMAT_VERSION, decode_table, read_artifact
from grammarc.errors import ArtifactError, GrammarcError

PATTERN = r"(?:[^eE]{1,12}|\d{4}-\d{2}-\d{2})"


@pytest.fixture(scope="module")
def grammar(smollm2) -> grammarc.Grammar:
    return grammarc.compile(PATTERN, smollm2, kind="regex")


@pytest.fixture(scope="module")
def saved(grammar, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("art") / "g.safetensors"
    grammar.save(path)
    return path


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
@pytest.mark.parametrize("layout", ["factored", "csr", "dense"])
def test_round_trip_every_layout(grammar, tmp_path, suffix, layout):
    path = tmp_path / f"g{suffix}"
    grammar.save(path, layout=layout)
    loaded = grammarc.load(path)
    assert np.array_equal(loaded.to_dense(), grammar.to_dense())
    assert np.array_equal(loaded.min_tokens_to_accept, grammar.min_tokens_to_accept)
    assert np.array_equal(loaded.accepting_states, grammar.accepting_states)
    assert loaded.eos_token_ids == grammar.eos_token_ids
    assert loaded.kind == "regex" and loaded.source == PATTERN
    assert loaded.metadata["layout"] == layout
    meta = loaded.metadata
    assert meta["source_sha256"] == hashlib.sha256(PATTERN.encode()).hexdigest()
    assert meta["tokenizer"]["name"] == "smollm2" and meta["tokenizer"]["vocab_size"] == 49152
    assert meta["grammarc_version"] == grammarc.__version__
    assert loaded.matches("2024-01-31") and not loaded.matches("eee")
    # the sparse export agrees with the dense one
    assert np.array_equal(loaded.to_csr().toarray(), grammar.to_dense())



def test_dense_and_csr_tables_agree_with_the_masks_across_blocks(smollm2):
    """The full table is built a block of about 170 states at a time (49,152 tokens): every
    state's row, in both exports, is what the factored table's mask and steps give."""
    grammar = grammarc.compile(r"(?:ab|cd|xyz){0,300}!", smollm2, kind="regex")
    assert grammar.num_states > 3 * 170
    dense = grammar.to_dense()
    assert np.array_equal(grammar.to_csr().toarray(), dense)
    eos = set(grammar.eos_token_ids)
    for state in range(grammar.num_states):
        allowed = np.flatnonzero(grammar.mask(state))
        assert np.array_equal(np.flatnonzero(dense[state]), allowed), state
        for token in set(allowed.tolist()) - eos:
            assert dense[state, token] == grammar.next_state(state, token)

def test_factored_artifact_is_small(grammar, saved, tmp_path):
    dense = tmp_path / "d.safetensors"
    grammar.save(dense, layout="dense")
    assert saved.stat().st_size * 20 < dense.stat().st_size


def _compile_in_fresh_process(out: Path) -> str:
    code = ("import grammarc, sys; "
            f"grammarc.compile({PATTERN!r}, 'smollm2', kind='regex').save(sys.argv[1])")
    subprocess.run([sys.executable, "-c", code, str(out)], check=True,
                   env={**os.environ, "PYTHONHASHSEED": str(random.randint(1, 10**6))})
    return hashlib.sha256(out.read_bytes()).hexdigest()


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_rebuilds_are_byte_identical_across_processes(tmp_path, grammar, suffix):
    first = _compile_in_fresh_process(tmp_path / f"a{suffix}")
    second = _compile_in_fresh_process(tmp_path / f"b{suffix}")
    grammar.save(tmp_path / f"c{suffix}")
    assert first == second == hashlib.sha256((tmp_path / f"c{suffix}").read_bytes()).hexdigest()


def test_npz_and_safetensors_hold_the_same_content(grammar, tmp_path):
    grammar.save(tmp_path / "g.npz")
    grammar.save(tmp_path / "g.safetensors")
    npz, st = read_artifact(tmp_path / "g.npz"), read_artifact(tmp_path / "g.safetensors")
    assert npz.metadata == st.metadata  # the checksum included: it does not depend on the container
    assert npz.tensors.keys() == st.tensors.keys()
    assert all(np.array_equal(npz.tensors[name], st.tensors[name]) for name in npz.tensors)


def test_failed_write_leaves_nothing(grammar, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    with pytest.raises(GrammarcError, match="cannot write"):
        grammar.save(blocker / "g.safetensors")
    with pytest.raises(GrammarcError, match="unknown artifact type"):
        grammar.save(tmp_path / "g.bin")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-a-dir"]


def test_save_replaces_an_existing_file_whole(grammar, tmp_path):
    path = tmp_path / "g.safetensors"
    path.write_bytes(b"old content")
    grammar.save(path)
    assert grammarc.load(path).num_states == grammar.num_states
    assert [p.name for p in tmp_path.iterdir()] == ["g.safetensors"]


def _assert_rejected_or_unchanged(path: Path, original: grammarc.Grammar) -> None:
    """A damaged file is refused with ArtifactError, or (a byte nobody reads, such as a zip
    timestamp) loads as exactly the same grammar: never a crash, never a silent change."""
    try:
        loaded = grammarc.load(path)
    except ArtifactError as exc:
        assert "\n" not in str(exc)
        return
    assert loaded.metadata == original.metadata
    assert np.array_equal(loaded.to_dense(), original.to_dense())


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_truncated_and_bit_flipped_files_are_rejected(grammar, tmp_path, suffix):
    good = tmp_path / f"good{suffix}"
    grammar.save(good)
    original = grammarc.load(good)
    data = good.read_bytes()
    bad = tmp_path / f"bad{suffix}"
    for cut in sorted({0, 1, 7, 8, 9, 50, len(data) // 2, len(data) - 1}):
        bad.write_bytes(data[:cut])
        with pytest.raises(ArtifactError):
            grammarc.load(bad)
    rng = random.Random(suffix)
    for pos in rng.sample(range(len(data)), min(300, len(data))):
        flipped = bytearray(data)
        flipped[pos] ^= 0xFF
        bad.write_bytes(bytes(flipped))
        _assert_rejected_or_unchanged(bad, original)


@pytest.mark.parametrize("edit,message", [
    (lambda m, t: t.update(accepting=t["accepting"].astype(np.float32)), "dtype float32"),
    (lambda m, t: t.update(state_row=t["state_row"][:-1]), "state_row has the wrong length"),
    (lambda m, t: t.update(row_delta=(t["row_delta"].astype(np.int32) + 1000).astype(np.int32)),
     "out of range"),
    (lambda m, t: t.update(row_delta=(t["row_delta"].astype(np.int32) - 1000).astype(np.int32)),
     "out of range"),
    (lambda m, t: t.update(row_class=np.zeros_like(t["row_class"])), "row_class out of range"),
    # past int32, the table's type, an unsigned class turns negative: still out of range
    (lambda m, t: t.update(row_class=t["row_class"].astype(np.uint32) + np.uint32(1 << 31)),
     "row_class out of range"),
    (lambda m, t: t.update(class_tokens=np.full_like(t["class_tokens"], 60000)), "out of range"),
    (lambda m, t: t.update(byte_next=np.full_like(t["byte_next"], 255)), "byte_next out of range"),
    (lambda m, t: t.pop("row_ptr"), "missing tensors: row_ptr"),
    (lambda m, t: t.update(extra=np.zeros(3, np.uint8)), "unexpected tensors: extra"),
    (lambda m, t: m.update(format_version=NEWEST_FORMAT_VERSION + 1), "newer than this grammarc reads"),
    (lambda m, t: m.update(format="other"), "not a grammarc artifact"),
    (lambda m, t: m.update(layout="sparse"), "unknown layout"),
    (lambda m, t: m["tokenizer"].update(eos_token_ids=[10**6]), "eos_token_ids"),
    (lambda m, t: m["tokenizer"].pop("fingerprint"), "invalid tokenizer.name or tokenizer.fingerprint"),
    (lambda m, t: m.update(source=None), "invalid kind or source"),
    (lambda m, t: m.update(options=[1]), "invalid options"),
    (lambda m, t: m.update(num_states=3), "num_states does not match"),
    (lambda m, t: m["tokenizer"].update(vocab_size=2 ** 34),
     "vocab_size 17,179,869,184 is larger than any vocabulary"),
])
def test_hand_edited_artifacts_are_rejected(saved, tmp_path, edit, message):
    out = tmp_path / "edited.safetensors"
    rewrite_artifact(saved, out, edit)
    with pytest.raises(ArtifactError, match=message):
        grammarc.load(out)


def test_row_entries_stay_int32_from_the_compiler_to_a_loaded_table(grammar, saved):
    """The row entries are most of a large table: int32 (not int64) halves a loaded grammar's
    memory, and the loaded table holds the validated arrays themselves, not copies."""
    data = read_artifact(saved)
    for name in ("row_class", "row_delta"):
        assert data.tensors[name].dtype == np.int32 and not data.tensors[name].flags.writeable
    table = decode_table(data)
    assert table.row_class is data.tensors["row_class"]
    assert table.row_delta is data.tensors["row_delta"]
    assert grammar.table.row_class.dtype == grammar.table.row_delta.dtype == np.int32


def test_edit_without_new_checksum_is_detected(saved, tmp_path):
    out = tmp_path / "edited.safetensors"
    rewrite_artifact(saved, out, lambda m, t: None)
    grammarc.load(out)  # a faithful rewrite loads
    data = read_artifact(out)
    from safetensors import safe_open

    with safe_open(str(out), framework="np") as handle:
        tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    meta = dict(data.metadata, source="something else")
    save_file(tensors, str(out), metadata={"grammarc": json.dumps(meta)})
    with pytest.raises(ArtifactError, match="checksum"):
        grammarc.load(out)


@pytest.mark.parametrize("content", [
    b"", b"\x00" * 8, (2**60).to_bytes(8, "little") + b"{}", (10).to_bytes(8, "little") + b"not json!!",
    (2).to_bytes(8, "little") + b"{}",
])
def test_malicious_headers_are_rejected(tmp_path, content):
    path = tmp_path / "evil.safetensors"
    path.write_bytes(content)
    with pytest.raises(ArtifactError):
        grammarc.load(path)


def test_npz_with_pickled_object_is_refused(tmp_path):
    path = tmp_path / "evil.npz"
    np.savez(path, __metadata__=np.array([{"x": 1}], dtype=object))
    with pytest.raises(ArtifactError):
        grammarc.load(path)


def test_missing_and_foreign_files(tmp_path):
    with pytest.raises(ArtifactError, match="no such artifact"):
        grammarc.load(tmp_path / "nope.safetensors")
    plain = tmp_path / "plain.safetensors"
    save_file({"x": np.zeros(2, np.uint8)}, str(plain))
    with pytest.raises(ArtifactError, match="not a grammarc artifact"):
        grammarc.load(plain)


def test_load_checks_the_tokenizer(saved, smollm2, bpe_tokenizer_json):
    grammarc.load(saved, tokenizer=smollm2)
    grammarc.load(saved, tokenizer="smollm2")
    with pytest.raises(ArtifactError, match="compiled for a vocabulary of 49152"):
        grammarc.load(saved, tokenizer=bpe_tokenizer_json)
    changed = list(smollm2.token_bytes)
    changed[1000] = b"something else"
    other = grammarc.Tokenizer.from_token_bytes(changed, smollm2.eos_token_ids)
    with pytest.raises(ArtifactError, match="fingerprint"):
        grammarc.load(saved, tokenizer=other)


@pytest.fixture(scope="module")
def saved_fsm(smollm2, tmp_path_factory) -> Path:
    """A state-machine artifact: it has the optional state names."""
    path = tmp_path_factory.mktemp("fsm") / "form.safetensors"
    grammarc.compile(Path(__file__).resolve().parents[2] / "grammars" /
                     "form-filling.fsm.yaml", smollm2).save(path)
    return path


def _set(tensors, name, change):
    arr = tensors[name].copy()
    change(arr)
    tensors[name] = arr


@pytest.mark.parametrize("edit,message", [
    (lambda m, t: _set(t, "state_name", lambda a: a.__setitem__(3, 5)), "state_name out of range"),
    (lambda m, t: _set(t, "state_name", lambda a: a.__setitem__(0, 0)),
     "the dead state 0 cannot have a name"),
    (lambda m, t: t.update(state_name=t["state_name"][:-1]), "state_name has the wrong length"),
    (lambda m, t: t.update(state_name=np.zeros(len(t["state_name"]), np.uint8)),
     "tensor state_name has dtype uint8"),
    (lambda m, t: t.pop("state_name"), "missing tensors: state_name"),
    (lambda m, t: m.pop("state_names"), "unexpected tensors: state_name"),
    (lambda m, t: m.update(state_names=["start", 3]), "state_names must be a list of strings"),
])
def test_hand_edited_state_names_are_rejected(saved_fsm, tmp_path, edit, message):
    grammarc.load(saved_fsm)
    out = tmp_path / "edited.safetensors"
    rewrite_artifact(saved_fsm, out, edit)
    with pytest.raises(ArtifactError, match=message):
        grammarc.load(out)


def test_npz_members_are_checked_before_anything_is_inflated(grammar, tmp_path, monkeypatch):
    import zipfile

    from grammarc.format import artifact

    npz = tmp_path / "g.npz"
    grammar.save(npz)
    with np.load(npz) as archive:
        arrays = {name: archive[name] for name in archive.files}
    compressed = tmp_path / "compressed.npz"
    np.savez_compressed(compressed, **arrays)
    assert grammarc.load(compressed).matches("2024-01-31")  # compressed, within the bound
    monkeypatch.setattr(artifact, "_MAX_INFLATED_BYTES", 100)
    with pytest.raises(ArtifactError, match=r"compressed members expand to [\d,]+ bytes, more "
                                            r"than 100 \(grammarc writes .npz uncompressed\)"):
        grammarc.load(compressed)
    odd = tmp_path / "odd.npz"
    with zipfile.ZipFile(odd, "w") as archive:
        archive.writestr("../escape.npy", b"")
    with pytest.raises(ArtifactError, match="unexpected member '../escape.npy'"):
        grammarc.load(odd)
    not_zip = tmp_path / "pickle.npz"
    not_zip.write_bytes(b"\x80\x04\x95garbage")
    with pytest.raises(ArtifactError, match=r"not an .npz archive \(not a zip file\)"):
        grammarc.load(not_zip)
