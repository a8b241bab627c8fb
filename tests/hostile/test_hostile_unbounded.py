"""Hostile inputs, issue 15, "unbounded time or memory that --max-states does not stop":
sources that took minutes or gigabytes, and artifacts that made the reader allocate what a
forged header asked for. Each runs as the attacker ran it, under a time and memory cap far
above what it needs now, so a regression fails instead of hanging or swapping."""

from __future__ import annotations

import json
import zipfile

import pytest
from helpers import assert_clean_error, compile_file, rewrite_artifact, run_artifact_command

import grammarc

INT64 = (-(2 ** 63), 2 ** 63 - 1)


@pytest.mark.parametrize("lo,hi", [(0, 10 ** 16), (0, 10 ** 18), INT64])
def test_integer_ranges_compile_in_states_linear_in_digits(tmp_path, lo, hi):
    """Once 44 s for 10**16 and 7.7 GB then MemoryError for int64."""
    schema = {"type": "integer", "minimum": lo, "maximum": hi}
    result = compile_file(tmp_path, "s.schema.json", json.dumps(schema), memory_gb=2)
    assert result.returncode == 0, result.stderr
    grammar = grammarc.load(tmp_path / "out.safetensors")
    assert grammar.num_states < 200
    for value in (lo, hi, (lo + hi) // 2, 10 ** 15 + 7):
        assert grammar.matches(str(value)), value
    for value in (lo - 1, hi + 1, 10 * hi):
        assert not grammar.matches(str(value)), value


@pytest.mark.parametrize("name,source,members,strangers", [
    ("enum10k.schema.json", json.dumps({"enum": [f"w{i}" for i in range(10_000)]}),
     ['"w0"', '"w9999"', '"w5000"'], ['"w10000"', '"w"', "w1"]),
    ("enum50k.schema.json", json.dumps({"enum": [f"w{i}" for i in range(50_000)]}),
     ['"w0"', '"w49999"'], ['"w50000"', '"w01"']),
    ("words.regex", "|".join(f"w{i}x" for i in range(20_000)), ["w0x", "w19999x"],
     ["w20000x", "w0", "wx"]),
])
def test_long_enums_and_alternations_compile_in_bounded_time(tmp_path, name, source, members,
                                                             strangers):
    """Once 40 s for 10k strings and over 200 s for 50k (a list search per option)."""
    result = compile_file(tmp_path, name, source, seconds=60, memory_gb=4)
    assert result.returncode == 0, result.stderr
    grammar = grammarc.load(tmp_path / "out.safetensors")
    assert all(grammar.matches(text) for text in members)
    assert not any(grammar.matches(text) for text in strangers)


def test_a_long_literal_is_linear(tmp_path):
    """A 100,000-character regex literal once took 62 s (a prefix scan per character)."""
    literal = "ab" * 50_000
    result = compile_file(tmp_path, "long.regex", literal, seconds=60)
    assert_clean_error(result, "long.regex: the automaton needs 100,002 DFA states, more than "
                               "--max-states 100,000")
    result = compile_file(tmp_path, "long.regex", literal, "--max-states", "200000",
                          seconds=60)
    assert result.returncode == 0, result.stderr
    grammar = grammarc.load(tmp_path / "out.safetensors")
    assert grammar.matches(literal) and not grammar.matches(literal[:-1])


def test_max_states_cannot_ask_for_more_memory_than_there_is(tmp_path):
    """`--max-states 5000000` on an exponential DFA once died of MemoryError at 5.4 GB after
    96 s: the bound now shrinks to what the address space allows, before allocating."""
    result = compile_file(tmp_path, "blowup.regex", "(a|b)*a(a|b){25}", "--max-states",
                          "5000000", seconds=120, memory_gb=3)
    assert_clean_error(result, "blowup.regex: determinising needs more than")
    assert "bounded by half the memory available" in result.stderr


# ------------------------------------------------------------------------------ artifacts
@pytest.fixture(scope="module")
def artifact(tmp_path_factory) -> object:
    folder = tmp_path_factory.mktemp("artifact")
    assert compile_file(folder, "date.regex", r"\d{4}-\d{2}-\d{2}").returncode == 0
    return folder / "out.safetensors"


@pytest.mark.parametrize("command", ["inspect", "verify", "check"])
def test_a_forged_vocabulary_size_allocates_nothing(artifact, tmp_path, command):
    """A 1.6 KB file with a valid checksum once allocated 15 GiB in `verify` and `inspect`:
    the size is checked before anything is built."""
    forged = tmp_path / "forged.safetensors"
    rewrite_artifact(artifact, forged, lambda m, t: m["tokenizer"].update(vocab_size=2 ** 32))
    result = run_artifact_command(command, forged, memory_gb=2)
    assert_clean_error(result, "forged.safetensors: tokenizer.vocab_size 4,294,967,296 is "
                               "larger than any vocabulary")


@pytest.fixture(scope="module")
def bomb(tmp_path_factory):
    """An .npz whose one member deflates from 14 MB to 3 GiB of zeros."""
    path = tmp_path_factory.mktemp("bomb") / "bomb.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive, \
            archive.open("token_class.npy", "w", force_zip64=True) as member:
        chunk = bytes(1 << 24)
        for _ in range(3 * 64):
            member.write(chunk)
    return path


@pytest.mark.parametrize("command", ["inspect", "verify", "check"])
def test_a_compressed_npz_is_refused_before_it_is_inflated(bomb, command):
    result = run_artifact_command(command, bomb, seconds=30, memory_gb=1)
    assert_clean_error(result, "bomb.npz: its compressed members expand to 3,221,225,472 "
                               "bytes, more than 1,073,741,824")

