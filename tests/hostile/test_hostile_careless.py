"""Hostile and careless inputs, issue 43: numbers too long for Python's int conversion, manifest
templates and outputs, the build / --check cycle on call grammars, misspelt options and
keywords, signals, the serving surface and a newcomer's first commands. Each runs as a user
runs it: the command line in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import assert_clean_error, compile_file, run_cli

import grammarc
from grammarc.format.artifact import read_artifact
from grammarc.frontends.json_schema.strings import COUNTED_LENGTH

ROOT = Path(__file__).resolve().parents[2]

HUGE = "9" * 5000  # past Python's 4,300-digit limit on int <-> str conversions
TOO_LONG = "a number of more than 4,300 digits (grammarc's limit)"
WRITTEN_OUT = "has more than 4,300 digits written out (grammarc's limit)"


@pytest.mark.parametrize("name,source,message", [
    ("a.regex", f"a{{{HUGE}}}", "a.regex:1:2: invalid regex: the repetition number is too large"),
    ("a.regex", f"a{{2,{HUGE}}}", "a.regex:1:2: invalid regex: the repetition number is too large"),
    ("a.lark", f"start: A\nA: /a{{{HUGE}}}/\n", f"a.lark:2:7: invalid Lark grammar: {TOO_LONG}"),
    ("a.lark", f'start: "a"~{HUGE}\n', f"a.lark:1:12: invalid Lark grammar: {TOO_LONG}"),
    ("a.gbnf", f'root ::= "a"{{{HUGE}}}\n', f"a.gbnf:1:13: repetition count: {TOO_LONG}"),
    ("a.gbnf", f'root ::= "a"{{1,{HUGE}}}\n', f"a.gbnf:1:13: repetition count: {TOO_LONG}"),
    ("a.fsm.yaml", f"start: {HUGE}\naccept: [a]\nstates:\n  a: []\n",
     f"a.fsm.yaml:1:8: invalid YAML: {TOO_LONG}"),
    ("a.fsm.json", f'{{"start": {HUGE}, "accept": ["a"], "states": {{"a": []}}}}',
     f"a.fsm.json:1:11: invalid JSON: the number 99999999999999999999... {WRITTEN_OUT}"),
    ("a.fsm.yaml", f'start: a\naccept: [a]\nstates:\n  a:\n    - {{to: a, regex: "x{{{HUGE}}}"}}\n',
     "a.fsm.yaml:5:7: a transition of state 'a': invalid regex: the repetition number is too "
     "large"),
    *[("s.schema.json", schema, f"s.schema.json:1:{column}: invalid JSON: the number {shown} "
       f"{WRITTEN_OUT}") for schema, column, shown in [
        (f'{{"type": "integer", "maximum": {HUGE}}}', 32, "99999999999999999999..."),
        (f'{{"type": "integer", "maximum": -{HUGE}.5}}', 32, "-9999999999999999999..."),
        (f'{{"enum": [1, {HUGE}]}}', 14, "99999999999999999999..."),
        ('{"type": "integer", "minimum": 1e5000}', 32, "1e5000"),
        ('{"type": "number", "multipleOf": 1e-5000}', 34, "1e-5000"),
        ('{"const": 1e999999999}', 11, "1e999999999"),  # once an endless int(Decimal(...))
    ]],
    ("s.schema.json", f'{{"type": "string", "pattern": "^a{{{HUGE}}}$"}}',
     "}$': invalid regex: the repetition number is too large"),
])
def test_numbers_past_pythons_digit_limit_are_one_line_errors(tmp_path, name, source, message):
    """Once `ValueError: Exceeds the limit (4300 digits) for integer string conversion`."""
    result = compile_file(tmp_path, name, source)
    assert_clean_error(result, message)
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_a_number_past_the_digit_limit_in_a_manifest_is_a_one_line_error(tmp_path):
    (tmp_path / "a.regex").write_text("a")
    (tmp_path / "grammarc.toml").write_text(
        f'[[artifact]]\nsource = "a.regex"\noutput = "a.safetensors"\ntokenizer = "smollm2"\n'
        f"max_depth = {HUGE}\n")
    for flags in ([], ["--check"]):
        result = run_cli("build", *flags, cwd=tmp_path, seconds=60)
        assert_clean_error(result, f"grammarc.toml:5:13: invalid TOML: {TOO_LONG}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.regex", "grammarc.toml"]


def write_manifest(folder: Path, *entries: tuple[str, str]) -> None:
    """A grammarc.toml of `[[artifact]]` entries `(source, output)`, all for SmolLM2."""
    (folder / "grammarc.toml").write_text("".join(
        f'[[artifact]]\nsource = "{source}"\noutput = "{output}"\ntokenizer = "smollm2"\n'
        for source, output in entries))


@pytest.mark.parametrize("template", [
    "{stem.foo}", "{stem[x]}", "{stem:>5000}", "{stem.__class__}", "{stem!r}", "{}", "{0}",
    "{name}", "{tokenizer.__doc__}"])
def test_output_templates_take_plain_placeholders_only(tmp_path, template):
    """`str.format` once ran them: tracebacks, an OSError, a file named after a class."""
    (tmp_path / "a.regex").write_text("a")
    write_manifest(tmp_path, ("a.regex", f"out/{template}.safetensors"))
    for flags in ([], ["--check"]):
        result = run_cli("build", *flags, cwd=tmp_path, seconds=60)
        assert_clean_error(result, f"grammarc.toml: [[artifact]] 1: bad 'output' template "
                                   f"'out/{template}.safetensors': {template} is not a "
                                   "placeholder; placeholders are plain {stem} and {tokenizer}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.regex", "grammarc.toml"]


def test_output_templates_keep_escaped_braces(tmp_path):
    (tmp_path / "a.regex").write_text("a")
    write_manifest(tmp_path, ("a.regex", "out/{{x}}-{stem}-{tokenizer}.safetensors"))
    result = run_cli("build", cwd=tmp_path, seconds=60)
    assert result.returncode == 0, result.stderr
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["{x}-a-smollm2.safetensors"]


@pytest.mark.parametrize("entries,message", [
    ([("a.regex", "x/../o.safetensors"), ("b.regex", "o.safetensors")],
     "[[artifact]] 2: output o.safetensors is the output of [[artifact]] 1 too"),
    ([("a.regex", "o.safetensors"), ("b.regex", "./sub/../o.safetensors")],
     "[[artifact]] 2: output o.safetensors is the output of [[artifact]] 1 too"),
])
def test_two_artifacts_with_one_output_are_refused_after_normalising(tmp_path, entries, message):
    """Once built into one file, one of them stale forever."""
    for name in ("a", "b"):
        (tmp_path / f"{name}.regex").write_text(name)
    write_manifest(tmp_path, *entries)
    result = run_cli("build", cwd=tmp_path, seconds=60)
    assert_clean_error(result, f"grammarc.toml: {message}")
    assert not (tmp_path / "o.safetensors").exists()


def test_a_glob_into_one_output_is_refused(tmp_path):
    for name in ("a", "b"):
        (tmp_path / f"{name}.regex").write_text(name)
    (tmp_path / "grammarc.toml").write_text(
        '[[artifact]]\nsources = "*.regex"\noutput = "o.safetensors"\ntokenizer = "smollm2"\n')
    result = run_cli("build", cwd=tmp_path, seconds=60)
    assert_clean_error(result, "grammarc.toml: [[artifact]] 1: output o.safetensors would be "
                               "written twice (tell them apart with {stem} or {tokenizer})")


def test_build_then_check_passes_for_call_grammars_and_fails_after_an_edit(tmp_path):
    """Artifacts of format versions 2 and 3 were stale right after `grammarc build`
    ("format_version: artifact 2, manifest 1") and rebuilt every time."""
    for name in ("tree.schema.json", "json-value.gbnf"):
        shutil.copy(ROOT / "grammars" / name, tmp_path / name)
    counted = {"type": "object", "properties": {"note": {
        "type": "string", "minLength": COUNTED_LENGTH + 2}}, "required": ["note"]}
    (tmp_path / "note.schema.json").write_text(json.dumps(counted))
    write_manifest(tmp_path, *[(name, "out/{stem}.safetensors") for name in
                               ("tree.schema.json", "json-value.gbnf", "note.schema.json")])
    result = run_cli("build", cwd=tmp_path, seconds=120)
    assert result.returncode == 0 and result.stdout.endswith("3 built\n"), result.stdout
    versions = {p.name: read_artifact(p).metadata["format_version"]
                for p in (tmp_path / "out").iterdir()}
    assert versions == {"tree.safetensors": 2, "json-value.safetensors": 2,
                        "note.safetensors": 3}
    for flags in (["--check"], []):  # fresh: checked clean, and not rebuilt
        result = run_cli("build", *flags, cwd=tmp_path, seconds=120)
        assert result.returncode == 0 and result.stdout.endswith("3 up to date\n"), result.stdout
    with open(tmp_path / "json-value.gbnf", "a") as handle:
        handle.write("# edited\n")
    result = run_cli("build", "--check", cwd=tmp_path, seconds=120)
    assert result.returncode == 1
    assert "stale       out/json-value.safetensors: source_sha256: artifact" in result.stdout
    assert result.stdout.endswith("2 up to date, 1 stale; run grammarc build\n"), result.stdout


PERSON = ROOT / "grammars" / "person.schema.json"


@pytest.mark.parametrize("style,message", [
    ("compcat", "--whitespace 'compcat': not a style (default, compact, flexible) (did you mean "
                "'compact'?), and a regex of whitespace must match JSON whitespace only (space, "
                "tab, \\n, \\r); this one matches 'a'"),
    ("flexibel", "(did you mean 'flexible'?)"),
    ("x*", "--whitespace 'x*': not a style (default, compact, flexible), and a regex of "
           "whitespace must match"),
    (r"\s*", "this one matches '\\x0b'"),  # vertical tab: not JSON whitespace
    (" |é", "this one matches a non-ASCII character"),
])
def test_a_whitespace_style_that_is_not_one_and_not_whitespace_is_refused(tmp_path, style,
                                                                          message):
    """`compcat` was taken as a regex: exit 0, every sample `{compcat"name"compcat:...`."""
    result = run_cli("compile", str(PERSON), "--tokenizer", "smollm2", "-o", "o.safetensors",
                     "--whitespace", style, cwd=tmp_path, seconds=60)
    assert_clean_error(result, message)
    assert list(tmp_path.iterdir()) == []


def test_a_whitespace_regex_of_json_whitespace_is_used(tmp_path):
    result = run_cli("compile", str(PERSON), "--tokenizer", "smollm2", "-o", "o.safetensors",
                     "-q", "--whitespace", "[ \t]{0,2}", cwd=tmp_path, seconds=60)
    assert result.returncode == 0, result.stderr
    grammar = grammarc.load(tmp_path / "o.safetensors")
    assert grammar.matches('{ "name":"Ada",\t"age" :36}')
    assert not grammar.matches('{"name":   "Ada", "age": 36}')


def test_near_misses_of_schema_keywords_get_a_notice_with_their_pointer(tmp_path):
    """`requird`, `maximun` vanished without a word; `propertes` with additionalProperties
    false said only that the schema accepts no value at all."""
    schema = {"type": "object", "propertes": {"a": {"type": "integer"}},
              "properties": {"b": {"type": "integer", "maximun": 3, "Type": "string",
                                   "itmes": {}, "x-maximum": 1, "tsType": "number",
                                   "example": 2, "markdownDescription": "b"}},
              "requird": ["b"]}
    def compile_noisily(name: str, schema: dict):  # compile_file's -q silences notices
        (tmp_path / name).write_text(json.dumps(schema))
        return run_cli("compile", name, "--tokenizer", "smollm2", "-o", "o.safetensors",
                       cwd=tmp_path, seconds=60)

    result = compile_noisily("s.schema.json", schema)
    assert result.returncode == 0, result.stderr
    assert sorted(line for line in result.stderr.splitlines() if "notice" in line) == [
        f"notice: unknown keyword {key!r} at {pointer} is ignored; did you mean {known!r}?"
        for key, pointer, known in sorted([
            ("Type", "#/properties/b/Type", "type"),
            ("itmes", "#/properties/b/itmes", "items"),
            ("maximun", "#/properties/b/maximun", "maximum"),
            ("propertes", "#/propertes", "properties"),
            ("requird", "#/requird", "required")])]
    closed = {"propertes": {"a": {}}, "additionalProperties": False, "required": ["a"]}
    result = compile_noisily("closed.schema.json", closed)
    assert "notice: unknown keyword 'propertes' at #/propertes is ignored; did you mean " \
           "'properties'?" in result.stderr


# ------------------------------------------------------------------ the serving surface
# grammarc.integrations.served is what the vLLM processor does with the paths and stop ids a
# client sends; it runs without vLLM (tests/integrations/test_vllm.py drives it in a real engine).
def served_project(tmp_path: Path, smollm2) -> tuple[Path, Path, Any]:
    """A served folder with an artifact, a link to one outside and a README; a folder beside
    it with another artifact; and an empty cache."""
    from grammarc.integrations.served import ArtifactCache

    served, private = tmp_path / "served", tmp_path / "private"
    for folder in (served, private):
        folder.mkdir()
        grammarc.compile("[0-9]+", smollm2, "regex").save(folder / "digits.safetensors")
    (served / "README.md").write_text("not an artifact")
    (served / "link.safetensors").symlink_to(private / "digits.safetensors")
    return served, private, ArtifactCache()


def test_only_artifacts_in_the_served_directories_are_loaded(tmp_path, smollm2, monkeypatch):
    from grammarc.integrations.served import ARTIFACT_DIRS_ENV, served_dirs

    served, private, cache = served_project(tmp_path, smollm2)
    dirs = served_dirs([str(served)])
    for path in ("digits.safetensors", str(served / "digits.safetensors"),
                 "sub/../digits.safetensors"):
        assert cache.get(path, None, dirs).matches("123")
    refused = ["../private/digits.safetensors", str(private / "digits.safetensors"),
               "link.safetensors", "missing.safetensors", "README.md", "/etc/passwd", ".",
               "/dev/zero", str(served)]
    for path in refused:  # one message, whether the file exists or not
        with pytest.raises(ValueError) as refusal:
            cache.get(path, None, dirs)
        assert str(refusal.value) == f"grammarc: artifact {path!r} is not served here (the " \
            "server's GRAMMARC_ARTIFACT_DIRS lists the directories it serves)"
    # the setting, else the environment variable, else the working directory
    monkeypatch.setenv(ARTIFACT_DIRS_ENV, f"{private}{os.pathsep}{tmp_path / 'none'}")
    assert served_dirs() == (str(private.resolve()), str((tmp_path / "none").resolve()))
    assert cache.get("digits.safetensors").matches("1")
    assert served_dirs([str(served)]) == (str(served.resolve()),)
    monkeypatch.delenv(ARTIFACT_DIRS_ENV)
    monkeypatch.chdir(served)
    assert served_dirs() == (str(served.resolve()),)
    with pytest.raises(ValueError, match="not served here"):
        cache.get(str(private / "digits.safetensors"))


def test_stop_ids_outside_the_vocabulary_are_refused_and_never_index_the_bitmask(smollm2):
    """A request whose matcher is gone may pick its stop ids only; the client's ids went into
    the bitmask unchecked (70,000: an IndexError that stopped the engine; -1: a wrong bit)."""
    from types import SimpleNamespace

    import numpy as np

    from grammarc.integrations.served import ServedRequest, check_stop_ids
    from grammarc.runtime import bitmask_width

    grammar = grammarc.compile("[0-9]+", smollm2, "regex")
    vocab = grammar.vocab_size
    for bad in (70_000, -1, vocab):
        with pytest.raises(ValueError, match=f"stop token id {bad} is outside the vocabulary "
                                             f"\\(0 to {vocab - 1}\\)"):
            check_stop_ids(SimpleNamespace(stop_token_ids=[2, bad]), grammar)
    check_stop_ids(SimpleNamespace(stop_token_ids=[0, 2, vocab - 1]), grammar)
    width = bitmask_width(vocab)
    for stops, allowed in [((-1, 2, 70_000), [2]), ((-1, 70_000), list(range(32 * width))),
                           ((5, vocab - 1), [5, vocab - 1])]:
        words = np.full(width, 7, np.int32)
        ServedRequest(None, [], (), stops).fill(words, vocab)
        bits = np.unpackbits(words.view(np.uint8), bitorder="little")
        assert np.flatnonzero(bits).tolist() == allowed


# ------------------------------------------------------------------ newcomer potholes
def test_an_ambiguous_state_machine_error_has_a_line_and_column(tmp_path):
    spec = ('start: a\naccept: [c]\nstates:\n  a:\n    - {to: b, text: "x"}\n'
            '    - {to: c, regex: "x[0-9]"}\n  b:\n    - {to: c, regex: "[0-9]+;"}\n  c: []\n')
    result = compile_file(tmp_path, "f.fsm.yaml", spec)
    assert_clean_error(result, "f.fsm.yaml:5:5: ambiguous state machine: after 'x' the state "
                               "could be 'a' or 'b'")


def test_an_output_in_a_missing_directory_says_it_does_not_exist(tmp_path):
    (tmp_path / "a.regex").write_text("a")
    (tmp_path / "file").write_text("")
    for output, what in [("missing/dir/x.safetensors", "does not exist (create it first, e.g. "
                                                       "mkdir -p)"),
                         ("file/x.safetensors", "is not a directory")]:
        result = run_cli("compile", "a.regex", "--tokenizer", "smollm2", "-o", output,
                         cwd=tmp_path, seconds=60)
        assert_clean_error(result, f"cannot write {output}: the directory "
                                   f"{output.rsplit('/', 1)[0]} {what}")


def test_check_reads_stdin_byte_for_byte_as_its_help_says(tmp_path):
    assert compile_file(tmp_path, "d.regex", r"\d{4}").returncode == 0
    assert run_cli("check", "out.safetensors", "-", input="2024", cwd=tmp_path).returncode == 0
    result = run_cli("check", "out.safetensors", "-", input="2024\n", cwd=tmp_path)
    assert result.returncode == 1 and result.stdout.startswith("no: unexpected '\\n'")
    assert "stdin is taken byte for byte" in run_cli("check", "--help").stdout


def test_generate_checks_the_artifact_against_the_model_before_loading_it(tmp_path,
                                                                          bpe_tokenizer_json):
    """The vocabulary check came after the model load (20 s), which was silent."""
    pytest.importorskip("transformers", reason="grammarc generate needs the hf extra")
    artifact = tmp_path / "other.safetensors"
    grammarc.compile("[a-z]+", grammarc.load_tokenizer(bpe_tokenizer_json.parent),
                     "regex").save(artifact)
    result = run_cli("generate", str(artifact), "--prompt", "x", seconds=15)
    assert_clean_error(result, f"{artifact}: compiled for")
    assert "loading model" not in result.stderr


def test_the_command_of_a_runtime_only_install_says_what_to_install():
    """`pip install --no-deps grammarc-*.whl numpy safetensors` gives a `grammarc` command
    that died with `ModuleNotFoundError: click`. Run as the command's entry point runs it
    (pyproject's [project.scripts]), with click absent."""
    import subprocess
    import sys
    import tomllib

    script = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = script["grammarc"].split(":")
    code = (f"import sys; sys.modules['click'] = None; sys.argv = ['grammarc', 'inspect', 'x']; "
            f"from {module} import {function}; {function}()")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, timeout=60)
    assert_clean_error(result, "the grammarc command needs click, which is not installed")
