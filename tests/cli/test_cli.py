"""The command line, run as a real subprocess: outputs, exit codes and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import assert_clean_error
from helpers import run_cli as run

import grammarc

ROOT = Path(__file__).resolve().parents[2]


def test_version():
    result = run("--version")
    assert result.returncode == 0 and grammarc.__version__ in result.stdout


def test_compile_regex_on_smollm2(tmp_path):
    out = tmp_path / "date.safetensors"
    result = run("compile", "--regex", r"\d{4}-\d{2}-\d{2}", "--tokenizer", "smollm2", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "wrote" in result.stderr and "12 states" in result.stderr
    grammar = grammarc.load(out)
    assert grammar.matches("2024-01-31") and grammar.eos_token_ids == (0, 2)


def test_compile_file_with_tokenizer_json_to_npz(tmp_path, bpe_tokenizer_json):
    out = tmp_path / "date.npz"
    result = run("compile", str(ROOT / "grammars" / "iso-date.regex"), "--tokenizer",
                 str(bpe_tokenizer_json), "-o", str(out), "--quiet")
    assert result.returncode == 0 and result.stderr == ""
    grammar = grammarc.load(out, tokenizer=bpe_tokenizer_json)
    assert grammar.metadata["source_name"] == "iso-date.regex"
    assert grammar.source == (ROOT / "grammars" / "iso-date.regex").read_text().rstrip("\n")


def test_default_output_name_layout_and_eos(tmp_path):
    (tmp_path / "yes-no.regex").write_text("yes|no\n")
    result = run("compile", "yes-no.regex", "--tokenizer", "smollm2", "--eos", "2",
                 "--layout", "csr", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    grammar = grammarc.load(tmp_path / "yes-no.safetensors")
    assert grammar.eos_token_ids == (2,) and grammar.metadata["layout"] == "csr"
    assert grammar.source == "yes|no"


@pytest.mark.parametrize("args,fragment", [
    (["--regex", "ab(c"], "1:3: invalid regex: missing ), unterminated subpattern"),
    (["--regex", "(a(?=b))+"], "1:3: unsupported regex construct: lookahead"),
    (["--regex", "a(?=b)"], "matches no string"),
    (["--regex", "[^\\x00-\\U0010ffff]"], "matches no string"),
    (["--regex", "a", "--tokenizer", "no-such-tokenizer"], "no-such-tokenizer"),
    (["--regex", "a", "--tokenizer", "/nonexistent/tokenizer.json"], "not found"),
    (["--regex", "a", "--eos", "999999"], "999999"),
    (["--regex", "a", "-o", "out.bin"], "unknown artifact type"),
    (["--regex", "a", "-o", "blocker/out.safetensors"], "cannot write"),
    (["missing.regex"], "cannot read grammar file"),
    (["binary.regex"], "not UTF-8"),
    (["grammar.lark"], "grammar.lark:1:12: invalid Lark grammar: unexpected token ')'"),
    (["grammar.txt"], "cannot tell the grammar kind"),
    ([str(ROOT / "grammars" / "event.schema.json"), "--layout", "dense", "-o", "e.safetensors"],
     "--layout dense: the grammar compiles to machines linked by calls"),
])
def test_bad_input_is_one_line_exit_1(tmp_path, args, fragment):
    (tmp_path / "blocker").write_text("a file, not a folder")
    (tmp_path / "binary.regex").write_bytes(b"\xff\xfe")
    (tmp_path / "grammar.lark").write_text('start: "a" )\n')
    (tmp_path / "grammar.txt").write_text("a\n")
    full = ["compile", *args]
    if "--tokenizer" not in args:
        full += ["--tokenizer", "smollm2"]
    if "-o" not in args and args[0] == "--regex":
        full += ["-o", "out.safetensors"]
    result = run(*full, cwd=tmp_path)
    assert_clean_error(result, fragment)
    leftovers = sorted(p.name for p in tmp_path.iterdir())
    assert leftovers == ["binary.regex", "blocker", "grammar.lark", "grammar.txt"]


def test_a_byte_order_mark_is_dropped(tmp_path):
    """As RFC 8259 allows (and Windows editors write one): the grammar, its recorded source
    and its error positions are those of the text after the mark."""
    for name, text in (("s.schema.json", '{"type": "string", "maxLength": 3}'),
                       ("d.regex", "[0-9]{2}")):
        (tmp_path / name).write_bytes(b"\xef\xbb\xbf" + text.encode())
        result = run("compile", name, "--tokenizer", "smollm2", "-o", "out.safetensors",
                     cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert grammarc.load(tmp_path / "out.safetensors").source == text
    (tmp_path / "bad.regex").write_bytes(b"\xef\xbb\xbfab(c")
    result = run("compile", "bad.regex", "--tokenizer", "smollm2", cwd=tmp_path)
    assert_clean_error(result, "bad.regex:1:3: invalid regex: missing )")
    (tmp_path / "bad.regex").write_bytes(b"\xef\xbb\xbfab\xff")
    result = run("compile", "bad.regex", "--tokenizer", "smollm2", cwd=tmp_path)
    assert_clean_error(result, "bad.regex: not UTF-8 text (byte 5)")  # counted in the file


def test_regex_error_position_in_a_file(tmp_path):
    (tmp_path / "bad.regex").write_text("(?x)\n  abc\n  (?<=x)d\n")
    result = run("compile", "bad.regex", "--tokenizer", "smollm2", cwd=tmp_path)
    assert_clean_error(result, "bad.regex:3:3: unsupported regex construct: lookbehind")


@pytest.mark.parametrize("args,fragment", [
    (["compile", "--tokenizer", "smollm2"], "either a SOURCE file or --regex"),
    (["compile", "x.regex", "--regex", "a", "--tokenizer", "smollm2"], "either a SOURCE"),
    (["compile", "--regex", "a", "--tokenizer", "smollm2"], "--regex needs -o"),
    (["compile", "--regex", "a"], "Missing option '--tokenizer'"),
    (["compile", "--regex", "a", "--tokenizer", "smollm2", "-o", "x.npz", "--eos", "x"],
     "comma-separated token ids"),
    (["compile", "--bogus"], "No such option"),
    (["frobnicate"], "No such command"),
])
def test_usage_errors_exit_2(tmp_path, args, fragment):
    result = run(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert fragment in result.stderr and "Traceback" not in result.stderr


def test_help_documents_exit_codes():
    result = run("--help")
    assert result.returncode == 0 and "Exit codes: 0 success, 1 bad input" in result.stdout
