"""JSON Schema to the language of the JSON texts of its valid instances.

Serialisation rules (documented in docs/json-schema.md):

* whitespace follows the layout chosen by `--whitespace`;
* at each position of the document, object keys follow one *ranking*: the property names of
  every schema that can apply there (through `allOf`, `anyOf`, `oneOf`, `not`, `if`, `$ref`,
  dependencies), keeping each `properties` order where they agree (`Position.ranking`); keys
  not in the ranking come after the ranked ones, in any order (with `--key-order any`, the
  ranked ones too, each at most once: `Position.any_order`). Because every branch of a
  position uses the same rule, intersections and complements of branch languages are exact;
* strings may use every JSON escape; numbers follow `numbers.py`;
* recursive `$ref`s and values no schema constrains (`{}`, `true`, additional properties,
  items without a schema) are machines called at run time, so they nest to any depth; where a
  boolean operation needs them flat, they are unrolled / nested at most `--max-depth` levels.

Boolean keywords (`allOf`, `not`, `oneOf`, `if`/`then`/`else`, `dependentSchemas`,
`contains`, patterns with lengths, ...) are computed on automata (`automaton.ops`).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property, lru_cache
from graphlib import CycleError, TopologicalSorter
from heapq import heapify, heappop, heappush
from itertools import combinations
from math import comb
from typing import Any, Callable, NamedTuple
from urllib.parse import unquote, urldefrag, urljoin

import numpy as np

from ...automaton import (
    EMPTY, NOTHING, Automaton, ByteDFA, Expr, Ops, alt, charset, concat, literal, repeat,
)
from ...automaton.callgraph import (
    called_names, reachable_machines, recursive_machines, replace_calls, starting_bytes,
    with_first_bytes,
)
from ...automaton.counters import counter_form, with_counted_repeat
from ...automaton.dfa import build_dfa
from ...automaton.expr import Alt, Call, MachineSet, exact_to
from ...automaton.linking import fallback_language, flat_language
from ...automaton.signals import UnresolvedCallError
from ...charsets import MAX_CODE_POINT, complement_ranges
from ...deepcall import call_with_deep_stack
from ...errors import GrammarError, TooManyStatesError, UnsupportedError
from .. import FrontendOptions
from ..regex import parse_regex
from . import numbers, strings
from .conditions import (
    APPLICATORS, MAX_KEY_STATES, ConditionReader, Formula, KeyCondition, dependencies_of, holds,
    value_key,
)

_ROOT_URI = "https://grammarc.invalid/root.json"
_DRAFTS = (("draft-04", 4), ("draft-06", 6), ("draft-07", 7), ("2019-09", 2019),
           ("2020-12", 2020))
# keywords holding one subschema / a list of subschemas / a map of subschemas
_SCHEMA_KEYWORDS = ("additionalProperties", "additionalItems", "contains", "propertyNames",
                    "not", "if", "then", "else", "unevaluatedProperties", "unevaluatedItems",
                    "contentSchema")
_LIST_KEYWORDS = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAP_KEYWORDS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_APPLICATORS = ("$ref", "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
                "dependentSchemas", "unevaluatedProperties", "unevaluatedItems",
                "$dynamicRef", "$recursiveRef")
_UNSUPPORTED = ("unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef")
_MAX_PATTERN_REGIONS = 8   # patternProperties per object (2^n key regions)
_MAX_INLINE_REPEAT = 16    # more counted array items than this: the item is a machine
_MAX_UNIQUE_SETS = 1 << 12  # sets of values an array with uniqueItems may have used
_MAX_UNIQUE_RANGE = 64      # integers a range an array with uniqueItems draws from may hold
_INTEGER_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_MAX_COPIED_VALUE = 8     # states of a value copied into each set of keys in any order
_MAX_LITERAL_ORDERS = 12   # keys of an enum/const object in any key order (2^n sets)
_MAX_KEY_SETS = 1 << 12    # sets of ranked keys an object in any key order may have read
_MAX_COUNT = 2**31 - 1     # the largest bound a count register holds (docs/FORMAT.md)
_TYPES = ("null", "boolean", "object", "array", "number", "integer", "string")
_FIRST_BYTES = {"object": b"{", "array": b"[", "string": b'"', "null": b"n", "boolean": b"tf",
                "number": b"-0123456789"}  # the bytes a JSON value of each type starts with
_ANY_MACHINE = "any"  # the machine of any JSON value (where no schema applies)
_CANONICAL = " (canonical numbers)"  # a machine's copy with numbers spelled canonically
_NUMBERS_START = np.zeros(256, bool)  # the first bytes of values that may hold a number
_NUMBERS_START[list(b"-0123456789[{")] = True
_ANY_CHARACTER = charset([(0, MAX_CODE_POINT)])
# a recursive $ref cut without calls: no value, and exact for none (an operation that
# subtracts it keeps nothing of its minuend, see `Ops`)
_CUT = Automaton(ByteDFA(np.zeros((2, 1), np.int32), np.zeros(256, np.int32),
                         np.zeros(2, bool)), -1)


def _first_bytes(types: set[str]) -> np.ndarray:
    """The bytes JSON values of `types` start with (bool [256])."""
    first = np.zeros(256, bool)
    for name in types:
        first[list(_FIRST_BYTES["number" if name == "integer" else name])] = True
    return first


@dataclass(frozen=True)
class Layout:
    """Where whitespace goes: around `:` and `,`, and inside brackets."""

    open_object: Expr
    close_object: Expr
    open_array: Expr
    close_array: Expr
    colon: Expr
    comma: Expr

    @classmethod
    def from_style(cls, style: str) -> "Layout":
        if style == "default":  # json.dumps: ", " and ": "
            return cls(literal("{"), literal("}"), literal("["), literal("]"), literal(": "),
                       literal(", "))
        if style == "compact":
            return cls(literal("{"), literal("}"), literal("["), literal("]"), literal(":"),
                       literal(","))
        if style == "flexible":
            # what JSON allows, bounded: spaces or tabs, or one line break and an indent
            indent = repeat(charset([(9, 9), (32, 32)]), 0, 20)
            ws = alt(indent, concat(repeat(literal("\r"), 0, 1), literal("\n"), indent))
        else:
            ws = _whitespace_regex(style)
        return cls(concat(literal("{"), ws), concat(ws, literal("}")), concat(literal("["), ws),
                   concat(ws, literal("]")), concat(ws, literal(":"), ws),
                   concat(ws, literal(","), ws))


WHITESPACE_STYLES = ("default", "compact", "flexible")
_JSON_WHITESPACE = frozenset(b"\t\n\r ")


def _whitespace_regex(style: str) -> Expr:
    """The language of a custom `--whitespace` regex, which must match JSON whitespace only
    (space, tab, line feed, carriage return): anything else would make the output invalid
    JSON, and a misspelt style (`compcat`) is refused instead of being matched literally."""
    try:
        ws = parse_regex(style, after=None)
    except GrammarError as exc:
        raise GrammarError(f"--whitespace {style!r}: {exc}") from None
    used = (build_dfa(ws).byte_table()[1:] != 0).any(axis=0)
    foreign = [b for b in np.flatnonzero(used) if b not in _JSON_WHITESPACE]
    if foreign:
        shown = repr(chr(foreign[0])) if foreign[0] < 0x80 else "a non-ASCII character"
        close = difflib.get_close_matches(style, WHITESPACE_STYLES, n=1, cutoff=0.6)
        raise GrammarError(
            f"--whitespace {style!r}: not a style ({', '.join(WHITESPACE_STYLES)})" +
            (f" (did you mean {close[0]!r}?)" if close else "") + ", and a regex of whitespace "
            f"must match JSON whitespace only (space, tab, \\n, \\r); this one matches {shown}")
    return ws


@dataclass(frozen=True, eq=False)
class Ref:
    """A subschema with the base URI in effect at it."""

    node: Any
    base: str


class Registry:
    """Every subschema of the document: base URIs, `$id` resources, anchors, JSON pointers."""

    def __init__(self, root: Any, draft: int) -> None:
        self.root = root
        self.draft = draft
        self.resources: dict[str, Any] = {}
        self.anchors: dict[tuple[str, str], Ref] = {}
        self.pointer_of: dict[int, str] = {}
        self.base_of: dict[int, str] = {}
        self._walk(root, _ROOT_URI, "")
        self.resources.setdefault(_ROOT_URI, root)

    def _walk(self, node: Any, base: str, pointer: str) -> None:
        if not isinstance(node, dict):
            return
        self.pointer_of.setdefault(id(node), "#" + pointer)
        node_id = node.get("$id" if self.draft >= 6 else "id")
        if "$ref" in node and self.draft <= 7:
            node_id = None  # draft 7 and earlier: $ref makes its siblings, $id too, ignored
        if isinstance(node_id, str):
            url, fragment = urldefrag(_join(base, node_id))
            if url:
                base = url
                self.resources.setdefault(url, node)
            if fragment and not fragment.startswith("/"):
                self.anchors[(base, fragment)] = Ref(node, base)
        self.base_of.setdefault(id(node), base)
        for key in ("$anchor", "$dynamicAnchor"):
            if isinstance(node.get(key), str):
                self.anchors[(base, node[key])] = Ref(node, base)
        for key in _SCHEMA_KEYWORDS:
            if key in node:
                self._walk(node[key], base, f"{pointer}/{key}")
        for key in _LIST_KEYWORDS + ("items",):
            value = node.get(key)
            if isinstance(value, list):
                for i, sub in enumerate(value):
                    self._walk(sub, base, f"{pointer}/{key}/{i}")
            elif key == "items":
                self._walk(value, base, f"{pointer}/items")
        for key in _MAP_KEYWORDS + ("dependencies",):
            value = node.get(key)
            if isinstance(value, dict):
                for name, sub in value.items():
                    self._walk(sub, base, f"{pointer}/{key}/{_escape(name)}")

    def at(self, node: Any, parent_base: str) -> Ref:
        """A subschema with its own base URI (its `$id` applied)."""
        return Ref(node, self.base_of.get(id(node), parent_base))

    def pointer(self, node: Any) -> str:
        return self.pointer_of.get(id(node), "?")

    def resolve(self, ref: Ref) -> Ref:
        target = ref.node["$ref"]
        if not isinstance(target, str):
            raise GrammarError(f"{self.pointer(ref.node)}: $ref must be a string")
        url, fragment = urldefrag(_join(ref.base, target))
        resource = self.resources.get(url)
        if resource is None:
            raise UnsupportedError(f"{self.pointer(ref.node)}: unsupported $ref {target!r}: "
                                   "only references within the schema document are supported")
        if not fragment:
            return Ref(resource, url)
        if fragment.startswith("/"):
            node = resource
            for token in fragment[1:].split("/"):
                token = unquote(token).replace("~1", "/").replace("~0", "~")
                if isinstance(node, dict) and token in node:
                    node = node[token]
                elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                    node = node[int(token)]
                else:
                    raise GrammarError(f"{self.pointer(ref.node)}: $ref {target!r} points to "
                                       "nothing in the document")
            return Ref(node, self.base_of.get(id(node), url))
        anchor = self.anchors.get((url, fragment))
        if anchor is None:
            raise GrammarError(f"{self.pointer(ref.node)}: $ref {target!r}: no anchor "
                               f"{fragment!r}")
        return anchor


def _join(base: str, reference: str) -> str:
    """`urljoin`, also for bases like `urn:uuid:...` that urljoin does not resolve against."""
    if reference.startswith("#"):
        return urldefrag(base).url + reference
    return urljoin(base, reference)


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def draft_of(root: Any) -> int:
    uri = root.get("$schema", "") if isinstance(root, dict) else ""
    for marker, draft in _DRAFTS:
        if marker in str(uri):
            return draft
    return 2020


class Position:
    """A place in the document: the schemas that may apply to the value there, the key ranking
    they imply, and the positions of the values below it (shared by all branches)."""

    def __init__(self, compiler: "Compiler", refs: tuple[Ref, ...]) -> None:
        self.compiler = compiler
        self.refs = refs
        self._children: dict[str, Position] = {}

    @cached_property
    def closure(self) -> list[Ref]:
        """The schemas of this position and those applying in place (each once)."""
        seen: set[int] = set()
        out: list[Ref] = []
        stack = list(reversed(self.refs))
        while stack:
            ref = stack.pop()
            if not isinstance(ref.node, dict) or id(ref.node) in seen:
                continue
            ref = self.compiler.registry.at(ref.node, ref.base)
            seen.add(id(ref.node))
            node = ref.node
            if "$ref" in node and self.compiler.draft <= 7:  # the target replaces the node
                try:
                    stack.append(self.compiler.registry.resolve(ref))
                except GrammarError:
                    out.append(ref)  # reported when the value is compiled
                continue
            out.append(ref)
            inplace: list[Any] = []
            for key in ("allOf", "anyOf", "oneOf"):
                if isinstance(node.get(key), list):
                    inplace.extend(node[key])
            for key in ("not", "if", "then", "else"):
                if key in node:
                    inplace.append(node[key])
            for key in ("dependentSchemas", "dependencies"):
                if isinstance(node.get(key), dict):
                    inplace.extend(v for v in node[key].values() if not isinstance(v, list))
            subs = [self.compiler.registry.at(sub, ref.base) for sub in inplace]
            if "$ref" in node:
                try:
                    subs.insert(0, self.compiler.registry.resolve(ref))
                except GrammarError:
                    pass  # reported when the value is compiled
            stack.extend(reversed(subs))
        return out

    @cached_property
    def is_open(self) -> bool:
        """Whether no schema here constrains the value or anything inside it (only
        annotations and unknown keywords), so that any JSON value is valid at any depth."""
        return not any(_constrains_anything(ref.node) for ref in self.closure)

    @cached_property
    def ranking(self) -> tuple[str, ...]:
        """Every key a schema here names (`properties`, `required`, dependencies, object
        values of `enum`/`const`), in an order that keeps the order of each `properties` and
        each object value where these orders agree; ties and conflicts go by first
        appearance. `required` and dependencies name keys but impose no order."""
        sequences: list[list[str]] = []
        for ref in self.closure:
            node = ref.node
            if isinstance(node.get("properties"), dict):
                sequences.append(list(node["properties"]))
            if isinstance(node.get("required"), list):
                sequences.extend([n] for n in node["required"] if isinstance(n, str))
            for key in ("dependentRequired", "dependentSchemas", "dependencies"):
                if isinstance(node.get(key), dict):
                    for name, value in node[key].items():
                        listed = value if isinstance(value, list) else []
                        sequences.extend([n] for n in [name, *listed] if isinstance(n, str))
            values = list(node["enum"]) if isinstance(node.get("enum"), list) else []
            if "const" in node:
                values.append(node["const"])
            sequences.extend(list(value) for value in values if isinstance(value, dict))
        return _merged_order(sequences)

    @cached_property
    def any_order(self) -> bool:
        """Whether objects here take their ranked keys in any order (`--key-order any`):
        where the sets of keys an object may have read are too many to tell apart in states,
        they follow the ranking, with a notice (every object here alike, so that products
        of them stay exact)."""
        compiler = self.compiler
        if compiler.options.key_order != "any" or not self.ranking:
            return False
        sets = 1 << len(self.ranking)
        # each set of keys read has its own copy of the names still to come
        states = sets * (1 + sum(len(json.dumps(k)) + 1 for k in self.ranking) // 2)
        if sets <= _MAX_KEY_SETS and states <= compiler.options.max_states // 4:
            return True
        compiler.options.notice(
            f"{compiler.registry.pointer(self.closure[0].node)}: the {len(self.ranking)} "
            f"properties of objects here ({', '.join(self.ranking[:3])}, ...) are too many "
            f"to allow in any order (2^{len(self.ranking)} sets of keys); they follow the "
            "schema's order there (as with --key-order schema); make the object smaller "
            "(nest groups of properties) or raise --max-states")
        return False

    def child(self, name: str) -> "Position":
        """The position of the value of key `name`."""
        position = self._children.get(name)
        if position is None:
            refs = []
            for ref in self.closure:
                node = ref.node
                props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
                matched = False
                if name in props:
                    refs.append(self.compiler.registry.at(props[name], ref.base))
                    matched = True
                for pattern, sub in _pattern_properties(node).items():
                    if self.compiler.key_matches(pattern, name, node):
                        refs.append(self.compiler.registry.at(sub, ref.base))
                        matched = True
                if not matched and "additionalProperties" in node:
                    refs.append(self.compiler.registry.at(node["additionalProperties"], ref.base))
            position = self._children[name] = Position(self.compiler, tuple(refs))
        return position

    @cached_property
    def additional(self) -> "Position":
        """The position of values of keys outside the ranking."""
        refs = []
        for ref in self.closure:
            for sub in _pattern_properties(ref.node).values():
                refs.append(self.compiler.registry.at(sub, ref.base))
            if "additionalProperties" in ref.node:
                refs.append(self.compiler.registry.at(ref.node["additionalProperties"], ref.base))
        return Position(self.compiler, tuple(refs))

    @cached_property
    def items(self) -> "Position":
        """The position of array elements (one for all indices)."""
        refs = []
        for ref in self.closure:
            node = ref.node
            for key in ("prefixItems", "items"):
                value = node.get(key)
                subs = value if isinstance(value, list) else [value] if key in node else []
                refs.extend(self.compiler.registry.at(sub, ref.base) for sub in subs)
            for key in ("additionalItems", "contains"):
                if key in node:
                    refs.append(self.compiler.registry.at(node[key], ref.base))
        return Position(self.compiler, tuple(refs))

    @cached_property
    def keys(self) -> "Position":
        """The position of object keys, as string values for `propertyNames`."""
        refs = [self.compiler.registry.at(r.node["propertyNames"], r.base) for r in self.closure
                if "propertyNames" in r.node]
        return Position(self.compiler, tuple(refs))


def _pattern_properties(node: dict) -> dict[str, Any]:
    value = node.get("patternProperties")
    return value if isinstance(value, dict) else {}


@dataclass
class Compiler:
    """Compiles one schema document; `value(ref, position)` is the workhorse.

    With `calls`, a value the schema leaves open ("any JSON value" where no schema applies:
    `true`, `{}`, default `additionalProperties`), a recursive `$ref` and a `$ref` to an
    object or array schema are calls of machines, each built once, recursion exact at any
    depth. A boolean operation keeps calls where it can (`Ops`), or inlines the machines its
    operands call (`flat_calls`); one that meets a machine still being built (a recursion
    through the operation itself) is a machine computed once that one is (`later`), or where
    the operation needs flat operands there, the document is compiled again without calls
    (`compile_schema`). With `open_recursions`, a union whose options may start alike opens
    those that recurse (or are still being built, `union`) so that the linker need not inline
    them; where the machines cannot be linked all the same, the alternative is the document
    compiled without such openings (so that its flat fallback does not grow with them)."""

    root: Any
    options: FrontendOptions
    calls: bool = False
    open_recursions: bool = True
    registry: Registry = field(init=False)
    ops: Ops = field(init=False)

    def __post_init__(self) -> None:
        check_against_meta_schema(self.root)
        self._original_root = self.root
        self._opened = False  # whether `open_recursions` opened or deferred a union
        self.root = _exact_numbers(self.root)
        self.draft = draft_of(self.root)
        self.registry = Registry(self.root, self.draft)
        # bytes a machine's values may start with, known before its body (from types)
        self._first_hints: dict[str, np.ndarray] = {}
        self.ops = Ops(self.options.max_states, self.flat_calls if self.calls else None,
                       self._nested_at_most, self if self.calls else None)
        self.layout = Layout.from_style(self.options.whitespace)
        self._active: dict[int, int] = {}
        self._tested: dict[int, int] = {}  # $ref targets read as conditions being compiled
        self._unrolled: set[str] = set()
        self._any_cache: dict[tuple, Expr] = {}
        self._machines: dict[str, Expr] = {}  # $ref targets, array items, any value; by name
        self._building: set[str] = set()      # machines whose body is not complete yet
        # machines built once the machines they need are: (those names, the builder)
        self._deferred: dict[str, tuple[set[str], Callable[[], Expr]]] = {}
        self._union_names: dict[tuple, tuple[str, list[Expr]]] = {}  # and the options
        self._meet_parts: dict[str, frozenset[str]] = {}  # the machines each meet meets
        self._product_names: dict[tuple, tuple[str, Expr, Expr]] = {}  # and the operands
        self._flat: dict[str, Expr] = {}      # machines inlined into boolean operations
        self._flat_unrolled: set[str] = set()
        self._ref_names: dict[tuple, str] = {}
        self._ref_targets: dict[str, int] = {}  # the id of each $ref machine's target schema
        self._item_names: dict[tuple, str] = {}
        self._any_names: dict[frozenset[int], str] = {}  # any value at positions, by schemas
        self._any_positions: dict[str, Position] = {}   # the position of each such machine
        self._nested: dict[int, Expr] = {}  # nested_at_most, by levels
        self._key_dfas: dict[str, Any] = {}
        self._unranked_keys: dict[frozenset[str], Expr] = {}  # by the names they leave out
        self._slot_names: dict[Expr, str] = {}  # machines of values in any key order
        # an allOf of object keywords as one schema, by the schema holding it
        self._object_merges: dict[int, tuple[dict | bool, str | None] | None] = {}
        # the `allOf` of the schemas a merge gives one key, by base and the schemas' identities
        self._conjunctions: dict[tuple, dict] = {}
        self._canonical: dict[int, tuple[Expr, Expr]] = {}  # by the identity of the texts
        self._check_supported()
        self._check_spelling()

    # ------------------------------------------------------------------ entry points
    def document(self) -> Expr | MachineSet:
        root_ref = self.registry.at(self.root, _ROOT_URI)
        expr = self.value(root_ref, Position(self, (root_ref,)))
        self._build_deferred()
        if self._unrolled:
            self.options.notice(
                f"recursive $ref {', '.join(sorted(self._unrolled))} unrolled to depth "
                f"{self.options.max_depth}; deeper values are not accepted (--max-depth)")
        if self._flat_unrolled:
            self.options.notice(
                f"inside allOf/oneOf/not/if, {', '.join(sorted(self._flat_unrolled))} "
                f"unrolled to depth {self.options.max_depth}; deeper values are not accepted "
                "there (--max-depth)")
        expr = self._without_empty_machines(expr)
        # a recursion of the schema's own cut there may be why no value is left (any value
        # cut below a position is not: each level of it has values of every type)
        recursions = sorted((self._unrolled | self._flat_unrolled) - {_ANY_MACHINE})
        if expr == NOTHING and recursions:
            raise GrammarError(
                "the schema accepts no value nested at most "
                f"{self.options.max_depth} levels where its recursion is unrolled "
                f"({', '.join(recursions)}); deeper values may exist (raise --max-depth)")
        if expr == NOTHING:
            raise GrammarError("the schema accepts no value at all")
        if isinstance(expr, Call) and counter_form(self._machines[expr.name]) is None:
            expr = self._machines[expr.name]  # the document is one machine: its body is the
            # root (a counted machine stays called: the root keeps no count)
        used = reachable_machines(called_names(expr), self._machines)  # products inline some
        machines = tuple((name, body) for name, body in self._machines.items() if name in used)
        if not machines:
            return expr
        if not self.open_recursions or not self._opened:
            return MachineSet(expr, machines)
        root, options = self._original_root, self.options
        return MachineSet(expr, machines, alternative=lambda: _compiled(
            root, options, open_recursions=False))

    def _without_empty_machines(self, expr: Expr) -> Expr:
        """`expr` and the machines' bodies with no call of a machine that has no text (the
        object of an allOf whose branches exclude each other's keys, a machine all of whose
        texts call such a machine), and without those machines."""
        while True:
            empty = {name for name, body in self._machines.items() if body == NOTHING}
            if not empty:
                return expr

            def without(name: str) -> Expr:
                return NOTHING if name in empty else Call(name)

            self._machines = {name: replace_calls(body, without)
                              for name, body in self._machines.items() if name not in empty}
            expr = replace_calls(expr, without)

    def machine(self, name: str, build) -> Call:
        """A call of the machine `name`, its body built by `build()` the first time (a call
        of it from inside its own body is recursion)."""
        if name not in self._machines:
            self._machines[name] = NOTHING
            self._building.add(name)
            try:
                self._machines[name] = build()
            finally:
                self._building.discard(name)
            self._build_deferred()
        return Call(name)

    def _defer(self, name: str, needs: set[str], build: Callable[[], Expr],
               first: np.ndarray | None) -> Call:
        """A call of the machine `name`, its body built by `build()` once none of the
        machines `needs` is being built (it is being built till then); `first`: a superset
        of the bytes its values start with, if known."""
        if name not in self._machines:
            self._machines[name] = NOTHING
            self._building.add(name)
            self._deferred[name] = (needs, build)
            if first is not None:
                self._first_hints[name] = first
            self._build_deferred()
        return Call(name)

    def _build_deferred(self) -> None:
        """Build the deferred machines whose machines are built (at once where they are)."""
        progress = True
        while progress:
            progress = False
            for name, (needs, build) in list(self._deferred.items()):
                if name in self._deferred and not needs & self._building:
                    del self._deferred[name]
                    try:
                        self._machines[name] = build()
                    finally:
                        self._building.discard(name)
                    progress = True

    def body_of(self, name: str) -> Expr | None:
        """The body of a machine, None while it is being built."""
        return None if name in self._building else self._machines[name]

    def first_of(self, name: str) -> np.ndarray | None:
        """A superset of the bytes the values of a machine start with, known before its
        body (from its schema's types, or those of the operands of a deferred machine)."""
        return self._first_hints.get(name)

    def _starting_bytes(self, expr: Expr) -> np.ndarray | None:
        """`starting_bytes` of `expr`: a superset where it calls a machine being built."""
        return starting_bytes(expr, self.body_of, first_of=self.first_of)

    def later(self, a: Expr, b: Expr, difference: bool) -> Call | None:
        """A call of a machine of `a - b` (`difference`) or `a & b`, computed once the
        machines being built that the operands reach are (a recursion through the product:
        its operands cannot be inlined nor made flat before); None where they reach none, or
        this product is the one being computed."""
        key = (id(a), id(b), difference)
        found = self._product_names.get(key)
        if found is not None:
            return Call(found[0]) if found[0] in self._deferred or \
                found[0] not in self._building else None
        waiting = reachable_machines(called_names(a) | called_names(b), self._machines) & \
            self._building
        if not waiting:
            return None
        name = f"{'difference' if difference else 'intersection'} ({len(self._product_names) + 1})"
        self._product_names[key] = (name, a, b)
        return self._defer(name, waiting, lambda: self.ops.difference(a, b) if difference
                           else self.ops.intersect(a, b),
                           self._common_first([a] if difference else [a, b]))

    def meet(self, a: str, b: str) -> Call:
        """A call of the machine of the values both machines accept (a product that keeps
        calls, `Ops`), built once both machines are. Such a machine is named by the machines
        it meets, each once (so meets of meets end: a machine met with one of its parts is
        itself)."""
        parts = self._meet_parts.get(a, frozenset([a])) | self._meet_parts.get(b, frozenset([b]))
        for given in (a, b):
            if parts == self._meet_parts.get(given, frozenset([given])):
                return Call(given)
        name = " & ".join(sorted(parts))
        self._meet_parts[name] = parts
        return self._defer(name, {a, b}, lambda: self.ops.intersect(
            self._machines[a], self._machines[b]), self._common_first([Call(a), Call(b)]))

    def _common_first(self, operands: list[Expr]) -> np.ndarray | None:
        """A superset of the bytes the texts all `operands` share start with: the bytes
        common to those whose first bytes are known (None: none is)."""
        starts = [f for f in map(self._starting_bytes, operands) if f is not None]
        return np.logical_and.reduce(starts) if starts else None

    def flat_calls(self, expr: Expr) -> Expr:
        """`expr` with each call replaced by its machine's flat language, for a boolean
        operation: exact for machines that do not recurse, a recursive one unrolled
        --max-depth times (with a notice)."""
        return replace_calls(expr, self._flat_machine)

    def _flat_machine(self, name: str) -> Expr:
        found = self._flat.get(name)
        if found is not None:
            return found
        position = self._any_positions.get(name.removesuffix(_CANONICAL))
        if position is not None:  # any value: --max-depth levels below its position
            self._flat_unrolled.add(_ANY_MACHINE)
            found = self.any(position)
            found = self._flat[name] = self.canonical(found) if name.endswith(_CANONICAL) \
                else found
            return found
        bodies = self._machines
        reached = reachable_machines({name}, bodies)
        if reached & self._building:
            raise UnresolvedCallError(f"machine {name!r} is used by a boolean operation "
                                      "inside its own definition")
        recursive = recursive_machines({n: bodies[n] for n in reached})
        if name in recursive:
            self._flat_unrolled.add(name)
            self._flat.update(self._nested_within_bound(recursive))
        else:
            self._flat[name] = flat_language(replace_calls(bodies[name], self._flat_machine),
                                             self.options.max_states)
        return self._flat[name]

    # ------------------------------------------------------------------ differences
    def difference(self, a: Expr, b: Expr) -> Expr:
        """The values of `a` that are not values of `b`, exact on numbers: `b` need not hold
        every spelling of a value it holds (`1e0`, `1.0` beside `1`), so where both may hold
        a number, both are taken over canonical spellings (`numbers.canonical_spellings`),
        of which each holds all or none of a value's."""
        if not (self._may_hold_numbers(a) and self._may_hold_numbers(b)):
            return self.ops.difference(a, b)
        return self.ops.difference(self.canonical(a), self.canonical(b))

    def _may_hold_numbers(self, expr: Expr) -> bool:
        """Whether a text of `expr` may hold a number (not where all are strings, booleans
        or null)."""
        first = self._starting_bytes(expr)
        return first is None or bool((first & _NUMBERS_START).any())

    @cached_property
    def _canonical_spellings(self) -> ByteDFA:
        return numbers.canonical_spellings(self.draft)

    def canonical(self, expr: Expr) -> Expr:
        """The texts of `expr` whose numbers are spelled canonically; its calls become calls
        of the machines' canonical copies."""
        hit = self._canonical.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        renamed = replace_calls(expr, self._canonical_machine)
        found = self.ops.restricted(renamed, self._canonical_spellings)
        self._canonical[id(expr)] = (expr, found)
        return found

    def _canonical_machine(self, name: str) -> Call:
        """A call of the machine's copy with numbers spelled canonically (itself where its
        values hold no number, or it is such a copy), built once the machine is."""
        if name.endswith(_CANONICAL) or not self._may_hold_numbers(Call(name)):
            return Call(name)
        return self._defer(name + _CANONICAL, {name},
                           lambda: self.canonical(self._machines[name]),
                           self._starting_bytes(Call(name)))

    def _nested_at_most(self, levels: int) -> Expr:
        found = self._nested.get(levels)
        if found is None:
            found = self._nested[levels] = nested_at_most(levels)
        return found

    def _nested_within_bound(self, names: set[str]) -> dict[str, Expr]:
        """The values of the recursive machines `names` nested at most --max-depth levels,
        exactly (each a truncated automaton): the least fixpoint of "a machine's body, its
        calls of `names` replaced by the previous round's languages, cut to the bound". Each
        round adds the values one call deeper; as the bound limits the nesting of values and
        no machine calls itself before reading a byte, the rounds stop."""
        depth = self.options.max_depth
        bound = self._nested_at_most(depth)
        levels: dict[str, Expr] = {name: NOTHING for name in names}

        def callee(name: str) -> Expr:
            return levels[name] if name in levels else self._flat_machine(name)

        # a value within the bound is found in at most (levels + 1) x (chains of calls that
        # read no bracket in between, at most one per machine) rounds
        for _ in range((depth + 1) * len(names) + 1):
            nxt = {}
            for name in names:
                cut = self.ops.intersect(replace_calls(self._machines[name], callee), bound)
                nxt[name] = NOTHING if cut == NOTHING else \
                    Automaton(cut.dfa, min(depth, cut.exact_to or depth))
            if all(_same_language(nxt[name], levels[name]) for name in names):
                return nxt
            levels = nxt
        raise RuntimeError("internal error: nested values within the depth bound do not settle")

    def _check_supported(self) -> None:
        found = []
        for pointer, node in self._all_schemas():
            for key in _UNSUPPORTED:
                if key in node and node[key] is not True:
                    found.append(f"{key} at {pointer}")
        if found:
            message = "unsupported JSON Schema keywords: " + ", ".join(found)
            if not self.options.lenient:
                raise UnsupportedError(message + " (--lenient ignores them, over-approximating)")
            self.options.notice(message + "; ignored (--lenient)")

    def _check_spelling(self) -> None:
        """A notice for each key that is not a keyword but a near miss of one (`requird`,
        `maximun`, `itmes`, `Type`: two adjacent letters swapped, or a difflib ratio of 0.85
        or more, ignoring case): ignored like any unknown key, as the specification says, but
        most likely a typo. Keys not that close to a keyword (custom annotations, `x-...`,
        `tsType`) pass in silence."""
        for pointer, node in self._all_schemas():
            for key in node:
                if key in _KNOWN_KEYS or key.startswith(("x-", "X-")):
                    continue  # a keyword, or an extension by convention
                lower = key.lower()
                close = [swapped for i in range(len(lower) - 1) if (swapped := lower[:i] +
                         lower[i + 1] + lower[i] + lower[i + 2:]) in _KNOWN_BY_CASE] or \
                    difflib.get_close_matches(lower, _KNOWN_BY_CASE, n=1, cutoff=0.85)
                if close:
                    self.options.notice(f"unknown keyword {key!r} at {pointer}/{_escape(key)} "
                                        f"is ignored; did you mean {_KNOWN_BY_CASE[close[0]]!r}?")

    def _all_schemas(self):
        stack = [self.root]
        seen = set()
        while stack:
            node = stack.pop()
            if not isinstance(node, dict) or id(node) in seen:
                continue
            seen.add(id(node))
            yield self.registry.pointer(node), node
            for key in _SCHEMA_KEYWORDS:
                if key in node:
                    stack.append(node[key])
            for key in _LIST_KEYWORDS + ("items",):
                value = node.get(key)
                stack.extend(value if isinstance(value, list) else [value] if key in node else [])
            for key in _MAP_KEYWORDS + ("dependencies",):
                if isinstance(node.get(key), dict):
                    stack.extend(node[key].values())

    # ------------------------------------------------------------------ values
    def value(self, ref: Ref, position: Position) -> Expr:
        """The JSON texts of the values `ref` accepts at `position`."""
        node = ref.node
        if node is True:
            return self.any_value(position)
        if node is False:
            return NOTHING
        ref = self.registry.at(node, ref.base)
        if not isinstance(node, dict):
            raise GrammarError(f"{self.registry.pointer(node)}: a schema must be an object or "
                               f"a boolean, not {json.dumps(node, default=str)[:40]}")
        if "allOf" in node and ("$ref" not in node or self.draft > 7):
            merged = self._merged_objects(ref)
            if merged is not None:
                return self.merged_value(Ref(merged[0], ref.base), merged[1], position)
        parts: list[Expr] = []
        type_only = "type" in node and not _constrains_beyond_type(node) and \
            "enum" not in node and "const" not in node
        if "$ref" in node:
            target = self.registry.resolve(ref)
            referenced = self._referenced(target, node["$ref"], position,
                                          _is_container(target.node))
            if referenced is _CUT:
                return _CUT
            if self.draft <= 7:
                return referenced  # draft 7 and earlier: $ref replaces its siblings
            parts.append(referenced)
        condition, rest = self._key_condition(ref)
        if condition is not None or (_constrains_locally(node) and not type_only):
            with self._testing(condition):
                parts.append(self.local(ref, position, condition))
        for branch in rest.get("allOf", []) if isinstance(rest.get("allOf"), list) else []:
            parts.append(self.value(Ref(branch, ref.base), position))
        if isinstance(rest.get("anyOf"), list):
            parts.append(self.union([self.value(Ref(b, ref.base), position)
                                     for b in rest["anyOf"]], open_calls=False))
        if isinstance(rest.get("oneOf"), list):
            branches = [self.registry.at(b, ref.base) for b in rest["oneOf"]]
            parts.append(self.exactly_one([self.value(b, position) for b in branches],
                                          branches))
        if "not" in rest:
            parts.append(self.difference(self.any_value(position),
                                         self.value(Ref(rest["not"], ref.base), position)))
        if "if" in rest and ("then" in rest or "else" in rest):
            test = self.value(Ref(rest["if"], ref.base), position)
            then = self.value(Ref(rest.get("then", True), ref.base), position)
            otherwise = self.value(Ref(rest.get("else", True), ref.base), position)
            parts.append(alt(self.ops.intersect(test, then),
                             self.difference(otherwise, test)))
        for key, dependency in rest.get("dependentSchemas", {}).items():
            # objects with `key` must also satisfy the schema; others are unaffected
            with_key = self.object_with_key(key, position)
            parts.append(alt(self.ops.difference(self.any(position), with_key),
                             self.ops.intersect(with_key,
                                                self.value(Ref(dependency, ref.base), position))))
        if not type_only:
            return self.intersect_all(parts) if parts else self.any_value(position)
        if not parts:
            return self.local(ref, position)
        combined = self.intersect_all(parts)
        typed = self._of_types(combined, self._types(node))
        return typed if typed is not None else \
            self.ops.intersect(combined, self.local(ref, position))

    def _referenced(self, target: Ref, reference: str, position: Position,
                    container: bool) -> Expr:
        """The values of a schema reached through `reference` (a `$ref`): with calls, a call
        of its machine where it recurses or is a `container`; else inline, and nested past
        --max-depth levels no value, in a truncated automaton (see `Ops`), with a notice."""
        depth = self._active.get(id(target.node), 0)
        if self.calls and (depth or container):
            return self.ref_machine(target, position)
        if depth >= self.options.max_depth + 1:
            self._unrolled.add(reference)
            return _CUT
        self._active[id(target.node)] = depth + 1
        try:
            return self.value(target, position)
        finally:
            self._active[id(target.node)] = depth

    def merged_value(self, merged: Ref, opened: str | None, position: Position) -> Expr:
        """The values of a schema `_merged_objects` made. One that opened a `$ref` (`opened`)
        may reach itself through its properties, as the `$ref` could: like a `$ref` target
        of an object, it is then a machine, or unrolled to --max-depth without calls."""
        if opened is None or merged.node is False:
            return self.value(merged, position)
        return self._referenced(merged, opened, position, container=True)

    def _merged_objects(self, ref: Ref) -> tuple[dict | bool, str | None] | None:
        """One schema equal to a schema and its `allOf` branches (through `$ref`s and nested
        `allOf`s) when all of them hold only types and object keywords (`properties`,
        `required`, `additionalProperties`, property counts); else None. Each key's value
        must then satisfy the schemas every part gives that key, which a product of the
        parts' automata would find only after making every called machine flat. With the
        schema, the first `$ref` opened (None if none)."""
        owner = id(ref.node)
        if owner in self._object_merges:
            return self._object_merges[owner]
        opened: list[str] = []
        parts = [part.node for part in self._conjuncts(ref, set(), opened)]
        merged = None
        if any(part is False for part in parts):
            merged = (False, None)
        elif all(set(part) & _KEYWORDS <= _OBJECT_MERGE_KEYWORDS and
                 isinstance(part.get("allOf", []), list) and
                 isinstance(part.get("properties", {}), dict) and
                 isinstance(part.get("required", []), list) for part in parts):
            merged = (self._merge_object_parts(parts, ref), opened[0] if opened else None)
        self._object_merges[owner] = merged
        return merged

    def _merge_object_parts(self, parts: list[dict], ref: Ref) -> dict | bool:
        """One schema for the conjunction of `parts` (see `_merged_objects`)."""
        types = set(_TYPES)
        for part in parts:
            if "type" in part:
                types &= self._types(part)
        if not types:
            return False
        extras = [self._additional(p) for p in parts]
        names = list(dict.fromkeys(name for p in parts for name in p.get("properties", {})))
        pointer = self.registry.pointer(ref.node)

        def conjunction(schemas: list[Any], where: str) -> Any:
            schemas = [s for s in _distinct(schemas) if s is not True]
            if any(s is False for s in schemas):
                return False
            if len(schemas) <= 1:
                return schemas[0] if schemas else True
            key = (ref.base, *(id(s) for s in schemas))
            combined = self._conjunctions.get(key)
            if combined is None:  # one schema per conjunction: merges of merges recur
                combined = self._conjunctions[key] = {"allOf": schemas}
                self.registry.pointer_of[id(combined)] = where
            return combined

        merged: dict[str, Any] = {"type": sorted(types - {"integer"} if "number" in types
                                                  else types)}
        properties = {}
        for name in names:
            properties[name] = conjunction(
                [p["properties"][name] if name in p.get("properties", {}) else extra
                 for p, extra in zip(parts, extras)], f"{pointer}/properties/{_escape(name)}")
        merged["properties"] = properties
        merged["additionalProperties"] = conjunction(extras, f"{pointer}/additionalProperties")
        merged["required"] = list(dict.fromkeys(n for p in parts for n in p.get("required", [])))
        counts = [_count(p, "minProperties") for p in parts]
        if any(c is not None for c in counts):
            merged["minProperties"] = max(c for c in counts if c is not None)
        counts = [_count(p, "maxProperties") for p in parts]
        if any(c is not None for c in counts):
            merged["maxProperties"] = min(c for c in counts if c is not None)
        self.registry.pointer_of[id(merged)] = pointer
        return merged

    def _of_types(self, expr: Expr, types: set[str]) -> Expr | None:
        """The values of `expr` of one of `types`, told apart by their first byte: without a
        product where the tree separates them (a call of a machine that has other values too
        calls a narrower machine), else by one with the texts that start so; None where the
        first byte cannot tell them (integers among other numbers)."""
        if "integer" in types and "number" not in types:
            return None
        allowed = _first_bytes(types)
        narrowed = self._starting_with(expr, allowed, _bytes_label(allowed))
        if narrowed is not None:
            return narrowed
        first = charset((int(b), int(b)) for b in np.flatnonzero(allowed))  # ASCII bytes
        return self.ops.intersect(expr, concat(first, repeat(_ANY_CHARACTER, 0, None)))

    def _starting_with(self, expr: Expr, allowed: np.ndarray, label: str) -> Expr | None:
        """The texts of `expr` that start with an `allowed` byte, without a product (a call
        of a machine that has other texts too calls a narrower machine, named with `label`);
        None where the tree does not tell them apart."""
        def narrower(name: str) -> Expr | None:
            if name in self._building:
                return None
            body = with_first_bytes(self._machines[name], allowed, self.body_of,
                                    narrower, self.first_of)
            if body is None:
                return None
            return self.machine(f"{name} [{label}]", lambda: body)

        return with_first_bytes(expr, allowed, self.body_of, narrower, self.first_of)

    def intersect_all(self, parts: list[Expr]) -> Expr:
        """The texts of every part. Each part is first narrowed, without a product, to the
        texts that start with a byte every part can start with, so that a machine whose other
        texts no other part has (an object beside a number) is not made flat for nothing."""
        if any(p == NOTHING for p in parts):
            return NOTHING
        if len(parts) > 1:
            firsts = [self._starting_bytes(p) for p in parts]
            if all(f is not None for f in firsts):
                common = np.logical_and.reduce(firsts)
                if not common.any():
                    return NOTHING
                label = _bytes_label(common)
                narrowed = [self._starting_with(p, common, label) for p in parts]
                parts = [p if n is None else n for p, n in zip(parts, narrowed)]
                if any(p == NOTHING for p in parts):
                    return NOTHING
        result = parts[0]
        for part in parts[1:]:
            result = self.ops.intersect(result, part)
        return result

    def exactly_one(self, branches: list[Expr], schemas: list[Ref] | None = None) -> Expr:
        """The texts of exactly one branch: each branch minus the others it may share a text
        with. Two branches share none when they cannot start with the same byte, or (given
        their `schemas`) when both describe objects only and one requires a key the other
        forbids, or both require a key with different values (a discriminator); branches that
        share none with any other stay whole, calls kept."""
        starts = [self._starting_bytes(b) for b in branches]
        objects = [self._object_keys(s) for s in schemas] if schemas is not None else \
            [None] * len(branches)
        overlap = [[False] * len(branches) for _ in branches]
        for i, j in combinations(range(len(branches)), 2):
            overlap[i][j] = overlap[j][i] = not (
                starts[i] is not None and starts[j] is not None and
                not (starts[i] & starts[j]).any() or
                self._disjoint_objects(objects[i], objects[j]))
        options = []
        for i, branch in enumerate(branches):
            others = [other for j, other in enumerate(branches) if overlap[i][j]]
            options.append(self.difference(branch, alt(*others)) if others else branch)
        return self.union(options)

    def union(self, options: list[Expr], open_calls: bool = True) -> Expr:
        """The texts of any option. An option that is a call of a built machine and may
        start with a byte another option may start with is the machine's body instead (its
        own calls kept; a counted machine stays a call): two calls the next byte cannot tell
        apart would leave the caller's machine undecided, and their machines inlined where
        called (without `open_calls`, that is left to the linker, which can for machines
        that do not recurse). Where such a machine is still being built (a recursion through
        the union), the options that share a first byte are a machine of their own, built
        (opened) once it is."""
        starts = [self._starting_bytes(o) for o in options]

        def shares_a_first_byte(i: int) -> bool:
            return any(j != i and (starts[i] is None or starts[j] is None or
                                   (starts[i] & starts[j]).any()) for j in range(len(options)))

        if self.open_recursions and any(
                isinstance(o, Call) and o.name in self._building and shares_a_first_byte(i)
                for i, o in enumerate(options)):
            self._opened = True
            shared = [i for i in range(len(options)) if shares_a_first_byte(i)]
            return alt(self._deferred_union([options[i] for i in shared],
                                            [starts[i] for i in shared]),
                       *(o for i, o in enumerate(options) if i not in shared))
        opened = []
        for i, option in enumerate(options):
            while isinstance(option, Call) and shares_a_first_byte(i) and \
                    (open_calls or self._recursive(option.name)):
                body = self.body_of(option.name)
                if body is None or counter_form(body) is not None:
                    break
                option = body
            opened.append(option)
        return alt(*opened)

    def _recursive(self, name: str) -> bool:
        """Whether a built machine reaches itself or a machine being built through calls
        (and `open_recursions` opens it)."""
        if not self.open_recursions:
            return False
        reached = reachable_machines(called_names(self._machines[name]), self._machines)
        recursive = name in reached or bool(reached & self._building)
        self._opened |= recursive
        return recursive

    def _deferred_union(self, options: list[Expr], starts: list[np.ndarray | None]) -> Call:
        """A call of a machine of the texts of any option, its body (`union`) built once the
        machines the options call are."""
        key = tuple(o.name if isinstance(o, Call) else id(o) for o in options)
        found = self._union_names.get(key)
        if found is None:
            labels = [o.name if isinstance(o, Call) else "…" for o in options]
            found = self._union_names[key] = (
                f"anyOf of {' | '.join(labels)} ({len(self._union_names) + 1})", options)
        first = None if any(f is None for f in starts) else np.logical_or.reduce(starts)
        needs = set().union(*(called_names(o) for o in options))
        return self._defer(found[0], needs, lambda: self.union(options), first)

    def _object_keys(self, schema: Ref) -> _ObjectKeys | None:
        """For a schema of objects only, each key it requires with the values it allows
        there when some part of it limits them to a small explicit set (`const`, `enum`,
        booleans, `null`; else None), and its parts; None for a schema that may take other
        values."""
        parts = [p for p in self._conjuncts(schema, set()) if p.node is not False]
        if not any(self._types(p.node) == {"object"} for p in parts):
            return None
        required = {k for p in parts if isinstance(p.node.get("required"), list)
                    for k in p.node["required"] if isinstance(k, str)}
        return _ObjectKeys({key: self._key_values(parts, key) for key in required}, parts)

    def _disjoint_objects(self, a: _ObjectKeys | None, b: _ObjectKeys | None) -> bool:
        """Whether two schemas of objects only share no value: one requires a key the other
        forbids, or both require a key whose explicit values differ."""
        if a is None or b is None:
            return False
        return any(a.required[key] is not None and b.required[key] is not None and
                   not a.required[key] & b.required[key]
                   for key in a.required.keys() & b.required.keys()) or \
            any(self._forbids(b.parts, key) for key in a.required) or \
            any(self._forbids(a.parts, key) for key in b.required)

    def _forbids(self, parts: list[Ref], key: str) -> bool:
        """Whether some part makes an object holding `key` invalid: `false` as the key's
        property or matching pattern, or no property nor pattern for it and no additional
        properties (`false`, or the `--no-additional-properties` default)."""
        for part in parts:
            node = part.node
            properties = node.get("properties")
            if isinstance(properties, dict) and key in properties:
                if properties[key] is False:
                    return True
                continue
            patterns = _pattern_properties(node)
            matched = [schema for pattern, schema in patterns.items()
                       if self.key_matches(pattern, key, node)]
            if matched:
                if any(schema is False for schema in matched):
                    return True
                continue
            if self._additional(node) is False:
                return True
        return False

    def _conjuncts(self, ref: Ref, within: set[int], opened: list[str] | None = None
                   ) -> list[Ref]:
        """The schemas (objects, or `false`) a value must satisfy for `ref`: itself, its
        `$ref` targets and `allOf` branches, and theirs, each once (`within`: those found);
        the `$ref`s followed are added to `opened`."""
        node = ref.node
        if node is False:
            return [ref]
        if not isinstance(node, dict) or id(node) in within:
            return []
        within.add(id(node))
        found = [ref]
        if "$ref" in node:
            if opened is not None:
                opened.append(node["$ref"])
            target = self._conjuncts(self.registry.resolve(self.registry.at(node, ref.base)),
                                     within, opened)
            if self.draft <= 7:  # draft 7 and earlier: $ref replaces its siblings
                return target
            found.extend(target)
        branches = node.get("allOf")
        for branch in branches if isinstance(branches, list) else []:
            found.extend(self._conjuncts(self.registry.at(branch, ref.base), within, opened))
        return found

    def _key_values(self, parts: list[Ref], key: str) -> set | None:
        """The values (`value_key`s) the `parts` allow for `key` when some part limits them
        to a small explicit set, else None."""
        allowed = None
        for part in parts:
            properties = part.node.get("properties")
            if not isinstance(properties, dict) or key not in properties:
                continue
            for schema in self._conjuncts(self.registry.at(properties[key], part.base), set()):
                values = self._finite_values(schema.node)
                if values is not None:
                    found = {value_key(v) for v in values}
                    allowed = found if allowed is None else allowed & found
        return allowed

    def _key_condition(self, ref: Ref) -> tuple[KeyCondition | None, dict]:
        """The applicators of a schema that read as conditions on an object's keys
        (`conditions.py`: compiled into the schema's object, not as products), and the schema
        with the applicators left to products (dependent schemas under "dependentSchemas").
        A schema with no keyword of its own keeps its `allOf` and `anyOf`: an intersection of
        one operand needs no product, nor does a union, and they keep their operands'
        machines."""
        node = ref.node
        local = _constrains_locally(node)
        reader = ConditionReader(self.registry.at, self.registry.resolve, self.draft,
                                 _KEYWORDS, self._in_progress)
        rest = {k: v for k, v in node.items()
                if k not in ("dependentRequired", "dependentSchemas", "dependencies")}
        rest["dependentSchemas"] = {}  # the dependencies that are not taken, as schemas

        def take(read: Callable[[], Formula | None]) -> bool:
            saved = reader.snapshot()
            formula = read()
            if formula is not None and reader.condition.key_states() <= MAX_KEY_STATES:
                reader.add(formula)
                return True
            reader.restore(saved)
            return False

        for key, dependency in dependencies_of(node).items():
            if not take(lambda k=key, d=dependency: reader.dependency(k, d, ref.base)):
                rest["dependentSchemas"][key] = {"required": dependency} \
                    if isinstance(dependency, list) else dependency
        if isinstance(node.get("allOf"), list) and local:  # each branch on its own
            rest["allOf"] = [b for b in node["allOf"]
                             if not take(lambda b=b: reader.read(b, ref.base))]
        for keyword in APPLICATORS[1:]:
            if keyword in node and (keyword != "if" or "then" in node or "else" in node) and \
                    (local or keyword != "anyOf") and \
                    take(lambda k=keyword: reader.applicator(node, k, ref.base)):
                for taken in (keyword, "then", "else") if keyword == "if" else (keyword,):
                    rest.pop(taken, None)
        condition = reader.condition
        return (condition if condition.keys or condition.formula[1] else None), rest

    def local(self, ref: Ref, position: Position,
              condition: KeyCondition | None = None) -> Expr:
        """The language of the schema's own (non-applicator) keywords, and of the `condition`
        its applicators put on an object's keys."""
        node = ref.node
        types = self._types(node)
        if condition is not None and not condition.holds_for_others():
            types &= {"object"}
        if "const" in node or "enum" in node:
            values = node["enum"] if "enum" in node else [node["const"]]
            if "const" in node:  # both apply: the enum's values equal to the const
                values = [v for v in values if value_key(v) == value_key(node["const"])]
            allowed = [v for v in values if _json_type(v) in types or
                       (_json_type(v) == "integer" and "number" in types)]
            literals = alt(*(self.literal_value(v, position) for v in allowed))
            # an integer has no fraction (draft 4, and by default later ones: the typed
            # language decides), while the value 10 equals 10.0
            integral_spelling = "number" not in types and "integer" in types and \
                (self.draft == 4 or not self.options.integer_fractions)
            if not _constrains_beyond_type(node) and not integral_spelling and \
                    condition is None:
                return literals
            return self.ops.intersect(literals, self._typed(ref, position, types, condition))
        return self._typed(ref, position, types, condition)

    def _types(self, node: dict) -> set[str]:
        declared = node.get("type")
        if declared is None:
            return set(_TYPES)
        names = [declared] if isinstance(declared, str) else declared
        if not isinstance(names, list) or not all(n in _TYPES for n in names):
            raise GrammarError(f"{self.registry.pointer(node)}: invalid type {declared!r}")
        types = set(names)
        if "number" in types:
            types.add("integer")
        return types

    def _typed(self, ref: Ref, position: Position, types: set[str],
               condition: KeyCondition | None = None) -> Expr:
        node = ref.node
        options = []
        if "null" in types:
            options.append(literal("null"))
        if "boolean" in types:
            options.append(alt(literal("true"), literal("false")))
        if "number" in types or "integer" in types:
            options.append(self.number(node, integer="number" not in types))
        if "string" in types:
            options.append(self.string(node))
        if "array" in types:
            options.append(self._container(self.array(ref, position)))
        if "object" in types:
            options.append(self._container(self.object(ref, position, condition)))
        return alt(*options)

    def _container(self, texts: Expr) -> Expr:
        """An array's or object's texts. Without calls, a recursion cut inside its values
        (`_CUT`, exact to no depth from its own start) leaves it exact one level deeper than
        the values it holds are: it is then that truncated automaton, so that a difference
        from it keeps the minuend's values as deep as that (`Ops`), not none."""
        depth = None if self.calls else exact_to(texts)
        if depth is None:
            return texts
        built = self.ops.automaton(texts)
        return Automaton(_CUT.dfa if built == NOTHING else built.dfa, depth + 1)

    # ------------------------------------------------------------------ scalars
    def number(self, node: dict, integer: bool) -> Expr:
        lo = hi = None
        lo_excl = hi_excl = False
        minimum, maximum = node.get("minimum"), node.get("maximum")
        if isinstance(minimum, (int, Decimal)) and not isinstance(minimum, bool):
            lo = Decimal(minimum)
            lo_excl = node.get("exclusiveMinimum") is True
        if isinstance(maximum, (int, Decimal)) and not isinstance(maximum, bool):
            hi = Decimal(maximum)
            hi_excl = node.get("exclusiveMaximum") is True
        for key, is_lower in (("exclusiveMinimum", True), ("exclusiveMaximum", False)):
            bound = node.get(key)
            if isinstance(bound, (int, Decimal)) and not isinstance(bound, bool):
                bound = Decimal(bound)
                if is_lower and (lo is None or bound >= lo):
                    lo, lo_excl = bound, True
                elif not is_lower and (hi is None or bound <= hi):
                    hi, hi_excl = bound, True
        step = node.get("multipleOf")
        if integer:  # draft 4 integers have no fraction; later drafts allow `.0`, on request
            fractions = self.draft >= 6 and self.options.integer_fractions
            base = numbers.integers(lo, hi, lo_excl, hi_excl, zero_fraction=fractions)
        elif lo is None and hi is None and step is None:
            return numbers.any_number()
        else:
            base = numbers.decimals(self.ops, lo, hi, lo_excl, hi_excl)
        if isinstance(step, (int, Decimal)) and not isinstance(step, bool):
            try:
                base = self.ops.intersect(base, numbers.multiple_of(Decimal(step), integer))
            except GrammarError as exc:
                raise type(exc)(f"{self.registry.pointer(node)}: {exc}") from None
        return base

    def string(self, node: dict) -> Expr:
        texts: list[Expr] = []
        lo, hi = _count(node, "minLength"), _count(node, "maxLength")
        only_lengths = not isinstance(node.get("pattern"), str) and \
            not isinstance(node.get("format"), str)
        if self.calls and only_lengths and \
                strings.COUNTED_LENGTH < max(lo or 0, hi or 0) <= _MAX_COUNT and \
                (hi is None or (lo or 0) <= hi):
            return self.machine(f"string{{{lo or 0},{'' if hi is None else hi}}}",
                                lambda: strings.counted_string(lo or 0, hi))
        if lo is not None or hi is not None:
            texts.append(strings.json_string(strings.length_between(lo or 0, hi)))
        if isinstance(node.get("pattern"), str):
            pattern = node["pattern"]
            texts.append(strings.pattern_texts(pattern, self.registry.pointer(node) + "/pattern"))
            counted = with_counted_repeat(texts[-1], strings.COUNTED_LENGTH, _MAX_COUNT) \
                if self.calls and len(texts) == 1 and not isinstance(node.get("format"), str) \
                else None
            if counted is not None:  # `^[a-z]{1,1000}$`: a machine that counts its bytes
                return self.machine(f"pattern {pattern}", lambda: counted)
        if isinstance(node.get("format"), str):
            formatted = strings.format_texts(node["format"])
            if formatted is None:
                self.options.notice(f"format {node['format']!r} at "
                                    f"{self.registry.pointer(node)} is not checked")
            else:
                texts.append(formatted)
        if not texts:
            texts.append(strings.any_string())
        try:
            if len(texts) == 1 and not isinstance(texts[0], Automaton):
                # a minimal DFA: spelled out as alternatives, the texts would be determinised
                # again, into many equivalent states, in every body that holds them
                return self.ops.automaton(texts[0])
            return self.intersect_all(texts)
        except TooManyStatesError as exc:  # located: the string alone is too large
            raise TooManyStatesError(f"{self.registry.pointer(node)}: {exc}") from None

    def literal_value(self, value: Any, position: Position) -> Expr:
        """Every text of exactly this JSON value (numbers equal in value, any escapes)."""
        if value is None:
            return literal("null")
        if isinstance(value, bool):
            return literal("true" if value else "false")
        if isinstance(value, (int, Decimal, float)):
            number = Decimal(str(value)) if isinstance(value, float) else Decimal(value)
            return numbers.decimals(self.ops, number, number)
        if isinstance(value, str):
            return strings.string_literal(value)
        layout = self.layout
        if isinstance(value, list):
            items = [self.literal_value(v, position.items) for v in value]
            body = concat(*[concat(layout.comma, x) if i else x for i, x in enumerate(items)])
            return concat(layout.open_array, body, layout.close_array)
        if isinstance(value, dict):
            ranking = position.ranking
            keys = sorted(value, key=lambda k: (0, ranking.index(k)) if k in ranking else (1, k))
            members = {k: concat(strings.string_literal(k), layout.colon,
                                 self.literal_value(value[k], position.child(k))) for k in keys}
            # the keys objects here take in any order (those outside the ranking; in any
            # key order all of them) come in every order, so that a difference that
            # subtracts this value removes each of its spellings
            free = keys if position.any_order else [k for k in keys if k not in ranking]
            if len(free) > _MAX_LITERAL_ORDERS:
                hint = "use --key-order schema" if position.any_order else \
                    "declare its keys in the schema's properties"
                raise UnsupportedError(
                    f"an enum or const object with {len(free)} keys that may come in any "
                    f"order (more than {_MAX_LITERAL_ORDERS}); {hint}")
            memo: dict[frozenset[str], Expr] = {}

            def rest(left: frozenset[str], first: bool) -> Expr:
                """The free keys `left` in every order."""
                if not left:
                    return EMPTY
                if left not in memo:
                    memo[left] = alt(*(concat(layout.comma, members[k], rest(left - {k}, False))
                                       for k in sorted(left)))
                found = memo[left]
                return found if not first else alt(*(
                    concat(members[k], rest(left - {k}, False)) for k in sorted(left)))

            fixed = [m for k, m in members.items() if k not in free]
            body = concat(*[concat(layout.comma, m) if i else m for i, m in enumerate(fixed)],
                          rest(frozenset(free), not fixed))
            return concat(layout.open_object, body, layout.close_object)
        raise GrammarError(f"not a JSON value: {value!r}")

    def _in_progress(self, node: Any) -> bool:
        """Whether the values of `node`, a `$ref` target, are being compiled: inline (see
        `_referenced`), as a machine being built, or as a condition on keys whose tests are."""
        return self._active.get(id(node), 0) > 0 or self._tested.get(id(node), 0) > 0 or any(
            self._ref_targets.get(name) == id(node) for name in self._building)

    @contextmanager
    def _testing(self, condition: KeyCondition | None) -> Iterator[None]:
        """While an object is compiled with `condition`, the `$ref` targets it read through
        are in progress (`_in_progress`)."""
        targets = condition.targets if condition is not None else set()
        for target in targets:
            self._tested[target] = self._tested.get(target, 0) + 1
        try:
            yield
        finally:
            for target in targets:
                self._tested[target] -= 1

    def ref_machine(self, target: Ref, position: Position) -> Expr:
        """A call of the machine of a `$ref` target (or a merged allOf that opened one) at
        this kind of position (the schemas that apply there decide its language), compiled
        the first time it is met."""
        key = (id(target.node), frozenset(id(r.node) for r in position.closure))
        name = self._ref_names.get(key)
        if name is None:
            name = f"{self.registry.pointer(target.node)} ({len(self._ref_names) + 1})"
            self._ref_names[key] = name
            self._ref_targets[name] = id(target.node)
            self._first_hints[name] = _first_bytes(self._value_types(target, frozenset()))
        return self.machine(name, lambda: self.value(target, position))

    def _value_types(self, ref: Ref, seen: frozenset[int]) -> set[str]:
        """A superset of the types of a schema's values, from its `type`, `enum` and `const`
        and those of the schemas it applies in place (`$ref`, `allOf`, `anyOf`, `oneOf`)."""
        node = ref.node
        if node is False:
            return set()
        if not isinstance(node, dict) or id(node) in seen:
            return set(_TYPES)
        seen = seen | {id(node)}
        types = self._types(node)
        if "$ref" in node:
            found = self._value_types(self.registry.resolve(self.registry.at(node, ref.base)),
                                      seen)
            if self.draft <= 7:  # draft 7 and earlier: $ref replaces its siblings
                return found
            types &= found
        for branch in node["allOf"] if isinstance(node.get("allOf"), list) else []:
            types &= self._value_types(self.registry.at(branch, ref.base), seen)
        for keyword in ("anyOf", "oneOf"):
            if isinstance(node.get(keyword), list):
                types &= set().union(*(self._value_types(self.registry.at(b, ref.base), seen)
                                       for b in node[keyword]))
        if "const" in node or isinstance(node.get("enum"), list):
            values = node["enum"] if "enum" in node else [node["const"]]
            types &= {_json_type(v) for v in values} | \
                ({"integer"} if any(_json_type(v) == "number" for v in values) else set())
        return types

    def _item_machine(self, items: Expr, node: dict, position: Position) -> Expr:
        """A call of a machine of the items of an array with many of them, so that each
        counted repetition costs a call, not a copy of the item's automaton."""
        key = (id(node), id(position))
        name = self._item_names.get(key)
        if name is None:
            name = f"{self.registry.pointer(node)}/items ({len(self._item_names) + 1})"
            self._item_names[key] = name
        return self.machine(name, lambda: items)

    # ------------------------------------------------------------------ any value
    def any_value(self, position: Position) -> Expr:
        """Any JSON value at this position. With calls, a call of the machine of any value at
        positions with the same schemas (keys in their ranking, and so on at every level
        below, so exact at any depth; where no schema applies, the one bare "any value"
        machine); without, the flat language of `any`."""
        if not self.calls:
            return self.any(position)
        if position.is_open:
            self._any_positions.setdefault(_ANY_MACHINE, position)
            return self.machine(_ANY_MACHINE, lambda: self._any_of(
                position, lambda inner: Call(_ANY_MACHINE)))
        key = frozenset(id(ref.node) for ref in position.closure)
        name = self._any_names.get(key)
        if name is None:
            pointer = self.registry.pointer(position.closure[0].node)
            name = self._any_names[key] = f"any value at {pointer} ({len(self._any_names) + 1})"
            self._any_positions[name] = position
        return self.machine(name, lambda: self._any_of(position, self.any_value))

    def any(self, position: Position, budget: int | None = None) -> Expr:
        """Any JSON value at this position, containers nested at most `budget` levels."""
        budget = self.options.max_depth if budget is None else budget
        # where no schema applies, every position has the same "any value": share it
        key = ("bare", budget) if position.is_open else (id(position), budget)
        cached = self._any_cache.get(key)
        if cached is not None:
            return cached
        if budget <= 0:
            layout = self.layout
            language = alt(self._scalars, concat(layout.open_array, layout.close_array),
                           concat(layout.open_object, layout.close_object))
        else:
            language = self._any_of(position, lambda inner: self.any(inner, budget - 1))
        # as a minimal DFA, so the next level up embeds it once per use, not a whole tree;
        # exact for values nested `budget` + 1 levels (see `Ops`)
        dfa = self.ops.dfa(language)
        result = self._any_cache[key] = NOTHING if dfa is None else Automaton(dfa, budget + 1)
        return result

    def _any_of(self, position: Position, inner: Callable[[Position], Expr]) -> Expr:
        """Any JSON value at this position, the elements and member values below it any
        values by `inner(their position)`; object keys in the position's ranking."""
        layout = self.layout
        item = inner(position.items)
        array = concat(layout.open_array,
                       repeat(concat(item, repeat(concat(layout.comma, item), 0, None)), 0, 1),
                       layout.close_array)
        members = [(k, inner(position.child(k)), False) for k in position.ranking]
        return alt(self._scalars, array, self._object_language(
            position, members, self._unranked_key(position), inner(position.additional),
            (0, None)))

    @cached_property
    def _scalars(self) -> Expr:
        return alt(literal("null"), literal("true"), literal("false"), numbers.any_number(),
                   strings.any_string())

    # ------------------------------------------------------------------ objects
    def object(self, ref: Ref, position: Position,
               condition: KeyCondition | None = None) -> Expr:
        node = ref.node
        properties = node.get("properties") if isinstance(node.get("properties"), dict) else {}
        patterns = _pattern_properties(node)
        extra_schema = self._additional(node)
        required = set(node.get("required", []) if isinstance(node.get("required"), list) else [])
        unranked = (set(properties) | required) - set(position.ranking)
        if unranked:  # the ranking comes from every schema here; missing names are a bug
            raise RuntimeError(f"internal error: {sorted(unranked)} missing from the key ranking "
                               f"at {self.registry.pointer(node)}")
        names_pos = position.keys
        names_schema = node.get("propertyNames")
        slots = []
        regions: dict[str, _KeyValues] = {}  # the values of the keys the condition names
        for name in position.ranking:
            child = position.child(name)
            applicable = [properties[name]] if name in properties else []
            applicable += [s for p, s in patterns.items() if self.key_matches(p, name, node)]
            if not applicable:
                applicable = [extra_schema]
            if names_schema is not None and not self._name_allowed(names_schema, ref, name,
                                                                   names_pos):
                applicable = [False]
            language = self.intersect_all([self.value(Ref(s, ref.base), child)
                                           for s in _distinct(applicable)])
            slots.append((name, language, name in required))
            if condition is not None and name in condition.keys:
                anything = not any(s is False or isinstance(s, dict) and
                                   _constrains_anything(s) for s in applicable)
                regions[name] = _KeyValues(self, language, anything,
                                           condition.tests.get(name, []),
                                           condition.satisfiable(name), child)
        # keys outside the ranking, by which patterns they match
        unranked = self._unranked_key(position)
        if names_schema is not None:
            unranked = self.ops.intersect(unranked, self._names_language(names_schema, ref,
                                                                         names_pos))
        entries = self._extra_entries(ref, position, unranked, patterns, extra_schema)
        counts = (_count(node, "minProperties") or 0, _count(node, "maxProperties"))
        return self._object_language(position, slots, None, entries, counts, condition,
                                     regions)

    def _additional(self, node: dict) -> Any:
        """The schema of an object's keys that no property or pattern names: its
        `additionalProperties`, else any value, or none with `--no-additional-properties`."""
        return node.get("additionalProperties", bool(self.options.additional_properties))

    def _unranked_key(self, position: Position) -> Expr:
        """JSON texts of keys that are not in the position's ranking."""
        any_key = strings.any_string()
        if not position.ranking:
            return any_key
        names = frozenset(position.ranking)
        known = self._unranked_keys.get(names)
        if known is None:
            known = self._unranked_keys[names] = self.ops.difference(
                any_key, alt(*(strings.string_literal(k) for k in sorted(names))))
        return known

    def _extra_entries(self, ref: Ref, position: Position, keys: Expr,
                       patterns: dict[str, Any], extra_schema: Any) -> Expr:
        """`key: value` for keys outside the ranking, split by the patterns they match."""
        names = list(patterns)
        if len(names) > _MAX_PATTERN_REGIONS:
            raise UnsupportedError(f"{self.registry.pointer(ref.node)}: more than "
                               f"{_MAX_PATTERN_REGIONS} patternProperties in one object")
        key_languages = [strings.pattern_texts(
            p, f"{self.registry.pointer(ref.node)}/patternProperties") for p in names]
        options = []
        child = position.additional
        for size in range(len(names) + 1):
            for chosen in combinations(range(len(names)), size):
                region = keys
                for i in range(len(names)):
                    op = self.ops.intersect if i in chosen else self.ops.difference
                    region = op(region, key_languages[i])
                if region == NOTHING:
                    continue
                schemas = [patterns[names[i]] for i in chosen] or [extra_schema]
                value = self.intersect_all([self.value(Ref(s, ref.base), child)
                                            for s in schemas])
                if value != NOTHING:
                    options.append(concat(region, self.layout.colon, value))
        return alt(*options)

    def _object_language(self, position: Position, slots: list[tuple[str, Expr, bool]],
                         unranked_key: Expr | None, extra: Expr, counts: tuple[int, int | None],
                         condition: KeyCondition | None = None,
                         regions: dict[str, _KeyValues] | None = None) -> Expr:
        """`{...}` with the ranked slots in order (each present or absent), then any number of
        `extra` entries, honouring required keys, property counts and the `condition` on the
        keys it names (their values split by the condition's tests in `regions`)."""
        layout = self.layout
        if unranked_key is not None:  # `extra` is a value language; pair it with the keys
            extra = concat(unranked_key, layout.colon, extra) if extra != NOTHING else NOTHING
        min_count, max_count = counts
        counting = bool(min_count) or max_count is not None
        cap = max(min_count, max_count or 0) + 1 if counting else 1
        named = [name for name, _, _ in slots if condition is not None and
                 name in condition.keys]
        if condition is not None and len(named) < len(condition.keys):
            raise RuntimeError(f"internal error: {sorted(set(condition.keys) - set(named))} "
                               "missing from the key ranking of a condition")
        regions = regions or {}
        level = {name: j for j, name in enumerate(named)}
        weights, residual = _residual_states(condition, named, regions)
        if position.any_order:
            return self._any_order_object(position, slots, extra, counts, cap, level,
                                          weights, residual[-1] >= 0, regions)

        memo: dict[tuple[int, int, int], Expr] = {}

        def members(i: int, count: int, state: int) -> Expr:
            """The rest of the object from slot i on, after `count` members, the named keys
            before it in the residual `state` of the condition."""
            key = (i, count, state)
            if key in memo:
                return memo[key]
            if i == len(slots):
                result = self._sequence(extra, count, min_count, max_count)
            else:
                name, language, required = slots[i]
                j = level.get(name)
                following = residual[j + 1] if j is not None else None
                options = []
                if not required:
                    after = state if j is None else following[state]
                    if after >= 0:
                        options.append(members(i + 1, count, after))
                if max_count is None or count + 1 <= max_count:
                    # the values that lead to each next state (only the splits that matter)
                    values = [(language, state)] if j is None else \
                        regions[name].by_next_state(following, state, weights[j])
                    for value, after in values:
                        if value == NOTHING:
                            continue
                        entry = concat(strings.string_literal(name), layout.colon, value)
                        options.append(concat(layout.comma if count else EMPTY, entry,
                                              members(i + 1, min(count + 1, cap), after)))
                result = alt(*options)
            memo[key] = result
            return result

        start = residual[0][0]
        body = members(0, 0, start) if start >= 0 else NOTHING
        if body == NOTHING:
            return NOTHING
        return concat(layout.open_object, body, layout.close_object)

    def _any_order_object(self, position: Position, slots: list[tuple[str, Expr, bool]],
                          extra: Expr,
                          counts: tuple[int, int | None], cap: int, level: dict[str, int],
                          weights: list[int], verdict: np.ndarray,
                          regions: dict[str, _KeyValues]) -> Expr:
        """`{...}` with the slots in any order, each at most once, and `extra` entries
        anywhere among them: a state is the set of slots read, the count of members (up to
        `cap`) and the digits of the condition's keys read (`_residual_states`; `verdict`
        tells, for every combination, whether the object is valid). With calls, each value is
        a machine, so that the states of the sets of keys do not each hold a copy of it."""
        layout = self.layout
        if self.calls:
            pointer = self.registry.pointer(position.closure[0].node)
            slots = [(name, self._slot_machine(f"{pointer}/properties/{_escape(name)}", language), needed)
                     for name, language, needed in slots]
        min_count, max_count = counts
        required = sum(1 << i for i, (_, _, needed) in enumerate(slots) if needed)
        # live[state]: the condition can still hold after the named keys read in `state`
        # (adding the keys not read yet, one at a time, in mixed radix)
        live = verdict.copy()
        states = np.arange(len(verdict))
        for name, j in level.items():
            base = regions[name].num_sets + 1
            absent = states // weights[j] % base == 0
            for m in range(1, base):
                later = np.flatnonzero(absent)
                live[later] |= live[later + m * weights[j]]
        following = np.where(live, states, -1)
        memo: dict[tuple[int, int, int], Expr] = {}

        def members(read: int, count: int, state: int) -> Expr:
            """The rest of the object after the slots in `read`, `count` members and the
            condition's keys in `state`."""
            key = (read, count, state)
            if key in memo:
                return memo[key]
            options = []
            if read & required == required and count >= min_count and verdict[state]:
                options.append(EMPTY)
            comma = layout.comma if count else EMPTY
            if max_count is None or count < max_count:
                after_count = min(count + 1, cap)
                for i, (name, language, _) in enumerate(slots):
                    if read >> i & 1:
                        continue
                    j = level.get(name)
                    values = [(language, state)] if j is None else \
                        regions[name].by_next_state(following, state, weights[j])
                    for value, after in values:
                        if value != NOTHING:
                            options.append(concat(
                                comma, strings.string_literal(name), layout.colon, value,
                                members(read | 1 << i, after_count, after)))
            rest = alt(*options)
            if extra != NOTHING and (max_count is None or count < max_count):
                if after_count == count:  # past every bound: extras loop here
                    rest = concat(repeat(concat(comma, extra), 0, None), rest)
                else:
                    rest = alt(rest, concat(comma, extra, members(read, after_count, state)))
            memo[key] = rest
            return rest

        body = members(0, 0, 0) if following[0] >= 0 else NOTHING
        if body == NOTHING:
            return NOTHING
        return concat(layout.open_object, body, layout.close_object)

    def _slot_machine(self, where: str, language: Expr) -> Expr:
        """A call of a machine of the values `language` (one per language), or the language
        itself where it may start with a call, or is small enough to copy (a few states: a
        call there would keep the next byte from choosing between the branches of a union
        that read the key's value inline)."""
        options = language.options if isinstance(language, Alt) else (language,)
        if language == NOTHING or any(isinstance(option, Call) for option in options):
            return language
        if not called_names(language) and self.ops.dfa(language).num_states <= _MAX_COPIED_VALUE:
            return language
        name = self._slot_names.get(language)
        if name is None:
            name = self._slot_names[language] = \
                f"{where} (any key order {len(self._slot_names) + 1})"
        return self.machine(name, lambda: language)

    def _sequence(self, entry: Expr, count: int, min_count: int,
                  max_count: int | None) -> Expr:
        """Comma-separated entries after `count` members (object entries or array items), so
        that the total is within the bounds."""
        lo = max(0, min_count - count)
        hi = None if max_count is None else max_count - count
        if hi is not None and hi < lo:
            return NOTHING
        if entry == NOTHING or hi == 0:
            return EMPTY if lo == 0 else NOTHING
        comma = self.layout.comma
        if count:
            return repeat(concat(comma, entry), lo, hi)
        rest = repeat(concat(comma, entry), max(lo - 1, 0), None if hi is None else hi - 1)
        nonempty = concat(entry, rest)
        return alt(EMPTY, nonempty) if lo == 0 else nonempty

    def object_with_key(self, key: str, position: Position) -> Expr:
        """Objects at this position (any values) that contain `key`."""
        budget = self.options.max_depth - 1
        slots = [(k, self.any(position.child(k), budget), k == key) for k in position.ranking]
        return self._object_language(position, slots, self._unranked_key(position),
                                     self.any(position.additional, budget), (0, None))

    def _names_language(self, names_schema: Any, ref: Ref, position: Position) -> Expr:
        strings_only = strings.any_string()
        return self.ops.intersect(self.value(Ref(names_schema, ref.base), position),
                                  strings_only)

    def _name_allowed(self, names_schema: Any, ref: Ref, name: str, position: Position) -> bool:
        language = self._names_language(names_schema, ref, position)
        dfa = self.ops.dfa(language)
        return dfa is not None and dfa.accepts(json.dumps(name).encode())

    def key_matches(self, pattern: str, name: str, node: dict) -> bool:
        """Whether the ECMA-262 `pattern` matches the key `name` (as patternProperties do)."""
        dfa = self._key_dfas.get(pattern)
        if dfa is None:
            where = self.registry.pointer(node) + "/patternProperties"
            dfa = self._key_dfas[pattern] = self.ops.dfa(strings.pattern_texts(pattern, where))
        text = json.dumps(name, ensure_ascii=False)  # one spelling: the language has them all
        return dfa is not None and dfa.accepts(text.encode("utf-8", "surrogatepass"))

    # ------------------------------------------------------------------ arrays
    def array(self, ref: Ref, position: Position) -> Expr:
        node = ref.node
        if isinstance(node.get("items"), list):  # draft 2019-09 and earlier: a tuple
            prefix, rest = node["items"], node.get("additionalItems", True)
        elif self.draft >= 2020:
            prefix = node.get("prefixItems", [])
            rest = node.get("items", True)
        else:
            prefix, rest = [], node.get("items", True)
        if not isinstance(prefix, list):
            raise GrammarError(f"{self.registry.pointer(node)}: prefixItems must be an array")
        item_pos = position.items
        elements = [self.value(Ref(s, ref.base), item_pos) for s in prefix]
        rest_language = self.value(Ref(rest, ref.base), item_pos)
        min_items = _count(node, "minItems") or 0
        max_items = _count(node, "maxItems")
        contains = None
        if "contains" in node and self.draft >= 6:
            contains = self.value(Ref(node["contains"], ref.base), item_pos)
        if node.get("uniqueItems") is True and (max_items is None or max_items > 1):
            return self._unique_array(ref, item_pos, prefix, rest, min_items, max_items,
                                      contains)
        if (self.calls and contains is None and max_items is not None
                and max_items > _MAX_INLINE_REPEAT and rest_language != NOTHING):
            rest_language = self._item_machine(rest_language, node, item_pos)
        return self._array_language(elements, rest_language, min_items, max_items, contains,
                                    node)

    def _array_language(self, elements: list[Expr], rest: Expr, min_items: int,
                        max_items: int | None, contains: Expr | None, node: dict) -> Expr:
        """`[...]`: positional elements, then `rest` elements; item counts; `contains` counts
        (a walk over (index, matches so far), closed by a loop once neither matters)."""
        comma = self.layout.comma
        if contains is not None:
            min_contains = _count(node, "minContains") if self.draft >= 2019 else None
            min_contains = 1 if min_contains is None else min_contains
            max_contains = _count(node, "maxContains") if self.draft >= 2019 else None
        else:
            min_contains, max_contains = 0, None
        cap = max(min_contains, max_contains or 0) + 1  # match counts saturate here

        def split(language: Expr) -> list[tuple[Expr, int]]:
            """(part of the element language, what it adds to the contains count)."""
            if contains is None:
                return [(language, 0)]
            return [(self.ops.intersect(language, contains), 1),
                    (self.difference(language, contains), 0)]

        parts_at = [split(e) for e in elements]
        rest_parts = split(rest)
        # from index `stable` on, only `rest` elements remain and no count depends on the index
        stable = max(len(elements), min_items, 1) if max_items is None else max_items
        memo: dict[tuple[int, int], Expr] = {}

        def tail(i: int, found: int) -> Expr:
            """The elements from index i on (i > 0: each after a comma), `found` matches."""
            key = (i, found)
            if key in memo:
                return memo[key]
            if contains is None and i >= len(elements):  # only counts left: a repeat
                result = self._sequence(rest, i, min_items, max_items)
            elif i == stable and max_items is None:
                result = self._loop(rest_parts, found, min_contains, max_contains)
            else:
                options = [EMPTY] if i >= min_items and found >= min_contains else []
                if max_items is None or i < max_items:
                    for part, adds in (parts_at[i] if i < len(elements) else rest_parts):
                        counted = min(found + adds, cap)
                        if part != NOTHING and (max_contains is None or counted <= max_contains):
                            options.append(concat(comma if i else EMPTY, part,
                                                  tail(i + 1, counted)))
                result = alt(*options)
            memo[key] = result
            return result

        body = tail(0, 0)
        if body == NOTHING:
            return NOTHING
        return concat(self.layout.open_array, body, self.layout.close_array)

    def _loop(self, rest_parts: list[tuple[Expr, int]], found: int, min_contains: int,
              max_contains: int | None) -> Expr:
        """Any number of `, element`, bringing the match count from `found` into range."""
        comma = self.layout.comma
        other = alt(*(p for p, adds in rest_parts if not adds))
        match = alt(*(p for p, adds in rest_parts if adds))
        others = repeat(concat(comma, other), 0, None)
        lower = max(0, min_contains - found)
        upper = None if max_contains is None else max_contains - found
        if upper is not None and upper < lower:
            return NOTHING
        if match == NOTHING:
            return others if lower == 0 else NOTHING
        return concat(others, repeat(concat(comma, match, others), lower, upper))

    def _unique_array(self, ref: Ref, item_pos: Position, prefix: list, rest: Any,
                      min_items: int, max_items: int | None, contains: Expr | None) -> Expr:
        """uniqueItems over a small finite set of values: a walk over subsets of used values."""
        node = ref.node
        pointer = self.registry.pointer(node)
        schemas = list(prefix) + [rest]
        choices = [self._finite_values(s, ref.base) for s in schemas]
        universe: list[Any] = []
        keys: list[Any] = []
        for values in choices:
            for v in values or []:
                if value_key(v) not in keys:
                    keys.append(value_key(v))
                    universe.append(v)
        longest = len(universe) if max_items is None else min(max_items, len(universe))
        # the sets of values an array may have used, one state each
        sets = sum(comb(len(universe), k) for k in range(longest + 1))
        message = None
        if contains is not None or any(c is None for c in choices):
            message = (f"{pointer}: uniqueItems is supported only for items limited to a few "
                       "values (enum, const, boolean, null, an integer range), without contains")
        elif sets > _MAX_UNIQUE_SETS:
            message = (f"{pointer}: uniqueItems over {len(universe)} possible values needs "
                       f"{sets:,} sets of them (grammarc supports up to {_MAX_UNIQUE_SETS:,}; "
                       "a lower maxItems needs fewer)")
        if message is not None:
            if not self.options.lenient:
                raise UnsupportedError(message)
            self.options.notice(message + "; ignored (--lenient)")
            return self._array_language(
                [self.value(Ref(s, ref.base), item_pos) for s in prefix],
                self.value(Ref(rest, ref.base), item_pos), min_items, max_items, contains, node)
        literals = [self.literal_value(v, item_pos) for v in universe]
        allowed = [{keys.index(value_key(v)) for v in values} for values in choices]
        # each value as its schema writes it (`1`, not `1.0`, for an integer)
        spelled = [{v: self.ops.intersect(literals[v], self.value(Ref(s, ref.base), item_pos))
                    for v in values} for s, values in zip(schemas, allowed)]
        layout = self.layout
        memo: dict[tuple[int, int], Expr] = {}

        def tail(i: int, used: int) -> Expr:
            key = (i, used)
            if key in memo:
                return memo[key]
            options = [EMPTY] if i >= min_items else []
            if i < longest:
                position_allowed = spelled[min(i, len(prefix))]
                for v in sorted(position_allowed):
                    if not used & (1 << v):
                        options.append(concat(layout.comma if i else EMPTY, position_allowed[v],
                                              tail(i + 1, used | (1 << v))))
            memo[key] = result = alt(*options)
            return result

        body = tail(0, 0)
        return NOTHING if body == NOTHING else concat(layout.open_array, body,
                                                      layout.close_array)

    def _finite_values(self, schema: Any, base: str | None = None) -> list[Any] | None:
        """The values a schema allows when it is a small explicit set (`enum`, `const`,
        booleans, `null`), else None. Given the `base` to read it against, exactly that set:
        the values of one of its conjuncts (`_conjuncts`: through `$ref`s and `allOf`s) that
        every conjunct allows, None if a conjunct has a keyword that could exclude some;
        without, a superset (other keywords are not read)."""
        if base is not None:
            parts = [p.node for p in self._conjuncts(self.registry.at(schema, base), set())]
            if not all(p is False or isinstance(p, dict) and not set(p) & _KEYWORDS -
                       {"enum", "const", "type", "$ref", "allOf", *_INTEGER_BOUNDS}
                       for p in parts):
                return None
            sets = [self._finite_values(p if p is False else
                                        {k: v for k, v in p.items() if k != "$ref"})
                    for p in parts if p is False or set(p) & {"enum", "const", "type"}]
            if not sets or any(v is None for v in sets):
                return None
            return [v for v in sets[0] if all(any(value_key(v) == value_key(w) for w in other)
                                             for other in sets[1:])]
        if schema is False:
            return []
        if not isinstance(schema, dict) or "$ref" in schema or \
                any(isinstance(schema.get(k), bool) for k in _INTEGER_BOUNDS):  # draft 4's
            return None
        if "const" in schema:  # and, with an enum, one of its values
            values = [schema["const"]]
            if isinstance(schema.get("enum"), list):
                values = [v for v in values
                          if any(value_key(v) == value_key(w) for w in schema["enum"])]
        elif isinstance(schema.get("enum"), list):
            values = list(schema["enum"])
        else:
            types = self._types(schema)
            if types - {"boolean", "null", "integer"}:
                return None
            values = ([True, False] if "boolean" in types else []) + \
                ([None] if "null" in types else [])
            if "integer" in types:
                span = _integer_span(schema)
                if span is None:
                    return None
                values += list(range(*span))
        types = self._types(schema)
        return [v for v in values if (_json_type(v) in types or
                (_json_type(v) == "integer" and "number" in types)) and
                _within_bounds(v, schema)]


class _KeyValues:
    """The values of a key that a condition names, split by which of its tests (sub-schemas)
    they satisfy, built only as far as the condition needs: where every set of satisfied tests
    leads to the same state, the values stay whole (no product); a split by one test is one
    product, or none where the first byte decides (a test of types only) or the key's own
    schema accepts any value (then the values that satisfy the test are the test's own)."""

    def __init__(self, compiler: Compiler, language: Expr, anything: bool,
                 tests: list[tuple[Any, str]], sets: list[frozenset[int]],
                 position: Position) -> None:
        self.compiler = compiler
        self.language = language
        self.anything = anything  # `language` is any JSON value
        self.tests = tests
        self.sets = sets  # the sets of tests a value can satisfy together (numbered)
        self.position = position
        self._compiled: dict[int, Expr] = {}
        self._splits: dict[tuple[int, bool], Expr] = {}
        self._groups: dict[frozenset[int], Expr] = {}

    @property
    def num_sets(self) -> int:
        return len(self.sets)

    def by_next_state(self, following: np.ndarray, state: int,
                      weight: int) -> list[tuple[Expr, int]]:
        """(values, next state) for each live next state of `state`, given the states
        `following` it by the digit of this key (weight `weight`)."""
        groups: dict[int, list[int]] = {}
        for m in range(self.num_sets):
            after = int(following[state + (m + 1) * weight])
            if after >= 0:
                groups.setdefault(after, []).append(m)
        return [(self.values(frozenset(sets)), after) for after, sets in groups.items()]

    def values(self, sets: frozenset[int]) -> Expr:
        """The values whose set of satisfied tests is one of the numbered `sets`."""
        found = self._groups.get(sets)
        if found is None:
            if len(sets) == self.num_sets:
                found = self.language
            else:
                single = [(i, i in self.sets[m]) for m in [min(sets)]
                          for i in range(len(self.tests))
                          if sets == {n for n in range(self.num_sets)
                                      if (i in self.sets[n]) == (i in self.sets[m])}]
                found = self._split(*single[0]) if single else \
                    alt(*(self._exactly(self.sets[m]) for m in sorted(sets)))
            self._groups[sets] = found
        return found

    def _exactly(self, satisfied: frozenset[int]) -> Expr:
        """The values that satisfy the tests `satisfied` and no other."""
        out = self.language
        for i in range(len(self.tests)):
            out = self.compiler.ops.intersect(out, self._split(i, i in satisfied))
        return out

    def _split(self, i: int, satisfied: bool) -> Expr:
        """The values that satisfy test i (or do not)."""
        key = (i, satisfied)
        found = self._splits.get(key)
        if found is None:
            compiler, language = self.compiler, self.language
            schema, _ = self.tests[i]
            types = _types_tested(schema)
            by_type = None if types is None else compiler._of_types(
                language, types if satisfied else set(_TYPES) - types)
            if by_type is not None:
                found = by_type
            elif satisfied:
                test = self._test(i)
                found = test if self.anything else compiler.ops.intersect(language, test)
            else:
                found = compiler.difference(language, self._test(i))
            self._splits[key] = found
        return found

    def _test(self, i: int) -> Expr:
        """Test i's values at this key, narrowed to the first bytes of the key's values."""
        found = self._compiled.get(i)
        if found is None:
            compiler = self.compiler
            schema, base = self.tests[i]
            found = compiler.value(Ref(schema, base), self.position)
            first = compiler._starting_bytes(self.language)
            if first is not None:
                label = "".join(chr(b) for b in np.flatnonzero(first))
                narrowed = compiler._starting_with(found, first, label)
                found = found if narrowed is None else narrowed
            self._compiled[i] = found
        return found


def _types_tested(schema: Any) -> set[str] | None:
    """The types a schema that tests only the type allows (integer with number), or None for
    another schema and for one that tells integers from other numbers (the first byte does
    not)."""
    if not isinstance(schema, dict) or set(schema) & _KEYWORDS != {"type"}:
        return None
    declared = schema["type"]
    types = {declared} if isinstance(declared, str) else set(declared) \
        if isinstance(declared, list) else set()
    if not types or not types <= set(_TYPES) or "integer" in types and "number" not in types:
        return None
    return types | {"integer"} if "number" in types else types


def check_against_meta_schema(root: Any) -> None:
    """Raise `GrammarError` at the JSON pointer of the first keyword that the meta-schema of
    the document's draft rejects (a keyword of the wrong type would otherwise be ignored)."""
    from jsonschema import Draft202012Validator, exceptions, validators

    if isinstance(root, dict) and not isinstance(root.get("$schema", ""), str):
        given = json.dumps(root["$schema"], default=str)[:40]
        raise GrammarError(f"#/$schema: invalid schema: {given} is not a meta-schema URI "
                           "(a string)")
    try:
        cls = validators.validator_for(root, default=Draft202012Validator)
    except ValueError:  # a URI urllib cannot split ("http://[x", a broken IPv6 host)
        given = json.dumps(root["$schema"])[:40]
        raise GrammarError(f"#/$schema: invalid schema: {given} is not a meta-schema URI") \
            from None
    error = exceptions.best_match(_meta_validator(cls).iter_errors(root))
    if error is None:
        return
    pointer = "#" + "".join("/" + _escape(str(part)) for part in error.absolute_path)
    message = error.message if len(error.message) <= 120 else error.message[:117] + "..."
    raise GrammarError(f"{pointer}: invalid schema: {message}")


@lru_cache(maxsize=None)
def _meta_validator(cls: type) -> Any:
    """A validator of documents of `cls`'s draft against its meta-schema, built once. The
    2019-09 and 2020-12 meta-schemas are an `allOf` of vocabularies that refer back to the
    whole meta-schema with `$recursiveRef`/`$dynamicRef`, which jsonschema resolves through the
    dynamic scope at every level of every vocabulary (a large part of a small schema's compile
    time). Here the vocabularies, each only `type`, `properties` and `$defs`, are merged into
    one schema and those references point at its root, which is what they resolve to when the
    meta-schema itself is the root: the same verdicts and error locations, 4-5x faster."""
    from jsonschema_specifications import REGISTRY

    top = cls.META_SCHEMA
    if "allOf" not in top or not any("$vocabulary" in key for key in top):
        return cls(top)
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
            elif key in _MAP_KEYWORDS:  # names, each with a subschema
                out[key] = {k: static(v, name) for k, v in value.items()}
            elif key not in ("$id", "$dynamicAnchor", "$recursiveAnchor", "$vocabulary") and \
                    (key != "$schema" or name is None):
                out[key] = static(value, name)
        return out

    merged = static({k: v for k, v in top.items() if k != "allOf"}, None)
    merged["$defs"], properties = {}, dict(merged.get("properties", {}))
    for i, name in enumerate(names):
        vocabulary = static(REGISTRY.contents(base + name), name)
        if not set(vocabulary) <= {"title", "type", "properties", "$defs"} or \
                vocabulary.get("type") != top.get("type") or \
                set(vocabulary.get("properties", {})) & set(properties):
            return cls(top)  # not the shape known to merge: the meta-schema as it is
        properties.update(vocabulary.get("properties", {}))
        merged["$defs"][str(i)] = {"$defs": vocabulary.get("$defs", {})}
    return cls({**merged, "properties": properties})


def _residual_states(condition: KeyCondition | None, named: list[str],
                     regions: dict[str, _KeyValues]) -> tuple[list[int], list[np.ndarray]]:
    """The states an object's automaton needs for `condition` while its `named` keys are read
    in order. A state numbers what the keys read so far hold, in mixed radix (digit j, of
    weight `weights[j]`: 0 when the j-th named key is absent, m + 1 when its value satisfies
    the set of tests numbered m, `_KeyValues.sets`). `residual[j][state]`, for a state of
    the first j keys, is the smallest state with the same verdict for every way the other keys
    can follow (-1: no way satisfies the condition), so that prefixes with the same future
    share the rest of the automaton."""
    weights = [1]
    for name in named:
        weights.append(weights[-1] * (1 + regions[name].num_sets))
    verdict = np.ones(weights[-1], bool)
    if condition is not None:
        states = np.arange(weights[-1])
        digits = {name: states // weights[j] % (1 + regions[name].num_sets)
                  for j, name in enumerate(named)}

        def leaf(formula: Formula) -> Any:
            if formula[0] == "object":
                return True
            digit = digits[formula[1]]
            if formula[0] == "present":
                return digit != 0
            satisfied = [True] + [formula[2] in tests for tests in regions[formula[1]].sets]
            return np.array(satisfied)[digit]  # an absent key satisfies every test

        verdict[:] = holds(condition.formula, leaf)
    residual = []
    for width in weights:
        table = verdict.reshape(-1, width)  # a row per future, a column per state
        # each state's column of verdicts as one opaque value (numpy's row-wise unique goes
        # through a structured type per column, slow on wide tables)
        columns = np.ascontiguousarray(np.packbits(table.T, axis=1))
        keys = columns.view(np.dtype((np.void, columns.shape[1]))).reshape(-1)
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        canonical = first[inverse.reshape(-1)].astype(np.int64)
        canonical[~table.any(axis=0)] = -1
        residual.append(canonical)
    return weights, residual


def nested_at_most(levels: int) -> Expr:
    """JSON texts whose arrays and objects nest at most `levels` deep (brackets inside strings
    do not count; no text for a negative `levels`): the bound within which truncated
    languages are exact."""
    if levels < 0:
        return NOTHING
    quote, backslash, brackets = ord('"'), ord("\\"), [ord(c) for c in "[]{}"]
    string = concat(literal('"'), repeat(alt(
        charset(complement_ranges([(quote, quote), (backslash, backslash)])),
        concat(literal("\\"), charset([(0, MAX_CODE_POINT)]))), 0, None), literal('"'))
    other = charset(complement_ranges(sorted((b, b) for b in [quote, *brackets])))
    flat = alt(other, string)
    nested = repeat(flat, 0, None)
    for _ in range(levels):
        nested = repeat(alt(flat, concat(charset([(ord("["), ord("[")), (ord("{"), ord("{"))]),
                                         nested,
                                         charset([(ord("]"), ord("]")), (ord("}"), ord("}"))]))),
                        0, None)
    return nested


class _ObjectKeys(NamedTuple):
    """A schema of objects only, as `exactly_one` tells branches apart: each key it requires
    with its explicit values (None: not limited to a few), and the parts it is made of."""

    required: dict[str, set | None]
    parts: list[Ref]


def _bytes_label(allowed: np.ndarray) -> str:
    """A short name of a set of first bytes: the JSON types they start, where they are exactly
    those types' first bytes, else their hexadecimal values."""
    types = [name for name, spelled in _FIRST_BYTES.items() if allowed[list(spelled)].all()]
    spelled_types = np.zeros(256, bool)
    for name in types:
        spelled_types[list(_FIRST_BYTES[name])] = True
    if (spelled_types == allowed).all():
        return "|".join(sorted(types))
    return " ".join(f"{b:02x}" for b in np.flatnonzero(allowed))


def _same_language(a: Expr, b: Expr) -> bool:
    """Whether two minimal automata (or NOTHING) are the same language (canonical DFAs)."""
    if a == NOTHING or b == NOTHING:
        return a == b
    x, y = a.dfa, b.dfa
    return x.trans.shape == y.trans.shape and np.array_equal(x.byte_class, y.byte_class) and \
        np.array_equal(x.trans, y.trans) and np.array_equal(x.accepting, y.accepting)


def _distinct(schemas: list[Any]) -> list[Any]:
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
            key = json.dumps({k: v for k, v in schema.items() if k not in _ANNOTATIONS},
                             sort_keys=True, default=repr)
        else:
            key = json.dumps(schema)
        seen.setdefault(key, schema)
    return list(seen.values())


def _count(node: dict, key: str) -> int | None:
    """A non-negative integer keyword (1.0 counts as 1), or None when absent."""
    value = node.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)) or value < 0 or \
            value != int(value):
        raise GrammarError(f"{key} must be a non-negative integer, not {value}")
    return int(value)


