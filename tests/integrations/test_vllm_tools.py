"""Tool calls end to end through vLLM's OpenAI server (`--enable-auto-tool-choice
--tool-call-parser hermes` and grammarc's processor, vllm_server.py) on SmolLM2: artifacts
of `compile_tools` named in `vllm_xargs` of `/v1/chat/completions` requests with `tools`, each
call's arguments checked against its tool's `parameters` with `jsonschema`; and how each
request `tool_choice` combines with an artifact (docs/tool-calling.md).

Runs where vLLM is installed (`python -m pytest -m vllm`, .ci/run's second step)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here (.ci/run tests it in a venv "
                                   "of its own)")

import grammarc  # noqa: E402
from vllm_server import post  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TOOLS = json.loads((ROOT / "grammars" / "weather-tools.json").read_text(encoding="utf-8"))
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
SYSTEM = ("You can call these tools; answer with a call in <tool_call></tool_call> tags when one "
          "helps: " + json.dumps(TOOLS))
PROMPTS = ["What's the weather in Paris?", "Is it raining in Tokyo this week? In fahrenheit.",
           "What time is it in New York?", "Weather for Lisbon over the next 3 days, please."]
NAMED = {"type": "function", "function": {"name": "get_time"}}


@pytest.fixture(scope="module")
def tool_artifacts(tmp_path_factory, smollm2) -> dict[str, str]:
    """The tools compiled in the hermes format for each tool_choice the tests use."""
    folder = tmp_path_factory.mktemp("tool-artifacts")
    out = {}
    for choice in ("required", "auto", "get_weather"):
        out[choice] = str(folder / f"tools-{choice}.safetensors")
        grammarc.compile_tools(TOOLS, smollm2, format="hermes", tool_choice=choice).save(
            out[choice])
    out["arguments"] = str(folder / "weather-arguments.safetensors")
    grammarc.compile_json_schema(SCHEMAS["get_weather"], smollm2).save(out["arguments"])
    return out


def _chat(base: str, model: Path, prompt: str, artifact: str | None, **fields) -> tuple[int, dict]:
    body = {"model": str(model), "messages": [{"role": "system", "content": SYSTEM},
                                              {"role": "user", "content": prompt}],
            "tools": TOOLS, "max_tokens": 64, "temperature": 1.0, **fields}
    if artifact is not None:
        body["vllm_xargs"] = {"grammarc": artifact}
    return post(f"{base}/v1/chat/completions", body)


def _calls(answer: dict) -> list[tuple[str, dict]]:
    """The answer's tool calls as (name, arguments), each checked against its tool's schema."""
    calls = []
    for call in answer["choices"][0]["message"].get("tool_calls") or []:
        name, arguments = call["function"]["name"], json.loads(call["function"]["arguments"])
        jsonschema.Draft202012Validator(SCHEMAS[name]).validate(arguments)
        calls.append((name, arguments))
    return calls


def test_required_artifact_always_gives_valid_calls(openai_server, model_folder, tool_artifacts):
    for seed, prompt in enumerate(PROMPTS):
        status, answer = _chat(openai_server, model_folder, prompt, tool_artifacts["required"],
                               tool_choice="auto", seed=seed)
        assert status == 200, answer
        choice = answer["choices"][0]
        assert _calls(answer) and not choice["message"]["content"], choice
        assert choice["finish_reason"] == "tool_calls"


def test_auto_artifact_gives_text_or_valid_calls(openai_server, model_folder, tool_artifacts):
    kinds = set()
    for seed, prompt in enumerate(PROMPTS[:3]):
        status, answer = _chat(openai_server, model_folder, prompt, tool_artifacts["auto"],
                               seed=seed + 10)
        assert status == 200, answer
        message = answer["choices"][0]["message"]
        if _calls(answer):
            kinds.add("calls")
        else:  # text, and never a call left unparsed in it
            assert "<tool_call>" not in (message["content"] or ""), message
            kinds.add("text")
    assert kinds


def test_request_tool_choice_with_an_artifact(openai_server, model_folder, tool_artifacts):
    """vLLM constrains tool_choice "required" and a named tool itself (a hermes structural tag,
    arguments free): with a hermes artifact both masks apply, and their intersection holds the
    artifact's calls (of the named tool); an artifact that can never meet vLLM's constraint is
    refused at admission instead of failing inside the engine."""
    prompt = PROMPTS[2]
    status, answer = _chat(openai_server, model_folder, prompt, tool_artifacts["required"],
                           tool_choice="required", seed=1)
    assert status == 200 and _calls(answer), answer
    assert answer["choices"][0]["finish_reason"] == "tool_calls"
    status, answer = _chat(openai_server, model_folder, prompt, tool_artifacts["required"],
                           tool_choice=NAMED, seed=2)
    assert status == 200 and [name for name, _ in _calls(answer)] == ["get_time"], answer
    assert answer["choices"][0]["finish_reason"] == "stop"  # OpenAI's for a named tool
    for artifact, fields in [("get_weather", {"tool_choice": NAMED}),
                             ("arguments", {"tool_choice": "required"}),
                             ("required", {"response_format": {"type": "json_object"}})]:
        status, answer = _chat(openai_server, model_folder, prompt, tool_artifacts[artifact],
                               **fields)
        message = answer.get("error", {}).get("message", "")
        assert status == 400 and 'first' in message and 'send tool_choice "auto"' in message, \
            answer
    # "none": vLLM reads no call, the artifact's call comes back as text
    status, answer = _chat(openai_server, model_folder, prompt, tool_artifacts["required"],
                           tool_choice="none", temperature=0)
    message = answer["choices"][0]["message"]
    assert status == 200 and not message.get("tool_calls"), answer
    assert message["content"].startswith("<tool_call>\n{\"name\": \"get_")


def test_budget_too_small_for_a_call_ends_at_once(openai_server, model_folder, tool_artifacts):
    status, answer = _chat(openai_server, model_folder, PROMPTS[0], tool_artifacts["required"],
                           max_tokens=8, temperature=0)
    choice = answer["choices"][0]
    assert status == 200 and choice["finish_reason"] == "stop", answer
    assert not choice["message"]["content"] and not choice["message"].get("tool_calls"), choice
    assert answer["usage"]["completion_tokens"] == 1


def test_constraint_conflicts_at_admission(tool_artifacts, monkeypatch):
    """The processor's admission check on each form of vLLM's own constraint, the JSON forms
    (tool_choice "required"/named with VLLM_ENFORCE_STRICT_TOOL_CALLING=0, response_format)
    included, which the server above does not produce: refused only where no text can meet
    both."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    from grammarc.integrations.vllm import GrammarLogitsProcessor

    monkeypatch.setenv("GRAMMARC_ARTIFACT_DIRS", str(Path(tool_artifacts["required"]).parent))
    calls_list = {"type": "array", "minItems": 1, "items": {"type": "object"}}
    hermes_tag = json.dumps({"type": "structural_tag", "format": {
        "type": "tags_with_separator", "separator": "", "at_least_one": True, "tags": [
            {"type": "tag", "begin": '<tool_call>\n{"name": "get_time", "arguments": ',
             "content": {"type": "json_schema", "json_schema": True}, "end": "}\n</tool_call>"}]}})
    auto_tag = json.dumps({"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<tool_call>"], "tags": []}})
    cases = [("required", StructuredOutputsParams(json=calls_list), True),
             ("required", StructuredOutputsParams(json_object=True), True),
             ("arguments", StructuredOutputsParams(json=SCHEMAS["get_weather"]), False),
             ("arguments", StructuredOutputsParams(structural_tag=hermes_tag), True),
             ("required", StructuredOutputsParams(structural_tag=hermes_tag), False),
             ("get_weather", StructuredOutputsParams(structural_tag=hermes_tag), True),
             ("get_weather", StructuredOutputsParams(structural_tag=auto_tag), False),
             ("auto", StructuredOutputsParams(json=calls_list), False),  # text may be JSON
             ("required", None, False)]
    for artifact, structured, refused in cases:
        params = SamplingParams(max_tokens=64, structured_outputs=structured,
                                extra_args={"grammarc": tool_artifacts[artifact]})
        if refused:
            with pytest.raises(ValueError, match=r"writes \".*\" first.*send tool_choice"):
                GrammarLogitsProcessor.validate_params(params)
        else:
            GrammarLogitsProcessor.validate_params(params)
