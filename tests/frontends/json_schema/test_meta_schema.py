"""The meta-schema check's own evaluator (`meta.vouched_for`): it may pass a document only where
jsonschema does (checked on every schema of the repository and the corpus, and on thousands
of their mutants), it passes real schemas (so compiling them never imports jsonschema), and
every document it is not sure of gets jsonschema's verdict."""

from __future__ import annotations

import copy
import json
from decimal import Decimal
import random
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import SHARED

from grammarc.frontends.json_schema import meta
from grammarc.frontends.json_schema.resolution import draft_of

ROOT = Path(__file__).resolve().parents[3]
# read as a compile reads them: numbers other than integers as exact decimals
SCHEMAS = [json.loads(p.read_text(), parse_float=Decimal)
           for p in sorted((ROOT / "grammars").glob("*.schema.json"))]
CORPUS = SHARED / "conformance" / "maskbench-dev"
DRAFTS = ["http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-06/schema#",
          "http://json-schema.org/draft-07/schema#",
          "https://json-schema.org/draft/2019-09/schema",
          "https://json-schema.org/draft/2020-12/schema", "http://json-schema.org/schema#"]
# values a mutation puts in place of a key's value or a list's item
REPLACEMENTS = [None, 1, -1, 0, Decimal("1.5"), Decimal("2.0"), Decimal("-0.5"), "x", "", [],
                ["x", "x"], ["a"], [1, Decimal("1.0")], {}, True, False, [1], {"a": 1},
                {"type": 3}, "#frag", "^a$", [{"type": "x"}], {"$ref": 5},
                ["string", "string"], [True, 1], DRAFTS[0], DRAFTS[3]]


def jsonschema_valid(document) -> bool:
    """jsonschema's verdict against the published meta-schema of the document's draft."""
    import jsonschema
    from jsonschema import exceptions

    if not isinstance(document, (dict, bool)) or \
            isinstance(document, dict) and not isinstance(document.get("$schema", ""), str):
        return False  # refused before any meta-schema is chosen
    classes = {4: jsonschema.Draft4Validator, 6: jsonschema.Draft6Validator,
               7: jsonschema.Draft7Validator, 2019: jsonschema.Draft201909Validator,
               2020: jsonschema.Draft202012Validator}
    cls = classes.get(draft_of(document))
    return cls is not None and \
        exceptions.best_match(cls(cls.META_SCHEMA).iter_errors(document)) is None


def mutants(document, count: int, rng: random.Random):
    """`count` copies of `document`, each with one value (at any depth) replaced."""
    for _ in range(count):
        copied = copy.deepcopy(document)
        places = []

        def collect(node):
            items = node.items() if isinstance(node, dict) else enumerate(node) \
                if isinstance(node, list) else ()
            for key, value in items:
                places.append((node, key))
                collect(value)

        collect(copied)
        if places:
            node, key = rng.choice(places)
            node[key] = copy.deepcopy(rng.choice(REPLACEMENTS))
        yield copied


def assert_sound(documents, per_document: int, seed: int) -> int:
    """Every document and mutant the evaluator passes is one jsonschema passes; the number
    the evaluator passes."""
    rng = random.Random(seed)
    passed = 0
    for document in documents:
        for candidate in [document, *mutants(document, per_document, rng)]:
            if meta.vouched_for(candidate):
                assert jsonschema_valid(candidate), json.dumps(candidate)[:300]
                passed += 1
    return passed


def test_the_repository_schemas_in_every_draft_are_vouched_for_and_mutants_are_sound():
    documents = [dict(schema, **{"$schema": draft}) for schema in SCHEMAS for draft in DRAFTS]
    valid = [d for d in documents if jsonschema_valid(d)]
    assert len(valid) > len(documents) * 0.9  # draft 4 refuses a numeric exclusiveMinimum
    assert all(meta.vouched_for(d) for d in valid)
    assert assert_sound(documents, 12, seed=1) > len(documents)


def test_the_corpus_is_vouched_for_and_its_mutants_are_sound():
    if not CORPUS.is_dir():
        pytest.skip("maskbench-dev is not beside the checkout (GRAMMARC_SHARED)")
    documents = [json.loads(p.read_text(), parse_float=Decimal)["schema"]
                 for p in sorted(CORPUS.glob("*.json"))]
    assert all(meta.vouched_for(d) for d in documents)  # each one compiles without jsonschema
    assert_sound(documents, 2, seed=2)


@pytest.mark.parametrize("document", [
    {"type": "integer", "minimum": 1.0},  # numbers in any form
    {"$schema": DRAFTS[0], "required": []},  # draft 4: at least one
    {"$schema": DRAFTS[0], "minimum": 1, "exclusiveMinimum": 3},
    {"$schema": DRAFTS[2], "$ref": "#/definitions/a", "definitions": {"a": {}}, "type": 5},
    {"enum": [1, 1.0], "uniqueItems": True}, {"type": ["string", "string"]},
    {"$schema": "http://json-schema.org/draft-04/schema#",
     "enum": [1e23, 99999999999999991611392]},  # floats: equal only by their short spelling
    {"$schema": "https://json-schema.org/draft-04/schema", "exclusiveMinimum": 3},
    {"$id": "#frag"}, {"$anchor": "1a"}, {"properties": {"a": {"multipleOf": 0}}},
])
def test_documents_left_to_jsonschema_get_its_verdict(document):
    """Where the evaluator is not sure (or finds an error) jsonschema decides: the check
    passes exactly the documents jsonschema passes."""
    from grammarc.errors import GrammarError

    if jsonschema_valid(document):
        meta.check_against_meta_schema(document)
    else:
        assert not meta.vouched_for(document)
        with pytest.raises(GrammarError, match="invalid schema"):
            meta.check_against_meta_schema(document)


def test_meta_schemas_read_from_their_files_are_the_registrys():
    from jsonschema_specifications import REGISTRY

    uris = [uri for uri in REGISTRY if "draft-03" not in uri]
    assert len(uris) == 19
    for uri in uris:
        assert meta.published(uri) == REGISTRY.contents(uri), uri


def test_compiling_a_valid_schema_does_not_import_jsonschema():
    """Nor `jsonschema_specifications` and `referencing`: the meta-schema is read from its
    file."""
    code = ("import sys; from grammarc.frontends.json_schema import parse_json_schema; "
            f"parse_json_schema(open({str(ROOT / 'grammars' / 'order.schema.json')!r}).read()); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('jsonschema', 'jsonschema_specifications', 'referencing')))")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120, check=True)
    assert found.stdout.strip() == "[]", found.stdout


@pytest.mark.parametrize("uri", ["http://json-schema.org/draft-03/schema#",
                                 "http://json-schema.org/draft-03/schema",
                                 "https://json-schema.org/draft-02/schema#"])
def test_drafts_before_4_are_refused(uri):
    """Draft 3 spells `required` as `true` in the property, which later drafts ignore: read
    as a later draft, `{}` would pass where the key is required."""
    from grammarc.errors import UnsupportedError

    schema = {"$schema": uri, "properties": {"a": {"type": "string", "required": True}}}
    with pytest.raises(UnsupportedError, match=r"^#/\$schema: .* is a draft before draft 4"):
        meta.check_against_meta_schema(schema)
