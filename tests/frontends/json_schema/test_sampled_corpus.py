"""`benchmarks/jsonschema_bench.py --sample`: random texts of the tables of real-world schemas
and of the JSON-Schema-Test-Suite's, judged by the tests' `jsonschema` oracle. A short run
keeps the script working and a finding fails CI; the oracle is shown to refuse what the schema
forbids. Long runs are in benchmarks/README.md."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from helpers import SHARED

import grammarc

ROOT = Path(__file__).resolve().parents[3]
CORPUS = SHARED / "conformance" / "maskbench-dev"
sys.path.insert(0, str(ROOT / "benchmarks"))
import jsonschema_bench  # noqa: E402  (a script, imported for its sampling check)


def test_sampled_texts_of_corpus_schemas_validate():
    if not CORPUS.is_dir():
        pytest.skip("maskbench-dev is not beside the checkout (GRAMMARC_SHARED)")
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "jsonschema_bench.py"), "--corpus",
         str(CORPUS), "--stride", "55", "--sample", "4", "--jobs", "2"],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    found = re.search(r"(\d+) sampled texts judged from (\d+) schemas, (\d+) invalid", result.stdout)
    assert found, result.stdout[-3000:]
    texts, schemas, invalid = (int(x) for x in found.groups())
    assert schemas >= 10 and texts >= 4 * schemas - 4 and invalid == 0, result.stdout[-3000:]
    assert "grammarc: 0 tables with dead ends" in result.stdout, result.stdout[-3000:]


def test_the_sampling_check_refuses_what_the_schema_forbids():
    """A table looser than the schema it is judged by: sampled numbers past the maximum."""
    engine = jsonschema_bench.GrammarcEngine("")
    loose = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
             "additionalProperties": False}
    compiled = engine.compile(loose)
    strict = dict(loose, properties={"n": {"type": "integer", "maximum": 9}})
    case = jsonschema_bench.Case("strict.json", "strict", strict, [], 0)
    judged, invalid = jsonschema_bench.check_samples(engine, compiled, case, 8)
    assert judged == 8 and invalid
    assert all("is greater than the maximum of 9" in item["why"] for item in invalid)
    assert jsonschema_bench.check_samples(
        engine, compiled, jsonschema_bench.Case("loose.json", "loose", loose, [], 0), 8) == (8, [])


def test_the_sampling_oracle_reads_patterns_as_ecma_262():
    """JSON Schema's patterns are ECMA-262: `\\s` holds U+FEFF and not U+001C, `.` no CR
    (Python's `re` reads all three the other way, which called valid samples invalid)."""
    spaced = jsonschema_bench.sample_validator({"type": "string", "pattern": r"^\w{4}\s\d{3}$"})
    assert spaced.is_valid("ab_d\ufeff123") and not spaced.is_valid("ab_d\x1c123")
    keyed = jsonschema_bench.sample_validator({"patternProperties": {"^.+$": {"type": "object"}}})
    assert keyed.is_valid({"a\rb": True}) and not keyed.is_valid({"ab": True})


def test_the_sampling_oracle_checks_the_formats_grammarc_asserts():
    """The draft's own `time` (RFC 3339, an offset required), not draft 3's; `idn-email`,
    which grammarc does not assert, is an annotation."""
    judge = jsonschema_bench.why_invalid
    timed = jsonschema_bench.sample_validator({"format": "time"})
    assert judge(timed, b'"22:50:41Z"') is None and judge(timed, b'"22:50:41+01:00"') is None
    assert "is not a 'time'" in judge(timed, b'"22:50:41"')
    assert "is not a 'date'" in judge(jsonschema_bench.sample_validator({"format": "date"}),
                                      b'"2026-02-30"')
    assert judge(jsonschema_bench.sample_validator({"format": "idn-email"}), b'"x"') is None


def test_the_sampling_oracle_judges_numbers_exactly_or_not_at_all():
    """Floats would call 9.000000000000000000001 equal to 9 and 0.07 no multiple of 0.01."""
    validator = jsonschema_bench.sample_validator(
        {"type": "object", "properties": {"n": {"type": "number", "maximum": 9,
                                                "multipleOf": 0.01}, "i": {"type": "integer"}}})
    judge = jsonschema_bench.why_invalid
    assert judge(validator, b'{"n": 0.07, "i": 1.0}') is None  # 1.0 is integral: an integer
    assert "is greater than the maximum of 9" in judge(validator, b'{"n": 9.000000000000000000001}')
    assert "is not of type 'integer'" in judge(validator, b'{"i": 0.5}')
    draft4 = jsonschema_bench.sample_validator(
        {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"})
    assert "is not of type 'integer'" in judge(draft4, b"1.0")  # draft 4: spelled as one
    assert judge(validator, b'{"n": 1').startswith("not JSON")
    for past_exact in (b'{"n": 1e-101}', b'{"n": 2e101}', b"[" + b"7" * 5000 + b"]",
                       b'{"n": 49.7e3445549776529418085}'):
        with pytest.raises(ValueError):
            judge(validator, past_exact)
    # without multipleOf, large numbers are compared exactly
    assert "is greater than the maximum of 9" in judge(validator, b'{"n": 2e999999}',
                                                       arithmetic=False)
    assert judge(validator, b'{"n": -2e999999}', arithmetic=False) is None


SUITE = SHARED / "conformance" / "json-schema-test-suite" / "tests"
SUITE_DRAFTS = {"draft2020-12": "https://json-schema.org/draft/2020-12/schema",
                "draft7": "http://json-schema.org/draft-07/schema#"}


def test_sampled_texts_of_the_test_suites_schemas_validate():
    """The JSON-Schema-Test-Suite's schemas (the corner cases of every keyword), compiled for
    SmolLM2: four random texts of each that compiles, judged by the same oracle."""
    if not SUITE.is_dir():
        pytest.skip("../shared (conformance data) is absent")
    engine = jsonschema_bench.GrammarcEngine("")
    compiled = judged = 0
    invalid = []
    for draft, uri in SUITE_DRAFTS.items():
        for path in sorted((SUITE / draft).glob("*.json")):
            for index, group in enumerate(json.loads(path.read_text())):
                schema = group["schema"]
                if isinstance(schema, dict) and "$schema" not in schema:
                    schema = {**schema, "$schema": uri}
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        grammar = engine.compile(schema)
                except grammarc.GrammarcError:
                    continue
                compiled += 1
                case = jsonschema_bench.Case(f"{draft}/{path.name}#{index}", draft, schema, [], 0)
                count, wrong = jsonschema_bench.check_samples(engine, grammar, case, 4)
                judged += count
                invalid += [(case.name, item) for item in wrong]
    assert compiled > 400 and judged > 3 * compiled and not invalid, invalid[:5]