def _exact_numbers(value: Any) -> Any:
    """The schema with floats replaced by the Decimals they were written as (0.1 stays 0.1)."""
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {k: _exact_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_exact_numbers(v) for v in value]
    return value


def _integer_span(schema: dict) -> tuple[int, int] | None:
    """(lo, hi + 1) of the integers within a schema's numeric bounds when both sides are
    bounded (by numbers: draft 4's boolean exclusives are not read) and the range is small."""
    lo = hi = None
    for key, low in (("minimum", True), ("exclusiveMinimum", True), ("maximum", False),
                     ("exclusiveMaximum", False)):
        bound = schema.get(key)
        if bound is None:
            continue
        if isinstance(bound, bool) or not isinstance(bound, (int, float, Decimal)):
            return None
        bound = Decimal(str(bound)) if isinstance(bound, float) else Decimal(bound)
        exclusive = key.startswith("exclusive")
        if low:
            first = int(bound.to_integral_value(rounding="ROUND_FLOOR")) + 1 if exclusive \
                else int(bound.to_integral_value(rounding="ROUND_CEILING"))
            lo = first if lo is None else max(lo, first)
        else:
            last = int(bound.to_integral_value(rounding="ROUND_CEILING")) - 1 if exclusive \
                else int(bound.to_integral_value(rounding="ROUND_FLOOR"))
            hi = last if hi is None else min(hi, last)
    if lo is None or hi is None or hi - lo + 1 > _MAX_UNIQUE_RANGE:
        return None
    return lo, max(lo, hi + 1)


