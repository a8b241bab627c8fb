"""Tool-call benchmark: grammarc's `compile_tools` against xgrammar's structural tags, same
tools, same vocabulary, same run.

    python benchmarks/tools_bench.py                    # 1/8/32/128 tools, both tokenizers
    python benchmarks/tools_bench.py --vocab smollm2 --tools 8 --walks 5 --choice auto

Tool lists (1, 8, 32, 128 tools; each a prefix of the next) are BFCL-like: the functions of
maskbench-dev's BFCL files (each file's schema is `{NAME: ARGUMENTS}` or an `anyOf` of those)
and Glaive files (the schema is the arguments; the name is the file's), distinct, in a fixed
shuffled order, wrapped as OpenAI tools `{"type": "function", "function": {"name", "parameters"}}`
(a name listed twice with another schema gets a `_2` suffix).

Per case and tokenizer:

- compile time: grammarc `compile_tools(tools, tok, format="hermes", tool_choice=...)`, warm
  (the tokenizer's trie built by a warm-up compile), best of --repeat; xgrammar
  `GrammarCompiler.compile_structural_tag(get_model_structural_tag("qwen_3", tools,
  tool_choice=..., reasoning="disabled"))`, a new compiler per compile (no cache carried
  over), best of --repeat. The tag builder's own time is left out of both. Then grammarc's
  `Grammar.warm()` (every row's mask computed ahead, as a server does once per artifact),
  timed apart ("warm"): the masks below are timed after it, as xgrammar's are after the
  token-mask cache its compile builds.
- masks: --walks random walks through grammarc's masks (`Grammar.sample_tokens`: each token
  uniform among those that still let the text end within --max-tokens, EOS in an accepting
  state with probability --eos-probability), replayed token by token: grammarc's
  `Grammar.mask(state)` (also on reuse: each state's first call left out; and the reused
  masks that allow 90% of the vocabulary or more, free text's) and xgrammar's `GrammarMatcher.fill_next_token_bitmask` are timed at each step of the same
  sequence (EOS step included); every token must be allowed by both (a token xgrammar
  refuses is a disagreement, with its text shown), and the steps where the two masks differ
  are counted: where grammarc allows a token xgrammar refuses (shown) and the other way
  (xgrammar's JSON allows any whitespace; grammarc's default layout is `", "` and `": "`).
- exactness: every walk's text is read back by an independent reader (split on the hermes
  tags, `json.loads`, the name looked up, the arguments validated by `jsonschema` with format
  checks); a walk grammarc allowed that the reader rejects is an invalid call accepted.
- invalid texts: --mutants one-byte mutants of each walk's text (a byte deleted, doubled or
  replaced) that the reader rejects must be rejected by grammarc's byte-level automaton
  (`walk_bytes`, then `is_accepting`); for `required` only (free text absorbs most mutants).
  The script exits 1 when grammarc accepted an invalid text.
- artifact size (grammarc's .safetensors) against xgrammar's compiled grammar in memory
  (`memory_size_bytes`).

Setup (a virtualenv with xgrammar beside grammarc): see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MASKBENCH = ROOT.parent / "shared" / "conformance" / "maskbench-dev"
VOCABS = {"smollm2": "smollm2", "deepseek": "deepseek-r1-distill-qwen"}
TOOL_CALL = re.compile(r'<tool_call>\n(.*?)\n</tool_call>', re.S)


# --------------------------------------------------------------------------- tool lists

def all_tools(folder: Path = MASKBENCH) -> list[dict]:
    """Every distinct function of the BFCL and Glaive files, as OpenAI tools, in a fixed
    shuffled order (names made unique)."""
    found: dict[tuple[str, str], dict] = {}
    for path in sorted(folder.glob("BFCL_*.json")) + sorted(folder.glob("Glaiveai2K---*.json")):
        schema = json.loads(path.read_text())["schema"]
        if path.name.startswith("Glaive"):
            functions = {path.stem.split("---")[1].rsplit("_", 1)[0]: schema}
        else:  # {NAME: ARGUMENTS}, or an anyOf of those
            functions = {name: arguments for branch in schema.get("anyOf", [schema])
                         for name, arguments in branch["properties"].items()}
        for name, parameters in functions.items():
            found.setdefault((name, json.dumps(parameters, sort_keys=True)), parameters)
    tools, used = [], set()
    entries = sorted(found.items())
    random.Random(0).shuffle(entries)
    for (name, _), parameters in entries:
        unique, n = name, 1
        while unique in used:
            n += 1
            unique = f"{name}_{n}"
        used.add(unique)
        tools.append({"type": "function", "function": {"name": unique, "parameters": parameters}})
    return tools


# --------------------------------------------------------------------------- checking

def invalid_calls(text: str, tools: list[dict], choice: str) -> str | None:
    """Why `text` is not a valid hermes tool-call output for `tools` under `choice`, read
    independently of grammarc (None when it is valid). `required`: one or more calls,
    separated by a newline, nothing else; `auto`: free text, then calls after it."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    calls = list(TOOL_CALL.finditer(text))
    if choice == "required":
        if not calls or calls[0].start() != 0 or calls[-1].end() != len(text):
            return "not a sequence of calls"
        gaps = [text[a.end():b.start()] for a, b in zip(calls, calls[1:])]
        if any(gap != "\n" for gap in gaps):
            return f"calls separated by {gaps!r}"
    elif calls and calls[-1].end() != len(text):
        return "text after the calls"
    for match in calls:
        try:
            call = json.loads(match.group(1))
        except json.JSONDecodeError as exc:
            return f"call not JSON: {exc}"
        if not isinstance(call, dict) or set(call) != {"name", "arguments"}:
            return f"call is not {{name, arguments}}: {match.group(1)[:80]}"
        if call["name"] not in schemas:
            return f"unknown tool {call['name']!r}"
        schema = schemas[call["name"]]
        validator = validator_for(schema, default=Draft202012Validator)(
            schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
        error = next(iter(validator.iter_errors(call["arguments"])), None)
        if error is not None:
            return f"{call['name']} arguments: {error.message[:100]}"
    return None


MUTATION_BYTES = b'{}[]",: \n0123456789.-+eEtrufalsn\\<>/_x'


def mutants(text: bytes, count: int, rng: np.random.Generator) -> list[bytes]:
    """`count` copies of `text`, each with one byte deleted, doubled or replaced by a byte that
    matters to JSON or the tags; half of them at a byte of JSON's or the tags' punctuation
    (random walks spend most bytes inside strings)."""
    marks = [i for i, c in enumerate(text) if c in b'{}[]":,<>/\n']
    out = []
    for k in range(count):
        i = int(rng.integers(len(text))) if k % 2 or not marks else \
            marks[int(rng.integers(len(marks)))]
        new = bytes([MUTATION_BYTES[int(rng.integers(len(MUTATION_BYTES)))]])
        op = int(rng.integers(3))
        out.append(text[:i] + (b"" if op == 0 else text[i:i + 1] * 2 if op == 1 else new)
                   + text[i + 1:])
    return out


def invalid_mutants_accepted(grammar, text: bytes, tools: list[dict], choice: str,
                             count: int, rng: np.random.Generator) -> tuple[int, list[str]]:
    """Mutants of `text` the reader rejects (counted) and those of them grammarc's byte-level
    automaton accepts anyway (shown). Mutants the reader accepts are left out: grammarc keeps
    one JSON layout, so some of those are rightly refused."""
    invalid, accepted = 0, []
    for mutant in mutants(text, count, rng):
        try:
            why = invalid_calls(mutant.decode("utf-8"), tools, choice)
        except UnicodeDecodeError:
            why = "not UTF-8"
        if why is None:
            continue
        invalid += 1
        if grammar.is_accepting(grammar.walk_bytes(mutant)):
            accepted.append(f"{why}: {mutant[:160]!r}")
    return invalid, accepted


# --------------------------------------------------------------------------- engines

class XGrammar:
    """xgrammar on grammarc's exact token bytes (a RAW vocabulary: tokens without bytes are
    special and never allowed), the tokenizer's EOS ids as stop tokens."""

    def __init__(self, tok, threads: int) -> None:
        import xgrammar

        self.xgr = xgrammar
        self.threads = threads
        self.vocab_size = tok.vocab_size
        self.info = xgrammar.TokenizerInfo([b or b"" for b in tok.token_bytes],
                                           xgrammar.VocabType.RAW, vocab_size=tok.vocab_size,
                                           stop_token_ids=list(tok.eos_token_ids))

    def tag(self, tools: list[dict], choice: str) -> Any:
        return self.xgr.get_model_structural_tag("qwen_3", tools, tool_choice=choice,
                                                 reasoning="disabled")

    def compile(self, tag: Any) -> tuple[Any, float]:
        compiler = self.xgr.GrammarCompiler(self.info, max_threads=self.threads,
                                            cache_enabled=False)
        start = time.perf_counter()
        compiled = compiler.compile_structural_tag(tag)
        return compiled, time.perf_counter() - start

    def size(self, compiled: Any) -> int:
        """The compiled grammar's size in memory (its JSON serialisation is larger still:
        788 MB for 128 tools on SmolLM2)."""
        return int(compiled.memory_size_bytes)


@dataclass
class Walks:
    """Mask timings (ns) and findings over the replayed walks of one case."""

    grammarc_ns: list[int] = field(default_factory=list)
    reuse_ns: list[int] = field(default_factory=list)   # grammarc, each state's first call left out
    wide_ns: list[int] = field(default_factory=list)    # grammarc on reuse, masks allowing >= 90%
    seen: set[int] = field(default_factory=set)
    xgrammar_ns: list[int] = field(default_factory=list)
    tokens: int = 0
    grammarc_wider: list[str] = field(default_factory=list)  # steps grammarc allows more at
    xgrammar_wider: int = 0  # steps xgrammar allows more at
    refused: list[str] = field(default_factory=list)   # tokens of grammarc's walks xgrammar refused
    invalid: list[str] = field(default_factory=list)   # walks the independent reader rejects
    mutants: int = 0                                    # invalid mutants of the walks checked


def time_grammarc(grammar, state: int, out: Walks) -> np.ndarray:
    """grammarc's mask of `state`, timed."""
    start = time.perf_counter_ns()
    mask = grammar.mask(state)
    ns = time.perf_counter_ns() - start
    out.grammarc_ns.append(ns)
    if state in out.seen:
        out.reuse_ns.append(ns)
        if np.count_nonzero(mask) >= 0.9 * len(mask):
            out.wide_ns.append(ns)
    out.seen.add(state)
    return mask


def replay(grammar, tok, compiled, walk: list[int], out: Walks) -> None:
    """Time both engines' masks along `walk` (a grammarc walk ending with EOS), checking each
    token against both masks (without `compiled`, grammarc's alone)."""
    import xgrammar

    vocab_size = tok.vocab_size
    matcher = xgrammar.GrammarMatcher(compiled) if compiled is not None else None
    bits = xgrammar.allocate_token_bitmask(1, vocab_size)
    view = bits.numpy()
    eos = set(tok.eos_token_ids)
    state = grammar.initial_state
    xgr_alive = matcher is not None
    for step, token in enumerate(walk):
        mask = time_grammarc(grammar, state, out)
        if not mask[token]:
            raise AssertionError(f"grammarc's own walk has a token its mask refuses: {token}")
        out.tokens += 1
        if xgr_alive:
            start = time.perf_counter_ns()
            matcher.fill_next_token_bitmask(bits)
            out.xgrammar_ns.append(time.perf_counter_ns() - start)
            theirs = np.unpackbits(view[0].view(np.uint8), bitorder="little")[:vocab_size]
            wider = np.flatnonzero(mask & ~theirs.astype(bool))
            if len(wider):
                prefix = tok.decode_bytes([t for t in walk[:step] if t not in eos])
                out.grammarc_wider.append(f"{len(wider)} tokens, e.g. {tok.token_bytes[wider[0]]!r}"
                                          f" after ...{prefix[-60:]!r}")
            out.xgrammar_wider += bool((theirs.astype(bool) & ~mask).any())
            if not theirs[token] or not matcher.accept_token(token):
                prefix = tok.decode_bytes([t for t in walk[:step] if t not in eos])
                shown = "EOS" if token in eos else repr(tok.token_bytes[token])
                out.refused.append(f"{shown} after ...{prefix[-60:]!r}")
                xgr_alive = False
        if token not in eos:
            state = grammar.next_state(state, token)
    if xgr_alive and not matcher.is_terminated():  # type: ignore[union-attr]
        out.refused.append("xgrammar not terminated after EOS")


# --------------------------------------------------------------------------- cases

def percentiles(ns: list[int]) -> tuple[float, float, float]:
    """p50, p99 and max in microseconds."""
    if not ns:
        return (float("nan"),) * 3
    a = np.asarray(ns) / 1000
    return float(np.percentile(a, 50)), float(np.percentile(a, 99)), float(a.max())


def run_case(tok, xgr: XGrammar | None, tools: list[dict], choice: str, args,
             out_dir: Path) -> dict:
    import grammarc

    row: dict[str, Any] = {"tools": len(tools), "choice": choice}
    best = float("inf")
    for _ in range(args.repeat):
        start = time.perf_counter()
        grammar = grammarc.compile_tools(tools, tok, format="hermes", tool_choice=choice,
                                         options=args.options)
        best = min(best, time.perf_counter() - start)
    path = out_dir / f"tools-{tok.name}-{len(tools)}-{choice}.safetensors"
    grammar.save(path)
    start = time.perf_counter()
    grammar.warm()  # what a server does once per artifact: every row's mask ahead
    row.update(grammarc_compile=best, grammarc_warm=time.perf_counter() - start,
               grammarc_size=path.stat().st_size, states=grammar.num_states)
    compiled = None
    if xgr is not None:
        tag = xgr.tag(tools, choice)
        times = []
        for _ in range(args.repeat):
            compiled, seconds = xgr.compile(tag)
            times.append(seconds)
        row.update(xgrammar_compile=min(times), xgrammar_size=xgr.size(compiled))
    rng = np.random.default_rng(args.seed)
    walks = Walks()
    lengths = []
    for _ in range(args.walks):
        walk = grammar.sample_tokens(args.max_tokens, rng, eos_probability=args.eos_probability)
        lengths.append(len(walk))
        text = tok.decode_bytes([t for t in walk if t not in tok.eos_token_ids])
        why = invalid_calls(text.decode("utf-8", errors="replace"), tools, choice)
        if why is not None:
            walks.invalid.append(f"{why}: {text[:120]!r}")
        elif choice == "required":
            checked, accepted = invalid_mutants_accepted(grammar, text, tools, choice,
                                                         args.mutants, rng)
            walks.mutants += checked
            walks.invalid += accepted
        replay(grammar, tok, compiled, walk, walks)
    row.update(tokens=walks.tokens, walks=args.walks, mean_walk=float(np.mean(lengths)),
               grammarc_mask=percentiles(walks.grammarc_ns),
               grammarc_reuse=percentiles(walks.reuse_ns), grammarc_wide=percentiles(walks.wide_ns),
               wide_masks=len(walks.wide_ns),
               xgrammar_mask=percentiles(walks.xgrammar_ns),
               grammarc_wider=walks.grammarc_wider, xgrammar_wider=walks.xgrammar_wider,
               refused=walks.refused, invalid=walks.invalid, mutants=walks.mutants)
    return row


# --------------------------------------------------------------------------- output

def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def fmt_size(n: float | None) -> str:
    if n is None:
        return "-"
    return f"{n / 1024:.0f} KB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MB"


def fmt_us(values: tuple[float, float, float]) -> str:
    return " / ".join(f"{v:.1f}" if v < 100 else f"{v:,.0f}" for v in values)


HEADER = ("| tokenizer | tools | choice | states | grammarc compile | warm | xgrammar compile | ratio | "
          "grammarc mask p50 / p99 / max (µs) | on reuse p50 / p99 | wide masks on reuse p50 / p99 "
          "(count) | xgrammar mask p50 / p99 / max (µs) | "
          "mask p99 ratio | tokens | steps grammarc wider / xgrammar wider | xgrammar refused | "
          "invalid accepted (walks + invalid mutants) | "
          "artifact | xgrammar in memory |")


def table_row(vocab: str, row: dict) -> str:
    if "error" in row:
        return f"| {vocab} | {row['tools']} | {row['choice']} | error: {row['error']} |"
    xc = row.get("xgrammar_compile")
    ratio = f"{xc / row['grammarc_compile']:.1f}x" if xc else "-"
    p99 = f"{row['xgrammar_mask'][1] / row['grammarc_mask'][1]:.1f}x" if xc else "-"
    wider = f"{len(row['grammarc_wider'])} / {row['xgrammar_wider']}" if xc else "-"
    return (f"| {vocab} | {row['tools']} | {row['choice']} | {row['states']:,} | "
            f"{fmt_time(row['grammarc_compile'])} | {fmt_time(row['grammarc_warm'])} | "
            f"{fmt_time(xc)} | {ratio} | "
            f"{fmt_us(row['grammarc_mask'])} | {fmt_us(row['grammarc_reuse'][:2])} | "
            f"{fmt_us(row['grammarc_wide'][:2])} ({row['wide_masks']:,}) | "
            f"{fmt_us(row['xgrammar_mask']) if xc else '-'} | {p99} | {row['tokens']:,} | "
            f"{wider} | {len(row['refused']) if xc else '-'} | "
            f"{len(row['invalid'])} of {row['walks'] + row['mutants']:,} | "
            f"{fmt_size(row['grammarc_size'])} | "
            f"{fmt_size(row.get('xgrammar_size'))} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=MASKBENCH, help="maskbench-dev folder")
    parser.add_argument("--vocab", default="smollm2,deepseek", help="smollm2, deepseek")
    parser.add_argument("--tools", default="1,8,32,128", help="tool-list sizes")
    parser.add_argument("--choice", default="required", help="tool_choice values, e.g. "
                        "required,auto (auto walks are mostly free text)")
    parser.add_argument("--repeat", type=int, default=1, help="compiles per case (best of)")
    parser.add_argument("--walks", type=int, default=20, help="random walks per case")
    parser.add_argument("--max-tokens", type=int, default=256, help="longest walk, EOS included")
    parser.add_argument("--eos-probability", type=float, default=0.02,
                        help="chance of ending a walk where it may end")
    parser.add_argument("--mutants", type=int, default=20,
                        help="one-byte mutants per walk checked at byte level (required only)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--xgrammar-threads", type=int, default=1)
    parser.add_argument("--no-peer", action="store_true", help="skip xgrammar")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--no-additional-properties", action="store_true",
                        help="grammarc forbids properties a schema does not declare, as "
                             "xgrammar's structural tags do: both compile the same calls")
    args = parser.parse_args()

    import grammarc

    args.options = grammarc.FrontendOptions(
        additional_properties=not args.no_additional_properties)

    tools = all_tools(args.corpus)
    sizes = [int(n) for n in args.tools.split(",")]
    if max(sizes) > len(tools):
        parser.error(f"{args.corpus} has {len(tools)} distinct tools")
    out_dir = ROOT / "benchmarks" / ".out"
    out_dir.mkdir(exist_ok=True)
    results = []
    print(HEADER)
    print("|---" * (HEADER.count("|") - 1) + "|", flush=True)
    for vocab in args.vocab.split(","):
        tok = grammarc.load_tokenizer(VOCABS[vocab])
        grammarc.compile_tools(tools[:1], tok, tool_choice="required")  # warm-up: the trie
        xgr = None if args.no_peer else XGrammar(tok, args.xgrammar_threads)
        if xgr is not None:
            xgr.compile(xgr.tag(tools[:1], "required"))  # warm-up
        for choice in args.choice.split(","):
            for n in sizes:
                try:
                    row = run_case(tok, xgr, tools[:n], choice, args, out_dir)
                except grammarc.GrammarcError as exc:
                    row = {"tools": n, "choice": choice, "error": str(exc)}
                row["vocab"] = vocab
                results.append(row)
                print(table_row(vocab, row), flush=True)
    for row in results:
        for kind in ("refused", "invalid", "grammarc_wider"):
            for line in row.get(kind, [])[:3]:
                print(f"{row['vocab']} {row['tools']} {row['choice']} {kind}: {line}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 1 if any(row.get("invalid") for row in results) else 0


if __name__ == "__main__":
    sys.exit(main())
