"""The check of a schema document against its draft's meta-schema: a keyword of the wrong
type is an error at its JSON pointer, never silently ignored.

The meta-schema is that of the draft `resolution.draft_of` reads, the one the schema is
compiled in. jsonschema decides, with its messages and error locations. Importing it costs up
to a second where its optional format checkers are installed (`rfc3987-syntax`, which jupyter
and `jsonschema[format-nongpl]` bring, builds 39 Lark parsers on import): twenty to thirty
times the compile of a small schema. So a document is first evaluated here against the
meta-schema itself, by an evaluator of the few keywords meta-schemas use (`vouched_for`) that
answers only "valid" or "not sure": the documents it is not sure of (those with errors,
and unusual ones) go to jsonschema, which most compiles then never import.
"""

from __future__ import annotations

import importlib.util
import json
import re
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ...errors import GrammarError, UnsupportedError
from .conditions import value_key
from .resolution import MAP_KEYWORDS, draft_of, escape_token

# the meta-schema of each draft, as jsonschema_specifications names it
META_SCHEMAS = {4: "http://json-schema.org/draft-04/schema",
                6: "http://json-schema.org/draft-06/schema",
                7: "http://json-schema.org/draft-07/schema",
                2019: "https://json-schema.org/draft/2019-09/schema",
                2020: "https://json-schema.org/draft/2020-12/schema"}


def check_against_meta_schema(root: Any) -> None:
    """Raise `GrammarError` at the JSON pointer of the first keyword that the meta-schema of
    the document's draft rejects (`UnsupportedError` for a draft before 4)."""
    if not isinstance(root, (dict, bool)):
        shown = str(root) if isinstance(root, Decimal) else repr(root)  # as jsonschema's
        raise GrammarError(f"#: invalid schema: {shown[:40]} is not of type 'object', "
                           "'boolean'")
    if isinstance(root, dict) and not isinstance(root.get("$schema", ""), str):
        given = json.dumps(root["$schema"], default=str)[:40]
        raise GrammarError(f"#/$schema: invalid schema: {given} is not a meta-schema URI "
                           "(a string)")
    if isinstance(root, dict) and "$schema" in root:
        try:
            urlsplit(root["$schema"])
        except ValueError:  # a URI urllib cannot split ("http://[x", a broken IPv6 host)
            given = json.dumps(root["$schema"])[:40]
            raise GrammarError(f"#/$schema: invalid schema: {given} is not a meta-schema "
                               "URI") from None
    if draft_of(root) < 4:
        raise UnsupportedError(
            f"#/$schema: {root['$schema'][:60]} is a draft before draft 4, which grammarc does "
            "not read (its `required: true`, `extends` and `disallow` would be ignored): "
            "write the schema in draft 4 or later")
    if not vouched_for(root):
        _check_with_jsonschema(root)


def vouched_for(root: Any) -> bool:
    """Whether the document `root` is surely valid against its meta-schema: False where it
    is invalid, and where a keyword or value is one the evaluator here leaves to
    jsonschema."""
    if not isinstance(root, (dict, bool)) or \
            isinstance(root, dict) and not isinstance(root.get("$schema", ""), str):
        return False
    uri = META_SCHEMAS.get(draft_of(root))
    if uri is None:
        return False
    try:
        return _valid(meta_schema(uri), meta_schema(uri), root)
    except (_Unsure, RecursionError):
        return False


def _check_with_jsonschema(root: Any) -> None:
    """The check by jsonschema, with its error at its JSON pointer."""
    from jsonschema import exceptions

    error = exceptions.best_match(jsonschema_meta_validator(draft_of(root)).iter_errors(root))
    if error is None:
        return
    pointer = "#" + "".join("/" + escape_token(str(part)) for part in error.absolute_path)
    message = error.message if len(error.message) <= 120 else error.message[:117] + "..."
    raise GrammarError(f"{pointer}: invalid schema: {message}")


@lru_cache(maxsize=None)
def jsonschema_meta_validator(draft: int) -> Any:
    """A jsonschema validator of documents of `draft` against its `meta_schema`, built
    once."""
    import jsonschema

    classes = {4: jsonschema.Draft4Validator, 6: jsonschema.Draft6Validator,
               7: jsonschema.Draft7Validator, 2019: jsonschema.Draft201909Validator,
               2020: jsonschema.Draft202012Validator}
    return classes[draft](meta_schema(META_SCHEMAS[draft]))