def _within_bounds(value: Any, schema: dict) -> bool:
    """Whether a value of an enum or const is within the schema's numeric bounds (any value
    that is not a number is)."""
    if _json_type(value) not in ("integer", "number"):
        return True
    number = Decimal(str(value)) if isinstance(value, float) else Decimal(value)
    tests = {"minimum": number.__ge__, "exclusiveMinimum": number.__gt__,
             "maximum": number.__le__, "exclusiveMaximum": number.__lt__}
    return all(test(Decimal(str(schema[key])) if isinstance(schema[key], float)
                    else Decimal(schema[key]))
               for key, test in tests.items() if key in schema)


def _json_type(value: Any) -> str:
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


def _merged_order(sequences: list[list[str]]) -> tuple[str, ...]:
    """The names of all `sequences`, each once, in an order that keeps every sequence's
    order if they can all be kept (topological; ties by first appearance), else in order of
    first appearance."""
    first_seen = {name: i for i, name in
                  enumerate(dict.fromkeys(n for seq in sequences for n in seq))}
    graph: dict[str, set[str]] = {name: set() for name in first_seen}
    for seq in sequences:
        for before, after in zip(seq, seq[1:]):
            if before != after:
                graph[after].add(before)
    sorter = TopologicalSorter(graph)
    try:
        sorter.prepare()
    except CycleError:
        return tuple(first_seen)
    ready = [(first_seen[n], n) for n in sorter.get_ready()]
    heapify(ready)
    out = []
    while ready:
        _, name = heappop(ready)
        out.append(name)
        sorter.done(name)
        for nxt in sorter.get_ready():
            heappush(ready, (first_seen[nxt], nxt))
    return tuple(out)


