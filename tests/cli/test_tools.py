"""`grammarc verify`, `inspect`, `check` and `sample`, run as real subprocesses."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_clean_error
from helpers import run_cli as run
from test_cli import ROOT

import grammarc

DATE = ROOT / "artifacts" / "iso-date.safetensors"
DATE_SOURCE = ROOT / "grammars" / "iso-date.regex"


def test_inspect_text_and_json():
    grammar = grammarc.load(DATE)
    text = run("inspect", str(DATE))
    assert text.returncode == 0, text.stderr
    assert "kind             regex (iso-date.regex)" in text.stdout
    assert f"{DATE.stat().st_size:,} bytes" in text.stdout
    assert "smollm2: 49,152 tokens, EOS 0, 2" in text.stdout
    assert "shortest string  10 tokens (+ EOS)" in text.stdout
    info = json.loads(run("inspect", str(DATE), "--json").stdout)
    assert info["states"] == grammar.num_states and info["kind"] == "regex"
    assert info["accepting_states"] == len(grammar.accepting_states) == 1
    assert info["tokenizer"]["vocab_size"] == 49152 and info["tokenizer"]["eos_token_ids"] == [0, 2]
    assert info["source"]["first_line"] == DATE_SOURCE.read_text().strip()
    counts = grammar.allowed_counts()[1:]
    assert info["allowed_tokens_per_state"] == {"min": int(counts.min()), "max": int(counts.max()),
                                                "median": float(np.median(counts))}
    assert info["shortest_accepted_tokens"] == 10 and info["file_size"] == DATE.stat().st_size


def test_verify_matching_tokenizer_and_source():
    result = run("verify", str(DATE), "--tokenizer", "smollm2", "--source", str(DATE_SOURCE))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"ok: {DATE} is intact and matches tokenizer smollm2")


def test_verify_another_tokenizer_and_an_edited_source_fail(tmp_path, bpe_tokenizer_json):
    edited = tmp_path / "iso-date.regex"
    edited.write_text(r"\d{4}-\d{2}-\d{2}" + "\n")
    result = run("verify", str(DATE), "--tokenizer", str(bpe_tokenizer_json), "--source", str(edited))
    assert result.returncode == 1 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0] == f"{DATE} does not match:"
    assert "  tokenizer.vocab_size: artifact 49152, given 6" in result.stdout
    assert any(line.startswith("  source_sha256: artifact 4f62c015b46d, given ") for line in lines)
    assert "  -" + DATE_SOURCE.read_text().strip() in lines and "  +" + r"\d{4}-\d{2}-\d{2}" in lines
    report = json.loads(run("verify", str(DATE), "--source", str(edited), "--json").stdout)
    assert report["ok"] is False and report["checked"] == ["integrity", "source"]
    assert [d["field"] for d in report["differences"]] == ["source_sha256"]


def test_verify_compares_the_vocabulary_under_the_artifacts_eos_ids(smollm2):
    grammar = grammarc.compile(r"\d{2}", smollm2.with_eos([2]), kind="regex")
    assert grammarc.runtime.tokenizer_mismatches(grammar, smollm2) == []  # its EOS ids are 0, 2
    edited = list(smollm2.token_bytes)
    edited[100] = b"changed"
    other = grammarc.Tokenizer.from_token_bytes(edited, [2])
    assert grammarc.runtime.tokenizer_mismatches(grammar, other) == [
        ("fingerprint", grammar.metadata["tokenizer"]["fingerprint"], other.fingerprint)]


def _damaged(tmp_path: Path, how: str) -> Path:
    data = bytearray(DATE.read_bytes())
    path = tmp_path / f"{how}.safetensors"
    if how == "truncated":
        data = data[: len(data) // 2]
    elif how == "flipped":
        for pos in random.Random(1).sample(range(len(data)), 20):
            data[pos] ^= 0xFF
    elif how == "header":
        data = (2**62).to_bytes(8, "little") + b"{}"
    else:  # a valid file that is not an artifact
        data = bytearray(b"not an artifact at all")
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("command,how", [
    (["inspect"], "truncated"), (["verify"], "flipped"), (["check", "-", "--json"], "header"),
    (["sample"], "garbage"),
])
def test_damaged_artifacts_are_one_line_errors(tmp_path, command, how):
    path = _damaged(tmp_path, how)
    result = run(command[0], str(path), *command[1:])
    assert_clean_error(result, str(path))
    assert result.stdout == ""


def test_check_text_in_and_out_of_the_language():
    ok = run("check", str(DATE), "2024-01-31")
    assert ok.returncode == 0 and ok.stdout == "ok: the text is in the language\n"
    bad = run("check", str(DATE), "2024-13-01")
    assert bad.returncode == 1 and bad.stderr == ""
    assert bad.stdout.splitlines() == ["no: unexpected '3' at character 7 (byte 6)",
                                       "  matched: '2024-1'", "  expected: one of [0-2]"]
    short = run("check", str(DATE), "2024-0")
    assert short.returncode == 1
    assert short.stdout.splitlines()[0] == "no: the text ended early; more must follow at character 7 (byte 6)"
    assert short.stdout.splitlines()[2] == "  expected: one of [1-9]"
    extra = run("check", str(DATE), "2024-01-31Z")
    assert extra.stdout.splitlines()[2] == "  expected: the end of the text"


def test_check_stdin_multiline_and_json():
    no_e = ROOT / "artifacts" / "no-letter-e.safetensors"
    result = run("check", str(no_e), "-", "--json", input="dés\nune")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report == {
        "ok": False, "mode": "text", "reason": "mismatch", "byte_offset": 7, "char_offset": 6,
        "line": 2, "column": 3, "matched": "dés\nun", "found": "e", "can_end": True,
        "expected": [["\x00", "D"], ["F", "d"], ["f", "\ud7ff"], ["\ue000", "\U0010ffff"]],
        "expected_text": report["expected_text"]}
    assert report["expected_text"].endswith(", or the end of the text")
    text = run("check", str(no_e), "-", input="dés\nune")
    assert text.stdout.splitlines()[0] == "no: unexpected 'e' at line 2, column 3 (byte 7)"
    raw_byte = run("check", str(ROOT / "artifacts" / "hiragana.safetensors"), "あい\udcff")
    assert raw_byte.stdout.splitlines()[0] == "no: a byte that is not UTF-8 at character 3 (byte 6)"


def test_check_tokens(smollm2):
    ids = [smollm2.token_bytes.index(c.encode()) for c in "2024-01-31"]
    ok = run("check", str(DATE), "--tokens", ",".join(map(str, ids + [0])))
    assert ok.returncode == 0 and ok.stdout == "ok: the token sequence is in the language\n"
    four = smollm2.token_bytes.index(b"4")
    bad = run("check", str(DATE), "--tokens", ",".join(map(str, ids[:9] + [four])), "--json")
    report = json.loads(bad.stdout)
    assert bad.returncode == 1 and report["reason"] == "forbidden_token"
    assert (report["token_index"], report["token_id"], report["token_text"]) == (9, four, "4")
    assert report["matched"] == "2024-01-3" and report["expected"] == [["0", "1"]]
    after = run("check", str(DATE), "--tokens", ",".join(map(str, ids + [0, ids[0]])),
                "--tokenizer", "smollm2")
    assert after.returncode == 1 and "comes after the end-of-sequence token" in after.stdout


@pytest.mark.parametrize("args,fragment", [
    (["check", str(DATE)], "either TEXT"),
    (["check", str(DATE), "x", "--tokenizer", "smollm2"], "only applies with --tokens"),
    (["check", str(DATE), "--tokens", "a,b"], "comma-separated token ids"),
])
def test_usage_errors(args, fragment):
    result = run(*args)
    assert result.returncode == 2 and fragment in result.stderr and "Traceback" not in result.stderr


def test_check_bad_input(bpe_tokenizer_json):
    assert_clean_error(run("check", str(DATE), "--tokens", "1,49152"), "token id 49152 is out of range")
    assert_clean_error(run("check", str(DATE), "--tokens", "1", "--tokenizer", str(bpe_tokenizer_json)),
                       "compiled for a vocabulary of 49152")


def test_sample_is_seeded_and_in_the_language():
    first = run("sample", str(DATE), "-n", "4", "--seed", "11")
    again = run("sample", str(DATE), "-n", "4", "--seed", "11")
    assert first.returncode == 0 and first.stdout == again.stdout
    lines = first.stdout.splitlines()
    grammar = grammarc.load(DATE)
    assert len(lines) == 4 and all(grammar.matches(line) for line in lines)
    assert_clean_error(run("sample", str(DATE), "--max-tokens", "10"),
                       "no string of the language fits in 10 tokens: the shortest takes 10 tokens")


def test_sample_needs_a_tokenizer_it_can_load(tmp_path, bpe_tokenizer_json):
    folder = tmp_path / "tok"
    shutil.copytree(bpe_tokenizer_json.parent, folder)
    artifact = tmp_path / "yes-no.npz"
    grammarc.compile("yes|no", str(folder), kind="regex").save(artifact)
    shutil.rmtree(folder)  # the tokenizer named in the artifact is gone
    assert_clean_error(run("sample", str(artifact)),
                       f"(the tokenizer named in {artifact}); pass --tokenizer")
    given = run("sample", str(artifact), "--tokenizer", str(bpe_tokenizer_json), "-n", "3")
    assert given.returncode == 0 and set(given.stdout.split()) <= {"yes", "no"}


def test_the_command_line_starts_without_the_compile_side():
    """Only compiling loads the compiled core, the front ends' parsers and the tokenizers:
    the tools that read artifacts start without them."""
    code = ("import sys, grammarc.cli; loaded = {'grammarc._core', 'lark', 'tokenizers', "
            "'torch'} & set(sys.modules); assert not loaded, loaded")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_check_counts_tokens_in_words():
    from grammarc.cli.artifact_commands import _count

    assert _count(1, "token") == "1 token is"
    assert _count(0, "token") == "0 tokens are" and _count(12345, "token") == "12,345 tokens are"
