"""Shared test helpers: independent oracles and samplers that do not use grammarc's own code paths."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import grammarc
from grammarc.automaton.linking import language_automaton
from grammarc.frontends import FrontendOptions
from grammarc.frontends.json_schema import canonical_dumps
from grammarc.frontends.json_schema.schema import compile_schema
from grammarc.format.table import TokenTable

# the conformance data beside the checkout (GRAMMARC_SHARED overrides it, for a git worktree)
SHARED = Path(os.environ.get("GRAMMARC_SHARED") or
              Path(__file__).resolve().parents[1].parent / "shared")


def dfa_of(schema, **options):
    """The schema's automaton (a byte DFA, or machines linked by calls) and its notices."""
    notices = []
    opts = FrontendOptions(notice=notices.append, **options)
    automaton = language_automaton(compile_schema(schema, opts), opts.max_states,
                                   opts.max_depth, notices.append)
    return automaton, notices


def accepts(dfa, text: str) -> bool:
    return dfa.accepts(text.encode("utf-8"))


def judged_like_jsonschema(schema, instances) -> int:
    """Assert that the schema's automaton accepts each instance (serialised as its table
    expects) exactly where jsonschema (of the schema's draft) finds it valid; how many are."""
    import jsonschema  # (only the tests that judge by it need it)

    dfa, _ = dfa_of(schema)
    validator = jsonschema.validators.validator_for(schema)(schema)
    valid = 0
    for value in instances:
        expected = validator.is_valid(value)
        valid += expected
        assert accepts(dfa, canonical_dumps(schema, value)) == expected, (schema, value)
    return valid


def sample_dfa_strings(dfa, rng: random.Random, count: int, max_len: int = 40) -> list[bytes]:
    """Byte strings accepted by `dfa`, by random walks that stop at accepting states."""
    table = dfa.byte_table()
    live = [np.flatnonzero(table[s]) for s in range(dfa.num_states)]
    out = []
    for _ in range(count * 20):
        if len(out) >= count:
            break
        state, data = 1, bytearray()
        for _ in range(max_len * 4):
            if dfa.accepting[state] and (not len(live[state]) or rng.random() < 0.25):
                out.append(bytes(data))
                break
            if not len(live[state]):
                break
            b = int(rng.choice(live[state]))
            data.append(b)
            state = int(table[state, b])
    return out


def mutate(text: str, rng: random.Random, alphabet: str) -> str:
    """One random edit (insert, delete, replace) of `text`."""
    pos = rng.randint(0, len(text))
    choice = rng.random()
    if choice < 0.33 or not text:
        return text[:pos] + rng.choice(alphabet) + text[pos:]
    pos = min(pos, len(text) - 1)
    if choice < 0.66:
        return text[:pos] + text[pos + 1:]
    return text[:pos] + rng.choice(alphabet) + text[pos + 1:]


def moore_classes(trans: np.ndarray, accepting: np.ndarray) -> int:
    """Number of Nerode classes of a complete DFA by plain Moore refinement (slow, simple)."""
    labels = accepting.astype(np.int64)
    while True:
        signature = np.concatenate([labels[:, None], labels[trans]], axis=1)
        _, new = np.unique(signature, axis=0, return_inverse=True)
        new = new.reshape(-1)
        if len(np.unique(new)) == len(np.unique(labels)):
            return len(np.unique(new))
        labels = new


def run_cli(*args: str, cwd: Path | None = None, input: str | None = None,
            seconds: float = 600, memory_gb: float | None = None) -> subprocess.CompletedProcess:
    """`grammarc ARGS...` as a real subprocess (`input` goes to its stdin), failing the test
    when it runs past `seconds`; `memory_gb` caps its address space (`ulimit -v`), so a
    regression that allocates without bound fails with a clean error or dies, never swaps."""
    def cap_memory() -> None:
        import resource

        limit = int(memory_gb * 2 ** 30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    try:
        return subprocess.run([sys.executable, "-m", "grammarc", *args], capture_output=True,
                              text=True, cwd=cwd, input=input, timeout=seconds,
                              preexec_fn=cap_memory if memory_gb else None)
    except subprocess.TimeoutExpired:
        pytest.fail(f"grammarc {' '.join(args)[:200]} ran past {seconds:g} s")


def compile_file(folder: Path, name: str, text: str | bytes, *flags: str, seconds: float = 60,
                 memory_gb: float = 4) -> subprocess.CompletedProcess:
    """Write `text` to `folder/name` and run `grammarc compile NAME --tokenizer smollm2 -o
    out.safetensors -q FLAGS` there under `run_cli`'s time and memory caps."""
    path = folder / name
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text, "utf-8")
    return run_cli("compile", name, "--tokenizer", "smollm2", "-o", "out.safetensors", "-q",
                   *flags, cwd=folder, seconds=seconds, memory_gb=memory_gb)


