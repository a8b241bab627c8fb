"""`grammarc build`: manifests, incremental builds, `--check` for CI, reproducible outputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import assert_clean_error
from helpers import run_cli as run

import grammarc
from grammarc.format.artifact import read_artifact, write_artifact
from grammarc.cli.build import read_manifest
from grammarc.errors import GrammarcError

GRAMMARS = {"a": "[a-c]{1,4}", "b": r"\d{2}", "c": "yes|no", "d": "(?i)true|false", "e": "x+y"}
MANIFEST = """
[tokenizers]
bpe = "models/bpe"

[defaults]
tokenizer = "bpe"

[[artifact]]
sources = "grammars/*.regex"
output = "out/{stem}-{tokenizer}.safetensors"

[[artifact]]
source = "grammars/a.regex"
output = "out/a-csr.npz"
layout = "csr"
max_depth = 2
"""
OUTPUTS = ["a-bpe.safetensors", "a-csr.npz", "b-bpe.safetensors", "c-bpe.safetensors",
           "d-bpe.safetensors", "e-bpe.safetensors"]


def make_project(folder: Path, tokenizer_json: Path) -> Path:
    """Example grammars, a tokenizer folder and a manifest; returns the manifest path."""
    (folder / "grammars").mkdir(parents=True)
    for name, pattern in GRAMMARS.items():
        (folder / "grammars" / f"{name}.regex").write_text(pattern + "\n")
    shutil.copytree(tokenizer_json.parent, folder / "models" / "bpe")
    manifest = folder / "grammarc.toml"
    manifest.write_text(MANIFEST)
    return manifest


@pytest.fixture(scope="module")
def built(tmp_path_factory, bpe_tokenizer_json) -> Path:
    """A project built once by `grammarc build` run in its folder."""
    folder = tmp_path_factory.mktemp("built") / "project"
    make_project(folder, bpe_tokenizer_json)
    result = run("build", cwd=folder)
    assert result.returncode == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()] == ["built"] * 6 + ["6"]
    assert result.stdout.splitlines()[-1] == "6 built"
    return folder


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_built_artifacts_record_the_manifest_names(built, bpe_tokenizer_json):
    assert sorted(p.name for p in (built / "out").iterdir()) == OUTPUTS
    grammar = grammarc.load(built / "out" / "a-csr.npz", tokenizer=bpe_tokenizer_json)
    meta = grammar.metadata
    assert meta["tokenizer"]["name"] == "bpe" and meta["source_name"] == "a.regex"
    assert meta["layout"] == "csr" and meta["options"]["max_depth"] == 2
    assert grammar.matches("abca") and not grammar.matches("abcab")


def test_second_build_skips_everything(built, tmp_path):
    project = tmp_path / "project"
    shutil.copytree(built, project)
    before = snapshot(project)
    result = run("build", str(project / "grammarc.toml"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "6 up to date"
    assert f"up to date  {project / 'out' / 'a-bpe.safetensors'}" in result.stdout
    assert snapshot(project) == before  # not even rewritten


def test_builds_do_not_depend_on_where_the_project_is(built, tmp_path, bpe_tokenizer_json):
    elsewhere = tmp_path / "deeper" / "copy"
    manifest = make_project(elsewhere, bpe_tokenizer_json)
    result = run("build", str(manifest.relative_to(tmp_path)), "--json", cwd=tmp_path)
    report = json.loads(result.stdout)
    assert result.returncode == 0 and report["ok"] is True
    assert [a["status"] for a in report["artifacts"]] == ["built"] * 6
    for name in OUTPUTS:
        assert (elsewhere / "out" / name).read_bytes() == (built / "out" / name).read_bytes(), name


def _set_grammarc_version(path: Path, version: str) -> None:
    data = read_artifact(path)
    metadata = {k: v for k, v in data.metadata.items() if k != "checksum"}
    write_artifact(path, dict(metadata, grammarc_version=version), data.tensors)


def test_check_lists_stale_missing_and_damaged_artifacts_and_writes_nothing(built, tmp_path):
    project = tmp_path / "project"
    shutil.copytree(built, project)
    out = project / "out"
    (project / "grammars" / "b.regex").write_text(r"\d{3}" + "\n")
    (out / "c-bpe.safetensors").unlink()
    damaged = out / "d-bpe.safetensors"
    damaged.write_bytes(damaged.read_bytes()[:-10])
    manifest = project / "grammarc.toml"
    manifest.write_text(MANIFEST.replace("max_depth = 2", "max_depth = 3"))
    _set_grammarc_version(out / "a-bpe.safetensors", "0.0.1")
    before = snapshot(project)

    result = run("build", "--check", cwd=project)
    assert result.returncode == 1 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0] == ("stale       out/a-bpe.safetensors: grammarc_version: artifact '0.0.1', "
                        f"manifest {grammarc.__version__!r}")
    assert lines[1].startswith("stale       out/b-bpe.safetensors: source_sha256: artifact ")
    assert lines[2] == "missing     out/c-bpe.safetensors"
    assert lines[3].startswith("invalid     out/d-bpe.safetensors: not a readable grammarc artifact")
    assert lines[4] == "up to date  out/e-bpe.safetensors"
    assert lines[5] == "stale       out/a-csr.npz: options.max_depth: artifact 2, manifest 3"
    assert lines[6] == "1 up to date, 3 stale, 1 missing, 1 invalid; run grammarc build"
    report = json.loads(run("build", "--check", "--json", cwd=project).stdout)
    assert report["ok"] is False
    assert {Path(a["output"]).name: a["status"] for a in report["artifacts"]} == {
        "a-bpe.safetensors": "stale", "a-csr.npz": "stale", "b-bpe.safetensors": "stale",
        "c-bpe.safetensors": "missing", "d-bpe.safetensors": "invalid", "e-bpe.safetensors": "fresh"}
    assert snapshot(project) == before

    rebuilt = run("build", cwd=project)
    assert rebuilt.returncode == 0 and rebuilt.stdout.splitlines()[-1] == "5 built, 1 up to date"
    assert grammarc.load(out / "b-bpe.safetensors").matches("123")
    assert run("build", "--check", cwd=project).returncode == 0


@pytest.mark.parametrize("text,fragment", [
    ("[[artifact]]\nsource = 'g.regex'\noutput = 'o.safetensors'\n", "no tokenizer"),
    ("[[artifact]]\nsource = 'g.regex'\ntokenizer = 'smollm2'\n", "'output' (a path) is required"),
    ("[[artifact]]\noutput = 'o.safetensors'\ntokenizer = 'smollm2'\n", "either 'source'"),
    ("[[artifact]]\nsources = 'nothing/*.regex'\noutput = 'o.safetensors'\ntokenizer = 'x'\n",
     "no file matches"),
    ("[[artifact]]\nsource = 'g.regex'\noutput = 'o.bin'\ntokenizer = 'x'\n", "must end in .safetensors or .npz"),
    ("[[artifact]]\nsource = 'g.regex'\noutput = 'o.npz'\ntokenizer = 'x'\nlayuot = 'csr'\n",
     "unknown key 'layuot'"),
    ("[[artifact]]\nsource = 'g.regex'\noutput = 'o.npz'\ntokenizer = 'x'\nmax_depth = -1\n",
     "max_depth must be an integer >= 0"),
    ("[[artifact]]\nsource = 'g.regex'\noutput = 'o.npz'\ntokenizer = 'x'\nmax_states = 1\n",
     "max_states must be an integer >= 2"),
    ("[[artifact]]\nsource = 'g.regex'\noutput = 'o.npz'\ntokenizer = 'x'\nlenient = 'yes'\n",
     "lenient must be true or false"),
    ("[[artifact]]\nsource = 'g.regex'\noutput = 'o.npz'\ntokenizer = 'x'\neos = [1, -2]\n",
     "eos must be a list of token ids"),
    ("[[artifact]]\nsource = 'g.regex'\noutput = 'o-{tokenizer}.npz'\ntokenizer = 'a/b'\n",
     "needs a tokenizer name without slashes"),
    ("[[artifact]]\nsource = 'g.regex'\noutput = 'o-{name}.npz'\ntokenizer = 'x'\n",
     "{name} is not a placeholder; placeholders are plain {stem} and {tokenizer}"),
    ("[[artifact]]\nsources = '*.regex'\noutput = 'o.npz'\ntokenizer = ['x', 'y']\n",
     "o.npz would be written twice"),
    ("[defaults]\noutput = 'o.npz'\n[[artifact]]\nsource = 'g.regex'\n", "unknown key 'output'"),
    ("[tokenizers]\nx = 3\n[[artifact]]\nsource = 'g.regex'\n", "[tokenizers] must map names"),
    ("[artefact]\n", "unknown key 'artefact'"),
    ("", "no [[artifact]] entries"),
])
def test_manifest_errors(tmp_path, text, fragment):
    (tmp_path / "g.regex").write_text("a\n")
    manifest = tmp_path / "grammarc.toml"
    manifest.write_text(text)
    with pytest.raises(GrammarcError) as info:
        read_manifest(manifest)
    assert fragment in str(info.value) and str(manifest) in str(info.value)


def test_manifest_defaults_lists_and_tokenizer_paths(tmp_path):
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "x.schema.json").write_text("{}")
    (tmp_path / "tok.json").write_text("{}")
    manifest = tmp_path / "grammarc.toml"
    manifest.write_text("[defaults]\nmax_depth = 2\nlayout = 'dense'\n"
                        "[[artifact]]\nsources = 'g/*.json'\noutput = 'out/{stem}.{tokenizer}.npz'\n"
                        "tokenizer = ['smollm2', 'tok.json']\nmax_depth = 5\n")
    first, second = read_manifest(manifest)
    assert first.output == tmp_path / "out" / "x.smollm2.npz" and first.tokenizer_spec == "smollm2"
    assert second.output == tmp_path / "out" / "x.tok.json.npz"
    assert second.tokenizer == "tok.json" and second.tokenizer_spec == str(tmp_path / "tok.json")
    assert first.settings == {"max_depth": 5, "layout": "dense"}
    assert first.options(print).max_depth == 5


def test_build_command_errors(tmp_path):
    assert_clean_error(run("build", cwd=tmp_path), "grammarc.toml: cannot read manifest")
    (tmp_path / "grammarc.toml").write_text("[[artifact]\n")
    assert_clean_error(run("build", "--check", cwd=tmp_path), "grammarc.toml: invalid TOML")
    usage = run("build", "--check", "--force", cwd=tmp_path)
    assert usage.returncode == 2 and "exclude each other" in usage.stderr
