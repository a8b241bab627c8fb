"""Scalars and literal values: the texts of null, booleans, numbers (`numbers.py`) and
strings (`strings.py`) a schema allows, of the values of `enum` and `const`, and the small
explicit sets of values a schema may be (for `uniqueItems` and `oneOf` discriminators)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from ...automaton import EMPTY, Automaton, Expr, alt, concat, literal
from ...automaton.callgraph import called_names
from ...automaton.expr import Call, CountedText
from ...automaton.counters import with_counted_repeat
from ...errors import GrammarError, TooManyStatesError, UnsupportedError
from . import numbers, strings
from .conditions import value_key
from .node import KEYWORDS, count_keyword, json_type
from .part import CompilerPart, Document
from .positions import Position
from .resolution import Ref

_INTEGER_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_MAX_LITERAL_ORDERS = 12   # keys of an enum/const object in any key order (2^n sets)
_MAX_COUNT = 2**31 - 1     # the largest bound a count register holds (docs/FORMAT.md)
_MAX_UNIQUE_RANGE = 64      # integers a range an array with uniqueItems draws from may hold
_MAX_UNIQUE_CANDIDATES = 256  # values of items with uniqueItems, read off a schema's structure
_STRING_KEYWORDS = ("minLength", "maxLength", "pattern", "format")  # what `string` reads
# a pattern's states times its maxLength past this: its characters are counted at run time
_SMALL_PRODUCT = 4096

def _string_name(node: dict) -> str:
    """The name of the machine of `node`'s strings: the spelling of its string keywords."""
    keywords = json.dumps({k: node[k] for k in _STRING_KEYWORDS if k in node},
                          sort_keys=True, ensure_ascii=False, default=repr)  # Decimal
    return "string" if keywords == "{}" else f"string {keywords}"


