"""Runs requests through a real vLLM engine (a subprocess of the tests: vLLM starts its engine
in processes of its own, which wants a script with a `__main__` guard).

    python tests/integrations/vllm_driver.py JOB.json      # prints one JSON line: the results

JOB: {"model": folder, "processor": true|false, "batch": [request, ...], "each": [request, ...]}
with request = {"prompt": str, "max_tokens": int, "artifact": path (optional), "chat": bool,
"stop_token_ids": [int] (optional)}.
"batch" is generated in one call (greedy); each request of "each" alone, its error caught.
Result: {"batch": [{"text", "token_ids", "finish_reason"}], "each": [{"error": str} | ...]}.
"""

from __future__ import annotations

import json
import os
import sys


def main(job_path: str) -> None:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM, SamplingParams

    job = json.loads(open(job_path, encoding="utf-8").read())
    processors = ["grammarc.integrations.vllm:GrammarLogitsProcessor"] if job["processor"] \
        else None
    llm = LLM(model=job["model"], dtype="float32", enforce_eager=True, max_model_len=1024,
              logits_processors=processors, seed=0)
    tokenizer = llm.get_tokenizer()

    def prepared(request):
        prompt = request["prompt"]
        if request.get("chat", True):
            prompt = tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                                   add_generation_prompt=True, tokenize=False)
        extra = {"grammarc": {"artifact": request["artifact"]}} if "artifact" in request \
            else None
        return prompt, SamplingParams(max_tokens=request["max_tokens"], temperature=0.0,
                                      extra_args=extra,
                                      stop_token_ids=request.get("stop_token_ids"))

    def result(output):
        out = output.outputs[0]
        return {"text": out.text, "token_ids": list(out.token_ids),
                "finish_reason": out.finish_reason}

    results = {"batch": [], "each": []}
    if job.get("batch"):
        prompts, params = zip(*(prepared(r) for r in job["batch"]))
        outputs = llm.generate(list(prompts), list(params), use_tqdm=False)
        results["batch"] = [result(o) for o in outputs]
    for request in job.get("each", []):
        prompt, params = prepared(request)
        try:
            results["each"].append(result(llm.generate([prompt], params, use_tqdm=False)[0]))
        except Exception as exc:  # noqa: BLE001  the error is the result
            results["each"].append({"error": f"{type(exc).__name__}: {exc}"})
    print("RESULTS " + json.dumps(results), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