_TYPE_SPECIFIC = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
                  "minLength", "maxLength", "pattern", "format", "items", "prefixItems",
                  "additionalItems", "minItems", "maxItems", "uniqueItems", "contains",
                  "properties", "patternProperties", "additionalProperties", "required",
                  "minProperties", "maxProperties", "propertyNames", "dependentRequired",
                  "dependencies"}

_KEYWORDS = frozenset({*_TYPE_SPECIFIC, "type", "enum", "const", *_APPLICATORS})  # not annotations
_ANNOTATIONS = frozenset({"title", "description", "$comment", "examples", "default",
                          "deprecated", "readOnly", "writeOnly"})  # no effect on validation
# every key the drafts (4 to 2020-12) define, and annotations common in the wild (OpenAPI):
# what `_check_spelling` compares unknown keys with
_KNOWN_KEYS = frozenset(_KEYWORDS | _ANNOTATIONS | {
    *_SCHEMA_KEYWORDS, *_LIST_KEYWORDS, *_MAP_KEYWORDS, "$schema", "$id", "id", "$anchor",
    "$dynamicAnchor", "$recursiveAnchor", "$vocabulary", "$defs", "definitions", "minContains",
    "maxContains", "contentEncoding", "contentMediaType", "contentSchema",
    "example", "nullable", "discriminator", "externalDocs", "xml"})
