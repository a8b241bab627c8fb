"""Hostile inputs, issue 15, "smaller": a temporary file left by SIGTERM (and SIGHUP), errors located at
`?` or quoting a value wrongly, a directory given as a source, a non-zip `.npz` described as
pickled data. Each runs as a real command under a time and memory cap."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import assert_clean_error, compile_file, run_artifact_command, run_cli

import grammarc

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("signum", [signal.SIGTERM, getattr(signal, "SIGHUP", None)],
                         ids=["SIGTERM", "SIGHUP"])
def test_a_signal_while_writing_leaves_no_temporary_file(tmp_path, signum):
    """SIGTERM (issue 15) and SIGHUP (issue 43: the terminal closed) during the write of a
    large artifact once left `.NAME.XXXX.tmp` behind. The command starts with the signal's
    default disposition, as from a terminal: under `nohup` (SIGHUP ignored, which the command
    honours) the test run itself would otherwise decide the outcome."""
    for _ in range(5):  # the write may end before the signal (on a busy machine): again
        process = subprocess.Popen(
            [sys.executable, "-m", "grammarc", "compile",
             str(ROOT / "grammars" / "no-letter-e.regex"), "--tokenizer", "smollm2", "-q",
             "--layout", "dense", "-o", "big.safetensors"],
            cwd=tmp_path, stderr=subprocess.PIPE, text=True,
            preexec_fn=lambda: signal.signal(signum, signal.SIG_DFL))
        deadline = time.monotonic() + 300
        while not any(p.name.endswith(".tmp") for p in tmp_path.iterdir()) and \
                process.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        if process.poll() is None:
            process.send_signal(signum)
        _, stderr = process.communicate(timeout=60)
        names = [p.name for p in tmp_path.iterdir()]
        assert not any(name.endswith(".tmp") for name in names), (names, stderr)
        assert "Traceback" not in stderr
        if names == ["big.safetensors"]:  # written before the signal took effect: whole
            grammarc.load(tmp_path / "big.safetensors")  # (checksum checked)
            (tmp_path / "big.safetensors").unlink()
            continue
        assert process.returncode == 128 + signum, stderr
        assert names == []
        return
    pytest.fail("the write ended before the signal five times")


@pytest.mark.parametrize("schema,message", [
    ({"properties": {"a": 5}},
     "#/properties/a: invalid schema: 5 is not of type 'object', 'boolean'"),
    ({"items": {"minLength": "3"}}, "#/items/minLength: invalid schema: '3' is not of type "
                                    "'integer'"),
    ({"$defs": {"x": {"maxItems": -2}}}, "#/$defs/x/maxItems: invalid schema: -2 is less than "
                                         "the minimum of 0"),
])
def test_schema_errors_name_the_json_pointer_and_quote_the_value(tmp_path, schema, message):
    result = compile_file(tmp_path, "s.schema.json", json.dumps(schema))
    assert_clean_error(result, f"s.schema.json: {message}")


def test_a_directory_as_a_source_is_exit_1_like_a_missing_file(tmp_path):
    (tmp_path / "folder.regex").mkdir()
    for name in ("folder.regex", "missing.regex"):
        result = run_cli("compile", name, "--tokenizer", "smollm2", cwd=tmp_path, seconds=60)
        assert_clean_error(result, f"{name}: cannot read grammar file: ")
    assert [p.name for p in tmp_path.iterdir()] == ["folder.regex"]


@pytest.mark.parametrize("command", ["inspect", "verify", "check"])
def test_a_non_zip_npz_is_called_what_it_is(tmp_path, command):
    (tmp_path / "pickle.npz").write_bytes(b"\x80\x04\x95garbage")
    result = run_artifact_command(command, "pickle.npz", cwd=tmp_path)
    assert_clean_error(result, "pickle.npz: not an .npz archive (not a zip file)")