def run_artifact_command(command: str, artifact: str | Path, cwd: Path | None = None,
                         seconds: float = 60, memory_gb: float | None = None
                         ) -> subprocess.CompletedProcess:
    """`grammarc inspect|verify|check` on one artifact (verify against SmolLM2, check the text
    "x"), under `run_cli`'s caps."""
    extra = {"check": ["x"], "verify": ["--tokenizer", "smollm2"]}.get(command, [])
    return run_cli(command, str(artifact), *extra, cwd=cwd, seconds=seconds,
                   memory_gb=memory_gb)


def assert_clean_error(result: subprocess.CompletedProcess, fragment: str) -> None:
    """Exit code 1 and one line `error: ...` holding `fragment` on stderr, no traceback."""
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and fragment in lines[0], lines[0]
    assert "Traceback" not in result.stderr


def rewrite_artifact(path: Path, out: Path, edit) -> None:
    """Apply `edit(metadata, tensors)` to a .safetensors artifact and save it to `out` with a
    valid checksum: a forgery only the checks on content can catch."""
    import json

    from safetensors import safe_open
    from safetensors.numpy import save_file

    from grammarc.format.artifact import METADATA_KEY, checksum, read_artifact

    data = read_artifact(path)
    with safe_open(str(path), framework="np") as handle:
        tensors = {name: handle.get_tensor(name) for name in handle.keys()}  # noqa: SIM118
    metadata = {k: v for k, v in data.metadata.items() if k != "checksum"}
    edit(metadata, tensors)
    metadata["checksum"] = checksum(metadata, tensors)
    save_file(tensors, str(out), metadata={METADATA_KEY: json.dumps(metadata)})


# ------------------------------------------------------- small hand-written token tables
EOS = 0


def table_grammar(dense: np.ndarray, accepting: list[int], token_class: list[int],
                  min_tokens: list[int] | None = None) -> grammarc.Grammar:
    """A factored `Grammar` from a dense table (column 0 is EOS) and a token-class assignment;
    min_tokens_to_accept by repeated relaxation unless given."""
    num_states, vocab = dense.shape
    classes = np.asarray(token_class)
    for c in set(token_class):
        cols = dense[:, classes == c]
        assert (cols == cols[:, :1]).all(), "tokens of a class must have equal columns"
    entries = [[(c, int(dense[s, list(classes).index(c)]) - s) for c in sorted(set(token_class))
                if c and dense[s, list(classes).index(c)]] for s in range(num_states)]
    row_ptr = np.concatenate([[0], np.cumsum([len(e) for e in entries])])
    flat = [pair for e in entries for pair in e]
    is_accepting = np.isin(np.arange(num_states), accepting)
    distances = np.where(is_accepting, 0, -1)
    for _ in range(num_states):
        for s in range(1, num_states):
            steps = [distances[n] + 1 for n in dense[s, 1:] if n and distances[n] >= 0]
            if distances[s] < 0 and steps:
                distances[s] = min(steps)
    metadata = {"kind": "regex", "tokenizer": {"name": "toy", "fingerprint": "", "vocab_size": vocab,
                                               "eos_token_ids": [EOS]}}
    return grammarc.Grammar(metadata, TokenTable(
        token_class=classes, state_row=np.arange(num_states), row_ptr=row_ptr,
        row_class=[c for c, _ in flat], row_delta=[d for _, d in flat], accepting=is_accepting,
        min_tokens_to_accept=distances if min_tokens is None else min_tokens,
        byte_ptr=np.zeros(num_states + 1, np.int64), byte_ranges=np.zeros((0, 2), np.int64),
        byte_next=np.zeros(0, np.int64)))