_KNOWN_BY_CASE = {key.lower(): key for key in sorted(_KNOWN_KEYS)}
# the keywords of schemas whose `allOf` is merged into one schema (`_merged_objects`)
_OBJECT_MERGE_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties",
                                    "minProperties", "maxProperties", "allOf", "$ref"})


def _constrains_beyond_type(node: dict) -> bool:
    return any(key in node for key in _TYPE_SPECIFIC)


def _is_container(node: Any) -> bool:
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


def _constrains_anything(node: dict) -> bool:
    """Whether the schema restricts values or their parts by itself or through applicators."""
    return _constrains_locally(node) or any(key in node for key in _APPLICATORS)


def _constrains_locally(node: dict) -> bool:
    """Whether the schema restricts values by itself (not only through applicators)."""
    return _constrains_beyond_type(node) or any(k in node for k in ("type", "enum", "const"))


def compile_schema(root: Any, options: FrontendOptions) -> Expr | MachineSet:
    """The language of the JSON texts of the instances `root` accepts: machines linked by
    calls where values are left open, unless a boolean operation needs them flat."""
    return _compiled(root, options, open_recursions=True)


def _compiled(root: Any, options: FrontendOptions, open_recursions: bool
              ) -> Expr | MachineSet:
    try:
        return Compiler(root, options, True, open_recursions).document()
    except UnresolvedCallError as failure:
        return fallback_language(failure, lambda: Compiler(root, options).document())