@lru_cache(maxsize=None)
def meta_schema(uri: str) -> dict:
    """The meta-schema `uri`. The 2019-09 and 2020-12 meta-schemas are an `allOf` of
    vocabularies that refer back to the whole meta-schema with
    `$recursiveRef`/`$dynamicRef`, which a validator resolves through the dynamic scope at
    every level of every vocabulary (a large part of a small schema's compile time). Here the
    vocabularies, each only `type`, `properties` and `$defs`, are merged into one schema and
    those references point at its root, which is what they resolve to when the meta-schema
    itself is the root: the same verdicts and error locations, 4-5x faster."""
    top = published(uri)
    if "allOf" not in top or not any("$vocabulary" in key for key in top):
        return top
    base = top["$id"].rsplit("/", 1)[0] + "/"
    names = [part["$ref"] for part in top["allOf"]]

    def static(node: Any, name: str | None) -> Any:  # a subschema of vocabulary `name`
        if isinstance(node, list):
            return [static(item, name) for item in node]
        if not isinstance(node, dict):
            return node
        out = {}
        for key, value in node.items():
            if key in ("$dynamicRef", "$recursiveRef"):
                out["$ref"] = "#"
            elif key == "$ref":
                document, _, fragment = value.partition("#")
                document = document or name
                out["$ref"] = f"#/$defs/{names.index(document)}{fragment}" if document else \
                    "#" + fragment
            elif key in MAP_KEYWORDS:  # names, each with a subschema
                out[key] = {k: static(v, name) for k, v in value.items()}
            elif key not in ("$id", "$dynamicAnchor", "$recursiveAnchor", "$vocabulary") and \
                    (key != "$schema" or name is None):
                out[key] = static(value, name)
        return out

    merged = static({k: v for k, v in top.items() if k != "allOf"}, None)
    merged["$defs"], properties = {}, dict(merged.get("properties", {}))
    for i, name in enumerate(names):
        vocabulary = static(published(base + name), name)
        if not set(vocabulary) <= {"title", "type", "properties", "$defs"} or \
                vocabulary.get("type") != top.get("type") or \
                set(vocabulary.get("properties", {})) & set(properties):
            return top  # not the shape known to merge: the meta-schema as it is
        properties.update(vocabulary.get("properties", {}))
        merged["$defs"][str(i)] = {"$defs": vocabulary.get("$defs", {})}
    return {**merged, "properties": properties}


def published(uri: str) -> dict:
    """The meta-schema or vocabulary `uri` as `jsonschema_specifications` ships it, read from
    its file: importing the package loads every draft's files into a `referencing` registry
    (50 ms, a fifth of a first compile), which is the way taken where its files are not
    where this version of it keeps them."""
    parts = urlsplit(uri)
    draft = parts.path.replace("/draft/", "/draft").strip("/").split("/")
    names = {"draft-04": "draft4", "draft-06": "draft6", "draft-07": "draft7",
             "draft2019-09": "draft201909", "draft2020-12": "draft202012"}
    spec = importlib.util.find_spec("jsonschema_specifications")
    folder = names.get(draft[0]) if len(draft) in (2, 3) else None
    if spec is not None and spec.submodule_search_locations and folder is not None:
        path = Path(spec.submodule_search_locations[0], "schemas", folder,
                    "metaschema.json" if len(draft) == 2 else f"vocabularies/{draft[2]}")
        try:
            found = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            found = None
        if isinstance(found, dict) and \
                urlsplit(found.get("$id") or found.get("id") or "").geturl() == uri:
            return found
    from jsonschema_specifications import REGISTRY

    return REGISTRY.contents(uri)


class _Unsure(Exception):
    """The evaluator cannot vouch for the verdict: jsonschema decides."""


# what meta-schemas hold besides assertions; `format` asserts nothing in jsonschema's check
_ANNOTATIONS = frozenset({"$schema", "$id", "id", "$comment", "title", "description",
                          "default", "deprecated", "examples", "definitions", "$defs",
                          "format", "readOnly", "writeOnly"})
_TYPES = {"object": dict, "array": list, "string": str, "null": type(None), "boolean": bool}


def _valid(root: dict, schema: Any, instance: Any) -> bool:
    """Whether `instance` is valid against `schema`, a subschema of the meta-schema `root`."""
    if isinstance(schema, bool):
        return schema
    if not isinstance(schema, dict):
        raise _Unsure
    if "$ref" in schema:
        if not _valid(root, _pointed(root, schema["$ref"]), instance):
            return False
        if root.get("$schema", "").startswith("http://json-schema.org/draft-0"):
            return True  # drafts 4 to 7: a $ref's siblings are ignored
    for keyword, value in schema.items():
        if keyword in _ANNOTATIONS or keyword == "$ref":
            continue
        check = _KEYWORDS.get(keyword)
        if check is None:
            raise _Unsure
        if not check(root, value, instance, schema):
            return False
    return True


