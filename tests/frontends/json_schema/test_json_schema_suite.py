"""The official JSON-Schema-Test-Suite (draft 2020-12 and draft 7), read in place from ../shared.

For every group whose schema compiles, each instance is serialised the way grammarc's table
expects it (`canonical_dumps`: keys in the schema's order, json.dumps separators) and walked
through the byte DFA. An accepted invalid instance is always a failure. A rejected valid instance
is a failure unless it is one of grammarc's documented restrictions (values nested deeper than
--max-depth, numbers written with an exponent, `format` asserted rather than annotated). Groups
that do not compile must fail with `UnsupportedError`, or with the "accepts no value" error when
every instance is invalid.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from concurrent.futures import ProcessPoolExecutor

import pytest
from helpers import SHARED

SUITE = SHARED / "conformance" / "json-schema-test-suite" / "tests"
MAX_DEPTH = 4
# keyword files outside grammarc's scope, with the reason
SKIPPED = {
    "refRemote.json": "remote $ref (documents fetched over the network)",
    "vocabulary.json": "custom meta-schema vocabularies",
}
# optional format files for the formats grammarc checks
FORMATS = ["date", "time", "date-time", "duration", "email", "hostname", "ipv4", "ipv6", "uri",
           "uri-reference", "uuid"]

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.skipif(not SUITE.is_dir(), reason="../shared (conformance data) is absent"),
]


def _files() -> list[str]:
    if not SUITE.is_dir():
        return []
    out = []
    for draft in ("draft2020-12", "draft7"):
        out += [f"{draft}/{p.name}" for p in sorted((SUITE / draft).glob("*.json"))
                if p.name not in SKIPPED]
        out += [f"{draft}/optional/format/{f}.json" for f in FORMATS
                if (SUITE / draft / "optional" / "format" / f"{f}.json").is_file()]
    return out


def _depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _has_exponent(value) -> bool:
    if isinstance(value, float):
        return "e" in repr(value) or math.isinf(value)
    if isinstance(value, dict):
        return any(_has_exponent(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_exponent(v) for v in value)
    return False


def run_file(name: str) -> dict:
    """Counts and failures for one suite file (runs in a worker process)."""
    from grammarc.errors import GrammarError, UnsupportedError
    from grammarc.frontends import FrontendOptions
    from grammarc.automaton.linking import language_automaton
    from grammarc.frontends.json_schema import canonical_dumps, compile_schema

    counts: Counter = Counter()
    failures: list[str] = []
    # the suite follows the specification: 1.0 is an integer from draft 6 on
    options = FrontendOptions(max_depth=MAX_DEPTH, integer_fractions=True,
                              notice=lambda message: None)
    for group in json.loads((SUITE / name).read_text()):
        schema, tests = group["schema"], group["tests"]
        counts["groups"] += 1
        if name.startswith("draft7") and isinstance(schema, dict) and "$schema" not in schema:
            schema = {"$schema": "http://json-schema.org/draft-07/schema#", **schema}
        try:
            dfa = language_automaton(compile_schema(schema, options), options.max_states,
                                     options.max_depth, options.notice)
        except UnsupportedError:
            counts["unsupported"] += 1
            continue
        except GrammarError as exc:
            if "accepts no value" in str(exc) or "matches no string" in str(exc):
                counts["empty"] += 1
                valid = [t["description"] for t in tests if t["valid"]]
                failures += [f"{group['description']}: {v}: valid, but the schema compiled "
                             "to the empty language" for v in valid]
                counts["correct"] += len(tests) - len(valid)
                continue
            failures.append(f"{group['description']}: unexpected error: {exc}")
            continue
        counts["compiled"] += 1
        for test in tests:
            text = canonical_dumps(schema, test["data"])
            accepted = dfa.accepts(text.encode("utf-8"))
            if accepted == test["valid"]:
                counts["correct"] += 1
            elif accepted:
                counts["accepted invalid"] += 1
                failures.append(f"{group['description']}: {test['description']}: ACCEPTED "
                                f"INVALID {text[:80]}")
            elif _depth(test["data"]) > MAX_DEPTH:
                counts["rejected valid: depth"] += 1
            elif _has_exponent(test["data"]):
                counts["rejected valid: exponent"] += 1
            elif "format" in name:
                counts["rejected valid: format"] += 1
            else:
                counts["rejected valid: UNEXPLAINED"] += 1
                failures.append(f"{group['description']}: {test['description']}: rejected "
                                f"valid {text[:80]}")
    return {"counts": dict(counts), "failures": failures}


@pytest.fixture(scope="session")
def suite_results() -> dict[str, dict]:
    files = _files()
    with ProcessPoolExecutor(max_workers=2) as pool:
        return dict(zip(files, pool.map(run_file, files)))


@pytest.mark.parametrize("name", _files())
def test_suite_file(name, suite_results):
    result = suite_results[name]
    hard = [f for f in result["failures"] if "ACCEPTED INVALID" in f or "optional" not in name]
    assert not hard, "\n".join(hard)


def test_report(suite_results, capsys):
    """Coverage per keyword file (printed; run with -s to see it)."""
    total: Counter = Counter()
    lines = [f"{'file':50} groups compiled unsupported empty  tests-correct  rejected-valid"]
    for name, result in suite_results.items():
        c = Counter(result["counts"])
        total.update(c)
        rejected = sum(v for k, v in c.items() if k.startswith("rejected valid"))
        lines.append(f"{name:50} {c['groups']:6} {c['compiled']:8} {c['unsupported']:11} "
                     f"{c['empty']:5}  {c['correct']:13}  {rejected:14}")
    lines.append(f"{'TOTAL':50} {total['groups']:6} {total['compiled']:8} "
                 f"{total['unsupported']:11} {total['empty']:5}  {total['correct']:13}")
    lines.append("rejected valid by reason: " + ", ".join(
        f"{k[len('rejected valid: '):]} {v}" for k, v in sorted(total.items())
        if k.startswith("rejected valid")))
    lines.append("skipped files: " + "; ".join(f"{k} ({v})" for k, v in SKIPPED.items()))
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert total["accepted invalid"] == 0
    assert total["compiled"] > 0.75 * total["groups"]