def canonical_dumps(schema: Any, instance: Any, whitespace: str = "default",
                    ensure_ascii: bool = True) -> str:
    """The text grammarc's table for `schema` expects for `instance`: keys in the ranking of
    their position (then the others, sorted), separators of the whitespace style, numbers
    spelled canonically (`numbers.canonical_text`). Runs on the compiler's deep stack:
    schemas and instances nested as deep as compiles are fine."""
    return call_with_deep_stack(lambda: _canonical_dumps(schema, instance, whitespace,
                                                         ensure_ascii))


def _canonical_dumps(schema: Any, instance: Any, whitespace: str, ensure_ascii: bool) -> str:
    compiler = Compiler(schema, FrontendOptions(whitespace=whitespace))
    schema = compiler.root
    comma, colon = (",", ":") if whitespace == "compact" else (", ", ": ")

    def dumps(value: Any, position: Position) -> str:
        if isinstance(value, dict):
            ranking = position.ranking
            keys = sorted(value, key=lambda k: (0, ranking.index(k)) if k in ranking else (1, k))
            return "{" + comma.join(json.dumps(k, ensure_ascii=ensure_ascii) + colon +
                                    dumps(value[k], position.child(k)) for k in keys) + "}"
        if isinstance(value, list):
            return "[" + comma.join(dumps(v, position.items) for v in value) + "]"
        if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
            return numbers.canonical_text(value, compiler.draft)
        return json.dumps(value, ensure_ascii=ensure_ascii)

    root_ref = compiler.registry.at(schema, _ROOT_URI)
    return dumps(instance, Position(compiler, (root_ref,)))


__all__ = ["Compiler", "Layout", "canonical_dumps", "compile_schema", "draft_of"]