class Scalars(CompilerPart):
    """The scalar values of a schema, its enumerated values, and its values as explicit
    sets."""

    def __init__(self, compiler: Document) -> None:
        super().__init__(compiler)
        self._strings: dict[str, Expr] = {}  # the texts of each string machine, by name
        self.string_machines: set[str] = set()  # the names of those that are not counted

    def of_types(self, node: dict, types: frozenset[str],
                 within: numbers.Bounds = numbers.Bounds()) -> list[Expr]:
        """The texts of the values of `node` of the scalar `types` (null, booleans, numbers,
        strings), one option per type, in that order; its numbers only those `within` the
        range given."""
        options = []
        if "null" in types:
            options.append(literal("null"))
        if "boolean" in types:
            options.append(alt(literal("true"), literal("false")))
        if "number" in types or "integer" in types:
            options.append(self.number(node, integer="number" not in types, within=within))
        if "string" in types:
            options.append(self.string(node))
        return options

    def enumerated(self, node: dict, types: frozenset[str], position: Position) -> Expr:
        """Every text of the values of `node`'s `enum` or `const` (both: the enum's values
        equal to the const) of one of `types`."""
        values = node["enum"] if "enum" in node else [node["const"]]
        if "const" in node:  # both apply: the enum's values equal to the const
            values = [v for v in values if value_key(v) == value_key(node["const"])]
        allowed = [v for v in values if json_type(v) in types or
                   (json_type(v) == "integer" and "number" in types)]
        return alt(*(self.literal_value(v, position) for v in allowed))

    def number(self, node: dict, integer: bool, within: numbers.Bounds = numbers.Bounds()
               ) -> Expr:
        """The texts of `node`'s numbers (integers only if `integer`) that lie `within` a
        range the schema around it puts on them."""
        bounds = numbers.Bounds.of(node).meet(within)
        lo, lo_excl, hi, hi_excl = bounds.lo, bounds.lo_exclusive, bounds.hi, bounds.hi_exclusive
        step = node.get("multipleOf")
        if integer:  # draft 4 integers have no fraction; later drafts allow `.0`, on request
            fractions = self.draft >= 6 and self.options.integer_fractions
            base = numbers.integers(lo, hi, lo_excl, hi_excl, zero_fraction=fractions)
        elif bounds.open and step is None:
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
        """The texts of `node`'s strings. With calls, a call of one machine per spelling of
        the string keywords, so that a language a schema uses in many places is walked over
        the vocabulary once (and the common ones once per process, `alignment.machines`)."""
        if isinstance(node.get("format"), str) and strings.format_texts(node["format"]) is None:
            self.options.notice(f"format {node['format']!r} at {self.registry.pointer(node)} "
                                "is not checked")
        if not self.calls:
            return self._string_texts(node)
        name = _string_name(node)
        texts = self._strings.get(name)
        if texts is None:
            texts = self._strings[name] = self._string_texts(node)
        if isinstance(texts, Call):  # a counted string is a machine of its own already
            return texts
        self.string_machines.add(name)
        return self.machines.machine(name, lambda: texts)

    def _string_texts(self, node: dict) -> Expr:
        texts: list[Expr] = []
        lo, hi = count_keyword(node, "minLength"), count_keyword(node, "maxLength")
        only_lengths = not isinstance(node.get("pattern"), str) and \
            (not isinstance(node.get("format"), str) or
             strings.format_texts(node["format"]) is None)  # a format not checked
        if self.calls and only_lengths and \
                strings.COUNTED_LENGTH < max(lo or 0, hi or 0) <= _MAX_COUNT and \
                (hi is None or (lo or 0) <= hi):
            return self.machines.machine(f"string{{{lo or 0},{'' if hi is None else hi}}}",
                                         lambda: strings.counted_string(lo or 0, hi))
        if lo is not None or hi is not None:
            texts.append(strings.json_string(strings.length_between(lo or 0, hi)))
        shaped = []  # the texts of the pattern and the format
        if isinstance(node.get("pattern"), str):
            shaped.append(strings.pattern_texts(node["pattern"],
                                                self.registry.pointer(node) + "/pattern"))
        if isinstance(node.get("format"), str):
            formatted = strings.format_texts(node["format"])
            if formatted is not None:
                shaped.append(formatted)
        try:
            counted_text = self._counted_pattern(node, shaped, lo, hi) if shaped else None
            if counted_text is not None:
                return counted_text
            counted = with_counted_repeat(shaped[0], strings.COUNTED_LENGTH, _MAX_COUNT) \
                if self.calls and not texts and isinstance(node.get("pattern"), str) and \
                not isinstance(node.get("format"), str) else None
            if counted is not None:  # `^[a-z]{1,1000}$`: a machine that counts its bytes
                return self.machines.machine(f"pattern {node['pattern']}", lambda: counted)
            texts += shaped
            if not texts:
                texts.append(strings.any_string())
            if len(texts) == 1 and not isinstance(texts[0], Automaton):
                # a minimal DFA: spelled out as alternatives, the texts would be determinised
                # again, into many equivalent states, in every body that holds them
                return self.ops.automaton(texts[0])
            return self.compiler.intersect_all(texts)
        except TooManyStatesError as exc:  # located: the string alone is too large
            raise TooManyStatesError(f"{self.registry.pointer(node)}: {exc}") from None

    def _counted_pattern(self, node: dict, shaped: list[Expr], lo: int | None,
                         hi: int | None) -> Expr | None:
        """A call of a machine that counts the characters of the texts of a pattern or a
        format (`shaped`, both where there are both) under a `maxLength` that cuts some of them
        (`^(?:\\S+\\s+){0,49}\\S+$` within 500: the product of the pattern's states and the
        lengths would be a million states; a `uri` within 2,048, a `hostname` within 128);
        `NOTHING` where no text fits the lengths; None where that product is small
        (`_SMALL_PRODUCT`) or the texts cannot be counted.""" 
        if not self.calls or hi is None or hi > _MAX_COUNT or (lo or 0) > hi:
            return None
        pattern = self.ops.automaton(self.compiler.intersect_all(shaped))
        if not isinstance(pattern, Automaton) or pattern.dfa.num_states * hi <= _SMALL_PRODUCT:
            return None
        longest = pattern.dfa.longest_text()
        if longest is not None and longest <= hi:  # the bound cuts no text
            return None
        counted = self.ops.counted(pattern, strings.counted_string(lo or 0, hi))
        if not isinstance(counted, CountedText):
            return counted  # NOTHING, or None: the product, whose errors name the string
        return self.machines.machine(_string_name(node), lambda: counted)

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
            try:
                body = concat(*[concat(layout.comma, m) if i else m
                                for i, m in enumerate(fixed)], rest(frozenset(free), not fixed))
            finally:
                del rest  # a recursive closure is a cycle: free it now
            return concat(layout.open_object, body, layout.close_object)
        raise GrammarError(f"not a JSON value: {value!r}")

    def finite_values(self, schema: Any, base: str | None = None) -> list[Any] | None:
        """The values a schema allows when it is a small explicit set (`enum`, `const`,
        booleans, `null`), else None. Given the `base` to read it against, exactly that set:
        the values of one of its conjuncts (`Registry.conjuncts`: through `$ref`s and
        `allOf`s) that every conjunct allows, None if a conjunct has a keyword that could
        exclude some; without, a superset (other keywords are not read)."""
        if base is not None:
            parts = [p.node for p in self.registry.conjuncts(self.registry.at(schema, base), set())]
            if not all(p is False or isinstance(p, dict) and not set(p) & KEYWORDS -
                       {"enum", "const", "type", "$ref", "allOf", *_INTEGER_BOUNDS}
                       for p in parts):
                return None
            sets = [self.finite_values(p if p is False else
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
            types = self.compiler.read(schema).types
            if types - {"boolean", "null", "integer"}:
                return None
            values = ([True, False] if "boolean" in types else []) + \
                ([None] if "null" in types else [])
            if "integer" in types:
                span = _integer_span(schema)
                if span is None:
                    return None
                values += list(range(*span))
        types = self.compiler.read(schema).types
        return [v for v in values if (json_type(v) in types or
                (json_type(v) == "integer" and "number" in types)) and
                _within_bounds(v, schema)]

    def candidate_values(self, ref: Ref, opened: frozenset[int] = frozenset()
                         ) -> list[Any] | None:
        """A finite superset of the values a schema allows, of at most
        `_MAX_UNIQUE_CANDIDATES`, or None: the exact set of `finite_values`, else the values
        every conjunct (`$ref` targets, `allOf` branches) may take, where one is a union
        (`anyOf`, `oneOf`) of such sets or an object of such properties and no other; the
        keywords of the schema not read here only remove values (`opened`: the schemas being
        read, which a recursive `$ref` meets again)."""
        exact = self.finite_values(ref.node, ref.base)
        if exact is not None or not isinstance(ref.node, dict) or id(ref.node) in opened:
            return exact
        opened = opened | {id(ref.node)}
        known: list[Any] | None = None
        for part in self.registry.conjuncts(ref, set()):
            if part.node is False:
                return []
            if not isinstance(part.node, dict):
                continue
            own = {k: v for k, v in part.node.items() if k != "$ref"}
            for values in (self.finite_values(own), self._candidates_of(part, opened)):
                if values is not None and (known is None or len(values) < len(known)):
                    known = values
        return known

    def _candidates_of(self, ref: Ref, opened: frozenset[int]) -> list[Any] | None:
        """`candidate_values` of one conjunct, from its own keywords (not `$ref`, `allOf`)."""
        node = ref.node
        for keyword in ("anyOf", "oneOf"):
            if isinstance(node.get(keyword), list):
                union: list[Any] = []
                for branch in node[keyword]:
                    values = self.candidate_values(self.registry.at(branch, ref.base), opened)
                    if values is None:
                        break
                    union += values
                else:
                    return _distinct(union) if len(union) <= _MAX_UNIQUE_CANDIDATES else None
        properties = node.get("properties")
        types = self.compiler.read(node).types
        if types == {"object"} and isinstance(properties, dict) and \
                node.get("additionalProperties") is False and "patternProperties" not in node:
            return self._candidate_objects(ref, properties, opened)
        if types == {"string"} and (not isinstance(node.get("format"), str) or
                                    strings.format_texts(node["format"]) is not None):
            # a pattern, lengths or a format may leave few strings: read them off
            language = self._string_texts(node)
            if called_names(language):  # a long string counted at run time
                return None
            texts = self.ops.dfa(language)
            return [] if texts is None else \
                strings.finite_values(texts, _MAX_UNIQUE_CANDIDATES)
        return None

    def _candidate_objects(self, ref: Ref, properties: dict, opened: frozenset[int]
                           ) -> list[Any] | None:
        """The objects of `properties` (each with finitely many values) and no other key,
        the `required` ones present: every combination, if they are few."""
        required = ref.node.get("required", [])
        required = set(required) if isinstance(required, list) else set()
        if not required <= set(properties):  # a required key no property allows
            return []
        objects: list[dict] = [{}]
        for name, schema in properties.items():
            values = self.candidate_values(self.registry.at(schema, ref.base), opened)
            if values is None:
                return None
            grown = [{**o, name: v} for o in objects for v in values]
            objects = grown if name in required else objects + grown
            if len(objects) > _MAX_UNIQUE_CANDIDATES:
                return None
        return objects


def _distinct(values: list[Any]) -> list[Any]:
    """`values` without repeats (by JSON equality, `value_key`), in order."""
    first: dict[Any, Any] = {}
    for v in values:
        first.setdefault(value_key(v), v)
    return list(first.values())


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
    if json_type(value) not in ("integer", "number"):
        return True
    number = Decimal(str(value)) if isinstance(value, float) else Decimal(value)
    tests = {"minimum": number.__ge__, "exclusiveMinimum": number.__gt__,
             "maximum": number.__le__, "exclusiveMaximum": number.__lt__}
    return all(test(Decimal(str(schema[key])) if isinstance(schema[key], float)
                    else Decimal(schema[key]))
               for key, test in tests.items() if key in schema)