def a_up_to_3(min_tokens: list[int] | None = None) -> grammarc.Grammar:
    """`a{1,3}` over tokens EOS, 'a', 'aa', 'b'; states count the a's (1 = none yet)."""
    dense = np.zeros((5, 4), np.int64)
    dense[1, [1, 2]] = [2, 3]
    dense[2, [0, 1, 2]] = [2, 3, 4]
    dense[3, [0, 1]] = [3, 4]
    dense[4, [0]] = [4]
    return table_grammar(dense, [2, 3, 4], [1, 2, 3, 4], min_tokens)


def b_then_a_or_bb() -> grammarc.Grammar:
    """`b(a|bb)*` over tokens EOS, 'a', 'b': 'a' loops in the one accepting state exactly like
    EOS does, so the two share a token class."""
    dense = np.zeros((4, 3), np.int64)
    dense[1, [2]] = [2]
    dense[2, [0, 1, 2]] = [2, 2, 3]
    dense[3, [2]] = [2]
    return table_grammar(dense, [2], [1, 1, 2])


def walk_within_budget(grammar: grammarc.Grammar, state: int, budget: int,
                       rng: np.random.Generator) -> tuple[int, int]:
    """A random walk by `mask_within` from `state` until an EOS token: (tokens of the budget
    left, the state it ended in). Every step must allow some token."""
    left = budget
    while True:
        allowed = np.flatnonzero(grammar.mask_within(state, left))
        assert len(allowed), (budget, left, state)
        token = int(rng.choice(allowed))
        left -= 1
        if token in grammar.eos_token_ids:
            return left, state
        state = grammar.next_state(state, token)


def reloaded(grammar: grammarc.Grammar, path: Path) -> grammarc.Grammar:
    """`grammar` saved to `path` and loaded again."""
    grammar.save(path)
    return grammarc.load(path)


def assert_same_mask(a: grammarc.Grammar, b: grammarc.Grammar, prefix: bytes) -> None:
    """Both grammars allow the same tokens after `prefix`."""
    assert np.array_equal(a.mask(a.walk_bytes(prefix)), b.mask(b.walk_bytes(prefix))), prefix


def random_token_walk(grammar: grammarc.Grammar, rng: np.random.Generator, steps: int,
                      opening: bytes = b""):
    """States along a random token walk after `opening` (random allowed tokens, EOS never),
    at most `steps` of them."""
    state = grammar.walk_bytes(opening)
    eos = list(grammar.eos_token_ids)
    for _ in range(steps):
        yield state
        mask = grammar.mask(state).copy()
        mask[eos] = False
        allowed = np.flatnonzero(mask)
        if not len(allowed):
            return
        state = grammar.next_state(state, int(rng.choice(allowed)))


def check_number_schema(schema: dict, instances: list, rng: random.Random) -> tuple[int, int]:
    """Compile `schema` (a schema with no value at all may be refused as such) and judge it
    by jsonschema on exact numbers: no text of an instance spelled three random ways is
    accepted unless valid, and every valid instance's canonical text is accepted. Returns
    how many texts were checked and how many instances were valid."""
    from grammar_oracles import exact_json, exact_validator, spelled_json

    from grammarc.errors import GrammarError
    from grammarc.frontends.json_schema import canonical_dumps

    try:
        automaton, _ = dfa_of(schema)
    except GrammarError as exc:
        assert "no value at all" in str(exc), (schema, exc)
        automaton = None
    validator = exact_validator(schema)
    checked = valid_seen = 0
    for instance in instances:
        for _ in range(3):
            text = spelled_json(instance, rng)
            valid = validator.is_valid(exact_json(text))
            assert not (automaton is not None and accepts(automaton, text)) or valid, \
                (schema, text)
            checked += 1
        if validator.is_valid(instance):
            valid_seen += 1
            assert automaton is not None and \
                accepts(automaton, canonical_dumps(schema, instance)), (schema, instance)
    return checked, valid_seen
