"""What a schema node says, read without compiling it: the keywords of JSON Schema by job,
the types a node allows and the bytes their values start with, and the small readings of
nodes that dispatch, merging and the object and array builders share."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np

from ...errors import GrammarError

_APPLICATORS = ("$ref", "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
                "dependentSchemas", "unevaluatedProperties", "unevaluatedItems",
                "$dynamicRef", "$recursiveRef")
TYPES = ("null", "boolean", "object", "array", "number", "integer", "string")
_FIRST_BYTES = {"object": b"{", "array": b"[", "string": b'"', "null": b"n", "boolean": b"tf",
                "number": b"-0123456789"}  # the bytes a JSON value of each type starts with
_TYPE_SPECIFIC = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
                  "minLength", "maxLength", "pattern", "format", "items", "prefixItems",
                  "additionalItems", "minItems", "maxItems", "uniqueItems", "contains",
                  "properties", "patternProperties", "additionalProperties", "required",
                  "minProperties", "maxProperties", "propertyNames", "dependentRequired",
                  "dependencies"}
KEYWORDS = frozenset({*_TYPE_SPECIFIC, "type", "enum", "const", *_APPLICATORS})  # not annotations
ANNOTATIONS = frozenset({"title", "description", "$comment", "examples", "default",
                          "deprecated", "readOnly", "writeOnly"})  # no effect on validation
# the keywords of schemas whose `allOf` is merged into one schema (`_merged_objects`)
OBJECT_MERGE_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties",
                                    "minProperties", "maxProperties", "allOf", "$ref"})


def first_bytes(types: set[str]) -> np.ndarray:
    """The bytes JSON values of `types` start with (bool [256])."""
    first = np.zeros(256, bool)
    for name in types:
        first[list(_FIRST_BYTES["number" if name == "integer" else name])] = True
    return first


def bytes_label(allowed: np.ndarray) -> str:
    """A short name of a set of first bytes: the JSON types they start, where they are exactly
    those types' first bytes, else their hexadecimal values."""
    types = [name for name, spelled in _FIRST_BYTES.items() if allowed[list(spelled)].all()]
    spelled_types = np.zeros(256, bool)
    for name in types:
        spelled_types[list(_FIRST_BYTES[name])] = True
    if (spelled_types == allowed).all():
        return "|".join(sorted(types))
    return " ".join(f"{b:02x}" for b in np.flatnonzero(allowed))


def types_tested(schema: Any) -> set[str] | None:
    """The types a schema that tests only the type allows (integer with number), or None for
    another schema and for one that tells integers from other numbers (the first byte does
    not)."""
    if not isinstance(schema, dict) or set(schema) & KEYWORDS != {"type"}:
        return None
    declared = schema["type"]
    types = {declared} if isinstance(declared, str) else set(declared) \
        if isinstance(declared, list) else set()
    if not types or not types <= set(TYPES) or "integer" in types and "number" not in types:
        return None
    return types | {"integer"} if "number" in types else types


def distinct_schemas(schemas: list[Any]) -> list[Any]:
    """The schemas less those equal (as JSON but for their own annotations, read against the
    same base) to an earlier one:
    a value satisfies a schema twice as it does once, and the product of two equal
    automata would make their calls flat for nothing (a property that patternProperties
    also match with the same schema, as in the Washington Post's content schemas)."""
    if len(schemas) < 2:
        return schemas
    seen: dict[str, Any] = {}
    for schema in schemas:
        if isinstance(schema, dict):  # its own annotations aside
            key = json.dumps({k: v for k, v in schema.items() if k not in ANNOTATIONS},
                             sort_keys=True, default=repr)
        else:
            key = json.dumps(schema)
        seen.setdefault(key, schema)
    return list(seen.values())


def count_keyword(node: dict, key: str) -> int | None:
    """A non-negative integer keyword (1.0 counts as 1), or None when absent."""
    value = node.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)) or value < 0 or \
            value != int(value):
        raise GrammarError(f"{key} must be a non-negative integer, not {value}")
    return int(value)


def exact_numbers(value: Any) -> Any:
    """The schema with floats replaced by the Decimals they were written as (0.1 stays 0.1)."""
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {k: exact_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [exact_numbers(v) for v in value]
    return value


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, (Decimal, float)) and value == int(value)):
        return "integer"
    if isinstance(value, (Decimal, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def is_container(node: Any) -> bool:
    """Whether a schema describes objects or arrays only (a `$ref` to it becomes a call of
    one machine: its automaton is large and used in many places)."""
    if not isinstance(node, dict):
        return False
    declared = node.get("type")
    if isinstance(declared, str):
        return declared in ("object", "array")
    if isinstance(declared, list) and declared:
        return all(t in ("object", "array") for t in declared)
    return any(key in node for key in ("properties", "items", "additionalProperties",
                                       "patternProperties", "required"))


def declared_types(node: dict, pointer: str) -> frozenset[str]:
    """The types a schema's `type` allows (all without one; integer with number);
    `pointer` locates an invalid one."""
    declared = node.get("type")
    if declared is None:
        return frozenset(TYPES)
    names = [declared] if isinstance(declared, str) else declared
    if not isinstance(names, list) or not all(n in TYPES for n in names):
        raise GrammarError(f"{pointer}: invalid type {declared!r}")
    types = set(names)
    if "number" in types:
        types.add("integer")
    return frozenset(types)


@dataclass(frozen=True)
class SchemaNode:
    """A schema object as value dispatch reads it, once: the types it allows and its keywords
    grouped by job (those of one type's values: bounds, lengths, items, properties, ...;
    the enumerated values; the applicators, which apply other schemas in place)."""

    node: dict
    types: frozenset[str]
    type_specific: frozenset[str]
    enumerates: bool  # `enum` or `const`
    applicators: frozenset[str]

    @classmethod
    def read(cls, node: dict, pointer: str) -> SchemaNode:
        return cls(node, declared_types(node, pointer), frozenset(node.keys() & _TYPE_SPECIFIC),
                   "enum" in node or "const" in node, frozenset(node.keys() & set(_APPLICATORS)))

    @property
    def type_only(self) -> bool:
        """Whether its own keywords constrain values by `type` alone."""
        return "type" in self.node and not self.type_specific and not self.enumerates

    @property
    def constrains_locally(self) -> bool:
        """Whether the schema restricts values by itself (not only through applicators)."""
        return bool(self.type_specific) or self.enumerates or "type" in self.node

    @property
    def constrains_anything(self) -> bool:
        """Whether the schema restricts values or their parts by itself or through
        applicators."""
        return self.constrains_locally or bool(self.applicators)