def _pointed(root: dict, reference: str) -> Any:
    """The subschema of `root` at the reference `#...` (a JSON pointer)."""
    if not reference.startswith("#") or reference != "#" and not reference.startswith("#/"):
        raise _Unsure
    node: Any = root
    for token in reference[2:].split("/") if reference != "#" else ():
        token = token.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or token not in node:
            raise _Unsure
        node = node[token]
    return node


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)


def _of_type(name: Any, instance: Any) -> bool:
    if name in _TYPES:
        return isinstance(instance, _TYPES[name])
    if name == "number":
        return _is_number(instance)
    if name == "integer":
        if isinstance(instance, (float, Decimal)) and _is_number(instance):
            raise _Unsure  # 1.0 is an integer in some drafts only
        return isinstance(instance, int) and not isinstance(instance, bool)
    raise _Unsure


def _type(root: dict, value: Any, instance: Any, schema: dict) -> bool:
    names = value if isinstance(value, list) else [value]
    return any(_of_type(name, instance) for name in names)


def _json_key(value: Any) -> Any:
    """`value_key` (JSON's equality), for values whose numbers are exact (a document read
    from JSON text holds `Decimal`s; `value_key` compares a float by its shortest spelling,
    jsonschema by its exact value) and finite."""
    if isinstance(value, float) or isinstance(value, Decimal) and not value.is_finite():
        raise _Unsure
    if isinstance(value, list):
        for item in value:
            _json_key(item)
    elif isinstance(value, dict):
        for item in value.values():
            _json_key(item)
    try:
        return value_key(value)
    except TypeError:
        raise _Unsure from None


def _enum(root: dict, value: Any, instance: Any, schema: dict) -> bool:
    return _json_key(instance) in {_json_key(v) for v in value}


def _minimum(root: dict, value: Any, instance: Any, schema: dict) -> bool:
    if not _is_number(instance):
        return True
    if not _is_number(value):
        raise _Unsure
    return instance > value if schema.get("exclusiveMinimum") is True else instance >= value


def _exclusive_minimum(root: dict, value: Any, instance: Any, schema: dict) -> bool:
    if isinstance(value, bool):  # draft 4: a flag of `minimum`
        return True
    if not _is_number(value):
        raise _Unsure
    return not _is_number(instance) or instance > value


def _min_items(root: dict, value: Any, instance: Any, schema: dict) -> bool:
    return not isinstance(instance, list) or len(instance) >= value


def _unique_items(root: dict, value: Any, instance: Any, schema: dict) -> bool:
    if value is not True or not isinstance(instance, list):
        return True
    keys = [_json_key(item) for item in instance]
    return len(set(keys)) == len(keys)


def _items(root: dict, value: Any, instance: Any, schema: dict) -> bool:
    if isinstance(value, list):
        raise _Unsure
    return not isinstance(instance, list) or all(_valid(root, value, item)
                                                  for item in instance)


def _properties(root: dict, value: Any, instance: Any, schema: dict) -> bool:
    return not isinstance(instance, dict) or all(
        _valid(root, sub, instance[key]) for key, sub in value.items() if key in instance)


def _additional_properties(root: dict, value: Any, instance: Any, schema: dict) -> bool:
    if "patternProperties" in schema:
        raise _Unsure
    named = schema.get("properties", {})
    return not isinstance(instance, dict) or all(
        _valid(root, value, item) for key, item in instance.items() if key not in named)


def _property_names(root: dict, value: Any, instance: Any, schema: dict) -> bool:
    return not isinstance(instance, dict) or all(_valid(root, value, key) for key in instance)


def _pattern(root: dict, value: Any, instance: Any, schema: dict) -> bool:
    return not isinstance(instance, str) or re.search(value, instance) is not None


def _dependencies(root: dict, value: Any, instance: Any, schema: dict) -> bool:
    if not isinstance(instance, dict):
        return True
    for key, dependency in value.items():
        if key not in instance:
            continue
        if isinstance(dependency, list):
            if not all(name in instance for name in dependency):
                return False
        elif not _valid(root, dependency, instance):
            return False
    return True


_KEYWORDS = {
    "type": _type, "enum": _enum, "minimum": _minimum, "exclusiveMinimum": _exclusive_minimum,
    "minItems": _min_items, "uniqueItems": _unique_items, "items": _items,
    "properties": _properties, "additionalProperties": _additional_properties,
    "propertyNames": _property_names, "pattern": _pattern, "dependencies": _dependencies,
    "allOf": lambda root, value, instance, schema: all(_valid(root, s, instance) for s in value),
    "anyOf": lambda root, value, instance, schema: any(_valid(root, s, instance) for s in value),
}
