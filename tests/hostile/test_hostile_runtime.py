"""Hostile inputs, issue 43: the runtime and the commands that read artifacts. Forged call
tables that made byte walks loop forever, a row entry into the dead state, foreign metadata,
`check --tokens` counting with a configuration id, `check` keeping every configuration of a
long text, `(?u)` in a pattern, and runtime arguments of the wrong type taken as something
else. Commands run as a user runs them: a subprocess under a time and memory cap."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from helpers import (assert_clean_error, compile_file, rewrite_artifact, run_artifact_command,
                     run_cli)

import grammarc
from grammarc.runtime import Matcher, bitmask_width
from grammarc.runtime.calls import CallGrammar

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def grammars(smollm2) -> dict[str, grammarc.Grammar]:
    """A flat grammar and one whose machines call each other (a recursive schema)."""
    out = {"flat": grammarc.load(ROOT / "artifacts" / "iso-date.safetensors"),
           "calls": grammarc.compile(ROOT / "grammars" / "tree.schema.json", smollm2)}
    assert isinstance(out["calls"], CallGrammar)
    return out


# ---------------------------------------------------------------- runtime arguments (12)
def _words(grammar: grammarc.Grammar, dtype=np.int32, rows: tuple[int, ...] = ()) -> np.ndarray:
    return np.zeros((*rows, bitmask_width(grammar.vocab_size)), dtype)


# a state of a flat grammar is an int, of a grammar with calls a CallState
STATE = "a state must be an integer|a state of a grammar with calls is a CallState"
BAD_ARGUMENTS = [
    (lambda g: g.next_state(g.initial_state, 0.0), TypeError,
     "a token id must be an integer, not float"),
    (lambda g: g.next_state(g.initial_state, 5.0), TypeError,
     "a token id must be an integer, not float"),
    (lambda g: g.next_state(g.initial_state, True), TypeError,
     "a token id must be an integer, not bool"),
    (lambda g: g.next_state(g.initial_state, "5"), TypeError,
     "a token id must be an integer, not str"),
    (lambda g: g.next_state(1.0, 5), TypeError, STATE),
    (lambda g: g.next_state(np.array([1, 1]), 5), (TypeError, ValueError),
     "a state must be one integer|" + STATE),
    (lambda g: g.is_accepting(np.float64(1)), TypeError, STATE),
    (lambda g: g.tokens_to_accept(None), TypeError, STATE),
    (lambda g: g.forced(1.0), TypeError, STATE),
    (lambda g: g.allowed_characters(1.0), TypeError, STATE),
    (lambda g: g.mask(g.initial_state, budget=2.5), TypeError,
     "budget must be an integer, not float"),
    (lambda g: g.mask(g.initial_state, budget=10.0 ** 9), TypeError, "budget must be an integer"),
    (lambda g: g.mask_within(g.initial_state, 3.0), TypeError, "budget must be an integer"),
    (lambda g: g.allowed_within(g.initial_state, True), TypeError,
     "budget must be an integer, not bool"),
    (lambda g: g.apply(np.zeros(g.vocab_size, np.float32), g.initial_state, budget=2.5), TypeError,
     "budget must be an integer"),
    (lambda g: g.bitmask(g.initial_state, budget=2.5), TypeError, "budget must be an integer"),
    (lambda g: g.fill_bitmask([g.initial_state], _words(g, rows=(1,)), budget=[2.5]), TypeError,
     "budgets must be integers"),
    (lambda g: g.sample_tokens(5.5, np.random.default_rng(0)), TypeError,
     "max_tokens must be an integer"),
    (lambda g: g.matches(5), TypeError, "text must be str or bytes, not int"),
    (lambda g: g.walk_bytes("2024"), TypeError, "data must be bytes, not str"),
    (lambda g: g.walk_bytes(b"2", 1.0), TypeError, STATE),
    (lambda g: g.fill_bitmask([g.initial_state], _words(g, np.int64, (1,))), ValueError,
     r"out must be an int32 array of shape \(1, W\), not int64"),
    (lambda g: g.fill_bitmask([g.initial_state], _words(g)), ValueError,
     r"out must be an int32 array of shape \(1, W\)"),
    (lambda g: g.fill_bitmask([g.initial_state], [[0] * 2000]), TypeError,
     "out must be a numpy array"),
    (lambda g: Matcher(g, max_tokens=5.0), TypeError, "max_tokens must be an integer"),
    (lambda g: Matcher(g).rollback(0.0), TypeError, "count must be an integer"),
    (lambda g: Matcher(g).accept(1.0), TypeError, "tokens must be integers"),
    (lambda g: Matcher(g).fill_bitmask(_words(g, np.int64)), ValueError,
     r"out must be an int32 array of shape \(W\), not int64"),
    (lambda g: Matcher(g).fill_bitmask(_words(g, rows=(1,))), ValueError,
     r"out must be an int32 array of shape \(W\)"),
    (lambda g: Matcher(g).fill_bitmask(np.zeros(3, np.int32)), ValueError,
     "a bitmask of 3 words holds 96 tokens"),
    (lambda g: g.fill_bitmask([g.initial_state], np.zeros((1, 3), np.int32)), ValueError,
     "a bitmask of 3 words holds 96 tokens"),
]


@pytest.mark.parametrize("name", ["flat", "calls"])
@pytest.mark.parametrize("call,error,message", BAD_ARGUMENTS)
def test_runtime_arguments_are_integers_or_a_clear_error(grammars, name, call, error, message):
    """`next_state(s, 0.0)` was EOS id 0 on a call grammar, `next_state(s, 5.0)` a numpy
    IndexError, `matches(5)` five NUL bytes; float budgets passed; `Matcher.fill_bitmask`
    took an int64 buffer that `Grammar.fill_bitmask` refused."""
    with pytest.raises(error, match=message):
        call(grammars[name])


@pytest.mark.parametrize("name", ["flat", "calls"])
def test_numpy_integers_are_integers_everywhere(grammars, name):
    grammar = grammars[name]
    rng = random.Random(3)
    state = grammar.initial_state
    for _ in range(6):
        allowed = [t for t in grammar.allowed(state).tolist() if t not in grammar.eos_token_ids]
        if not allowed:
            break
        token = rng.choice(allowed)
        for kind in (np.int16, np.uint32, np.int64):
            given = kind(state) if name == "flat" else state
            assert grammar.next_state(given, kind(token)) == grammar.next_state(state, token)
            assert np.array_equal(grammar.mask(given, budget=kind(9)),
                                  grammar.mask(state, budget=9))
        state = grammar.next_state(state, token)
    matcher = Matcher(grammar, max_tokens=np.int32(30))
    assert matcher.accept(np.int64(grammar.allowed_within(grammar.initial_state, 30)[0]))
    matcher.rollback(np.uint8(1))
    row = _words(grammar)
    assert np.array_equal(matcher.fill_bitmask(row),
                          grammar.bitmask(grammar.initial_state, budget=30))


def test_both_fill_bitmask_take_a_torch_row_alike(grammars):
    torch = pytest.importorskip("torch")
    grammar = grammars["calls"]
    width = bitmask_width(grammar.vocab_size)
    row, rows = torch.zeros(width, dtype=torch.int32), torch.zeros((1, width), dtype=torch.int32)
    Matcher(grammar).fill_bitmask(row)
    grammar.fill_bitmask([grammar.initial_state], rows)
    assert torch.equal(row, rows[0]) and row.any()
    with pytest.raises(ValueError, match="int32 array"):
        Matcher(grammar).fill_bitmask(torch.zeros(width, dtype=torch.int64))


# ------------------------------------------------------------------ check --tokens (4)
def test_check_tokens_counts_the_tokens_of_the_real_mask(grammars, tmp_path):
    """On a call grammar the count was looked up with a configuration id as a table state:
    a wrong count, then an IndexError once the id passed the number of table states. (Walked
    until 3 x the table's states configurations were met, as when states were ids.)"""
    grammar = grammars["calls"]
    grammar.save(tmp_path / "tree.safetensors")
    fresh = grammarc.load(tmp_path / "tree.safetensors")
    rng, eos = random.Random(7), set(fresh.eos_token_ids)
    ids, state, met = [], fresh.initial_state, {fresh.initial_state}
    while len(met) < 3 * fresh.num_states:  # well past the table states
        allowed = [t for t in fresh.allowed(state).tolist() if t not in eos]
        if not allowed:  # the text is complete: start another walk
            ids, state = [], fresh.initial_state
            continue
        ids.append(rng.choice(allowed))
        state = fresh.next_state(state, ids[-1])
        met.add(state)
    forbidden = int(np.flatnonzero(~fresh.mask(state))[0])
    result = run_cli("check", "tree.safetensors", "--tokens",
                     ",".join(map(str, ids + [forbidden])), "--json", cwd=tmp_path, seconds=120,
                     memory_gb=4)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    report = __import__("json").loads(result.stdout)
    assert report["reason"] == "forbidden_token" and report["token_index"] == len(ids)
    assert report["allowed_tokens"] == int(np.count_nonzero(fresh.mask(state)))


# ------------------------------------------------------------- forged artifacts (3, 9)
@pytest.fixture(scope="module")
def artifacts(grammars, tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("artifacts")
    paths = {"flat": ROOT / "artifacts" / "iso-date.safetensors",
             "calls": folder / "tree.safetensors", "csr": folder / "date-csr.safetensors"}
    grammars["calls"].save(paths["calls"])
    grammars["flat"].save(paths["csr"], layout="csr")
    return paths


def _call_at_start(metadata: dict, tensors: dict) -> None:
    """The root, at its start, calls itself on a byte it cannot read there: left recursion
    that the byte rules follow forever (a 4 KB file once took 1.4 GB in 20 s)."""
    start, byte = 1, ord("x")
    at = int(tensors["call_ptr"][start])
    tensors["call_ptr"] = tensors["call_ptr"].copy()
    tensors["call_ptr"][start + 1:] += 1
    tensors["call_machine"] = np.insert(tensors["call_machine"], at, 0)
    tensors["call_return"] = np.insert(tensors["call_return"], at, start)
    _claim_first_byte(metadata, tensors, byte)


def _claim_first_byte(metadata: dict, tensors: dict, byte: int = ord("x")) -> None:
    tensors["machine_first"] = tensors["machine_first"].copy()
    tensors["machine_first"][0, byte] = 1


def _called_root_accepts_nothing(metadata: dict, tensors: dict) -> None:
    tensors["accepting"] = tensors["accepting"].copy()
    tensors["accepting"][1] = 1


def _row_into_the_dead_state(metadata: dict, tensors: dict) -> None:
    """An entry of a row used by one state leads that state to state 0: the mask allowed a
    token whose step was 0."""
    rows, ptr = tensors["state_row"].astype(np.int64), tensors["row_ptr"].astype(np.int64)
    users = np.bincount(rows, minlength=len(ptr) - 1)
    state = next(s for s in range(1, len(rows)) if users[rows[s]] == 1 and
                 ptr[rows[s] + 1] > ptr[rows[s]])
    tensors["row_delta"] = tensors["row_delta"].astype(np.int32)
    tensors["row_delta"][ptr[rows[state]]] = -state


def _byte_edge_into_the_dead_state(metadata: dict, tensors: dict) -> None:
    tensors["byte_next"] = tensors["byte_next"].copy()
    tensors["byte_next"][0] = 0


@pytest.mark.parametrize("command", ["inspect", "verify", "check"])
@pytest.mark.parametrize("source,edit,message", [
    ("calls", _call_at_start, "a machine calls itself before reading a byte"),
    ("calls", _claim_first_byte, "machine_first does not hold the bytes the machines begin with"),
    ("calls", _called_root_accepts_nothing, "a called machine accepts the empty text"),
    ("flat", _row_into_the_dead_state, "a row leads to the dead state or a state out of range"),
    ("calls", _row_into_the_dead_state, "a row leads to the dead state or a state out of range"),
    ("flat", _byte_edge_into_the_dead_state, "byte_next out of range"),
    ("flat", lambda m, t: m.pop("num_rows"), "metadata num_classes or num_rows does not match"),
    ("flat", lambda m, t: m.update(num_classes=m["num_classes"] + 1),
     "metadata num_classes or num_rows does not match"),
    ("csr", lambda m, t: m.update(num_classes=3), "num_classes and num_rows are metadata of the "
                                                  "factored layout, not csr"),
    ("flat", lambda m, t: m.update(machines=[""]), "machines in a version 1 artifact"),
    ("flat", lambda m, t: m.update(source_sha256=5), "invalid source_sha256"),
    ("flat", lambda m, t: m.update(source_name=["a"]), "invalid source_name"),
    ("flat", lambda m, t: m.update(grammarc_version=None), "invalid grammarc_version"),
    ("flat", lambda m, t: m.update(start_state=2), "start_state must be 1"),
    ("flat", lambda m, t: m.update(dead_state=False), "dead_state must be 0"),
])
def test_what_the_compiler_never_writes_is_refused_on_loading(artifacts, tmp_path, command,
                                                              source, edit, message):
    """Each passed `load` and `verify` (then `check` looped forever, `inspect` raised, or a
    mask allowed a token into the dead state); now one line, under a time and memory cap."""
    forged = tmp_path / "forged.safetensors"
    rewrite_artifact(artifacts[source], forged, edit)
    result = run_artifact_command(command, forged, seconds=60, memory_gb=2)
    assert_clean_error(result, f"forged.safetensors: {message}")


def test_metadata_keys_no_reader_knows_are_ignored(artifacts, tmp_path):
    forged = tmp_path / "extra.safetensors"
    rewrite_artifact(artifacts["calls"], forged, lambda m, t: m.update(
        comment={"by": ["hand", 5]}, options={**m["options"], "future": [1]}))
    for command in ("inspect", "check"):
        result = run_artifact_command(command, forged, seconds=60, memory_gb=2)
        assert "Traceback" not in result.stderr and result.returncode in (0, 1), result.stderr
    assert grammarc.load(forged).matches('{"k": []}') == grammarc.load(
        artifacts["calls"]).matches('{"k": []}')


# ------------------------------------------------------------ check on long texts (7)
LONG = 2_000_000


@pytest.fixture(scope="module")
def counted(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("counted")
    schema = '{"type": "string", "maxLength": 100000000}'
    assert compile_file(folder, "s.schema.json", schema).returncode == 0
    return folder / "out.safetensors"


def test_check_keeps_no_configuration_per_character(counted):
    """`check` gave every configuration of the text an id: ~220 bytes a character (6 MB of
    text: 1.4 GB, 15 MB: a MemoryError traceback). 2 MB of text once needed ~470 MB."""
    result = run_cli("check", str(counted), "-", input='"' + "a" * LONG, seconds=120,
                     memory_gb=0.3)
    assert result.returncode == 1 and result.stderr == "", result.stderr
    assert f"no: the text ended early; more must follow at character {LONG + 2}" \
        in result.stdout, result.stdout


@pytest.mark.parametrize("walk", [
    lambda g, text: g.matches(text),
    lambda g, text: g.walk_bytes(text),
    lambda g, text: g.walk_prefix(text),
])
def test_byte_walks_take_memory_independent_of_the_text(counted, walk):
    import tracemalloc

    grammar = grammarc.load(counted)
    text = b"\"" + b"a" * 100_000
    texts = [text, text + b'"']
    walk(grammar, b'"a')  # the byte table, built once
    tracemalloc.start()
    try:
        for each in texts:
            walk(grammar, each)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 100_000, peak  # once ~22 MB: an id per configuration met
    assert grammar.walk_prefix(text + b"\x00") == (len(text), grammar.walk_bytes(text))
    assert grammar.matches(text + b'"') and not grammar.matches(text)


# ------------------------------------------------------------------------- (?u) (6)
U_FLAG = ("unsupported regex construct: the u flag (Unicode \\d, \\w, \\s and case folding) "
          "is not supported; grammarc's are ASCII")


@pytest.mark.parametrize("name,source,where", [
    ("global.regex", r"(?u)\w+", "1:1"),
    ("both.regex", "(?iu)k", "1:1"),
    ("scoped.regex", r"x(?u:\w)", "1:2"),  # once compiled ASCII \w where `re` matches é
    ("global.lark", "start: A\nA: /(?u)a/\n", "2:5"),
    ("scoped.lark", "start: A\nA: /x(?iu:a)/\n", "2:6"),
    ("flag.lark", "start: A\nA: /a/u\n", "2:5"),
])
def test_the_u_flag_is_a_one_line_error_at_its_group(tmp_path, name, source, where):
    """`(?u)` was a ValueError traceback from `re` (ASCII and UNICODE flags together), and
    `(?u:...)` compiled ASCII classes where Python's `re` uses Unicode ones."""
    result = compile_file(tmp_path, name, source)
    assert_clean_error(result, f"{name}:{where}: " + ("terminal A: " if ".lark" in name else "")
                       + U_FLAG)
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_other_flags_still_compile(tmp_path):
    assert compile_file(tmp_path, "flags.regex", "(?i)a(?s:.)(?-i:b)").returncode == 0
    grammar = grammarc.load(tmp_path / "out.safetensors")
    assert grammar.matches("A\nb") and not grammar.matches("a\nB")
