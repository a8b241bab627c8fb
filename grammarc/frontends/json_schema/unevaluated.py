"""`unevaluatedProperties` and `unevaluatedItems` (drafts 2019-09 and 2020-12) where the
properties or items they see are known from the schema alone.

A property is *evaluated* by the `properties`, `patternProperties` and `additionalProperties`
of the schema that holds `unevaluatedProperties` and of the schemas applied in place that
validate: those of `allOf` and `$ref` always (or the whole schema fails), those of `anyOf`,
`oneOf`, `if`/`then`/`else` and `dependentSchemas` only when they validate, which depends on
the instance. Where none of the latter holds such a keyword, the evaluated properties are the
names of those `properties` and the matches of those patterns (all of them where an
`additionalProperties`, or an `unevaluatedProperties` of a schema applied in place, is among
them), and `unevaluatedProperties: U` is the same as one more `allOf` branch
`{"properties": {name: true, ...}, "patternProperties": {pattern: true, ...},
"additionalProperties": U}`, which the rest of the front end compiles exactly. Items alike:
evaluated by `prefixItems` (the first n) and `items`, `unevaluatedItems: U` is
`{"prefixItems": [true] * n, "items": U}` (draft 2019-09: `items` as a list,
`additionalItems`). From 2020-12 on, `contains` evaluates the items it matches: an item past
the prefix is evaluated exactly when one of the `contains` schemas `C...` holds for it, so
`"items"` is `{"anyOf": [C..., U]}` (before, `contains` is refused).

Where one `oneOf`, `anyOf`, `if` or `dependentSchemas`, the schema's own or one of a schema
it applies in place (through `allOf` and `$ref`, in the same resource), is all that makes what
is evaluated depend on the instance (the schemas below each branch deciding alone), the
schema is rewritten into the cases of what validates, each carrying the keyword beside what
it evaluates, and read as above. Below, the applicator stays where it is, and the cases are
one more `allOf` branch of the schema; where it is the schema's own, some are rewritten in
place instead, as said.
`U_T` below stands for the keyword with the evaluated properties (items) of the branches `T`
and of the schema's own keywords; it only gets weaker as `T` grows.
- `oneOf`: exactly one branch validates. The `oneOf` stays, and one more `allOf` branch
  `{"anyOf": [B_i and U_{B_i}, ...]}` says which. Where a discriminator tells the branches
  apart (each requires a key whose `const` or `enum` values no other one allows, as OpenAPI's
  discriminated unions do), the branches themselves become `B_i and U_{B_i}`.
- `anyOf`: every branch that validates evaluates. `anyOf` over each nonempty set `T` of
  branches of `all of T and U_T` is exact: the set of all branches that validate is one of
  them, and a smaller set's `U_T` implies it. Up to `MOST_UNEVALUATED_BRANCHES` branches (a
  case per set); discriminated branches become `B_i and U_{B_i}` as for `oneOf`.
- `if`: `then` becomes `if and then and U_{if, then}`, `else` becomes `else and U_{else}`
  (a failed `if` keeps no annotation).
- `dependentSchemas`: the schemas of the keys present evaluate. The `dependentSchemas` stays,
  and one more `allOf` branch is `anyOf` over each set `P` of its keys (up to
  `MOST_UNEVALUATED_BRANCHES` whose schemas evaluate) of `P required and U_P`, exact as
  for `anyOf`.

Where a property or an item may be evaluated or not depending on the instance otherwise
(two such applicators, one below a branch of another, a `contains` before 2020-12), the
keyword is left in place, and `resolution.check_supported` refuses it as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Any

from ...errors import GrammarError
from .conditions import value_key
from .resolution import MOST_UNEVALUATED_BRANCHES, ROOT_URI, Ref, Registry, all_schemas

_PROPERTY_KEYWORDS = ("properties", "patternProperties", "additionalProperties",
                      "unevaluatedProperties")
_ITEM_KEYWORDS = ("prefixItems", "items", "additionalItems", "contains", "unevaluatedItems")


def rewrite_unevaluated(registry: Registry) -> bool:
    """Replace each `unevaluatedProperties` and `unevaluatedItems` whose evaluated properties
    or items the schema decides by the `allOf` branch it stands for (or by nothing, where every
    one is evaluated); True where one was. The schemas are the compiler's own copy."""
    if registry.draft < 2019:
        return False
    changed = False
    for _, node in list(all_schemas(registry)):
        base = registry.base_of.get(id(node), ROOT_URI)
        for keyword in ("unevaluatedProperties", "unevaluatedItems"):
            if keyword in node and node[keyword] is not True:
                changed |= _rewritten(registry, Ref(node, base), keyword)
    return changed


def _rewritten(registry: Registry, ref: Ref, keyword: str) -> bool:
    """Rewrite one schema's `keyword` (module docstring); False where it depends on the
    instance."""
    node = ref.node
    items = keyword == "unevaluatedItems"
    seen = _evaluated(registry, ref, items)
    if seen is None:
        return False
    if seen.applicators:
        return _into_branches(registry, ref, keyword, seen)
    unevaluated = node.pop(keyword)
    if not seen.everything:
        node["allOf"] = [*(node["allOf"] if isinstance(node.get("allOf"), list) else []),
                         _branch(registry.draft, unevaluated, seen, items)]
    return True


def _into_branches(registry: Registry, ref: Ref, keyword: str, own: _Evaluated) -> bool:
    """Where one applicator, a `oneOf`, `anyOf`, `if` or (properties) `dependentSchemas` of
    the schema or of one it applies in place, is all that makes the evaluated properties
    (items) depend on the instance (`own.applicators`; the rest of `own` is what the other
    keywords evaluate): the schema rewritten so that each case of what validates carries the
    keyword beside what it evaluates, read there as a schema that decides alone (module
    docstring); False, and nothing changed, otherwise."""
    node = ref.node
    items = keyword == "unevaluatedItems"
    if len(own.applicators) != 1:
        return False
    holder, kind = own.applicators[0]
    held = holder.node
    if kind not in ("oneOf", "anyOf", "if", "dependentSchemas") or \
            kind == "dependentSchemas" and items or \
            held is not node and holder.base != ref.base:  # (its branches read beside node)
        return False
    everything = own.everything
    marker = _marker(registry.draft, own, items)
    unevaluated = node[keyword]
    made: list[dict] = []

    def case(parts: list[Any]) -> dict:
        """The schemas `parts` all valid, and `keyword` with what they and the schema's own
        keywords evaluate."""
        made.append({"allOf": [*parts, marker], keyword: unevaluated})
        return made[-1]

    # `beside`: one more allOf branch of the schema, the applicator staying where it is;
    # `inside`: the applicator's keywords replaced, where it is the schema's own
    inside = None
    if kind == "if":
        inside = {"then": case([held["if"], held.get("then", True)]),
                  "else": case([held.get("else", True)])}
        beside = {"if": held["if"], **inside}
    elif kind == "dependentSchemas":  # those of the keys present
        evaluating = [name for name, sub in held[kind].items()
                      if _evaluates(registry, registry.at(sub, holder.base), items, set())]
        if len(evaluating) > MOST_UNEVALUATED_BRANCHES:
            return False
        beside = {"anyOf": [case([{"required": list(present)},
                                  *(held[kind][name] for name in present)])
                            for size in range(len(evaluating) + 1)
                            for present in combinations(evaluating, size)]}
    else:
        branches = held[kind]
        if kind == "anyOf":  # any that validate: every nonempty set
            if len(branches) > MOST_UNEVALUATED_BRANCHES:
                return False
            inside = {kind: [case(list(chosen)) for size in range(1, len(branches) + 1)
                             for chosen in combinations(branches, size)]}
            beside = {"anyOf": inside[kind]}
        else:  # exactly one validates: the oneOf says which
            beside = {"anyOf": [case([branch]) for branch in branches]}
            if not items and _discriminated(registry, [registry.at(sub, holder.base)
                                                        for sub in branches]):
                inside = {kind: beside["anyOf"]}  # (no two branches validate together)
    if not everything and any(seen is None or seen.applicators for seen in
                              (_evaluated(registry, Ref(one, ref.base), items) for one in made)):
        return False  # a case that still depends on the instance: refused as it stands
    del node[keyword]
    if everything:  # the schema's own keywords evaluate every property (item)
        return True
    if held is node and inside is not None:
        node.update(inside)
    else:
        node["allOf"] = [*(node["allOf"] if isinstance(node.get("allOf"), list) else []),
                         beside]
    for one in made:
        _rewritten(registry, Ref(one, ref.base), keyword)
    return True


def _discriminated(registry: Registry, branches: list[Ref]) -> bool:
    """Whether no object satisfies two of the branches: each that may be an object requires a
    key whose values (`const`, `enum`, through `allOf` and `$ref`) no other one allows."""
    keyed = []
    for branch in branches:
        try:
            parts = [p for p in registry.conjuncts(branch, set()) if isinstance(p.node, dict)]
        except GrammarError:
            return False
        if any(_not_object(part.node.get("type")) for part in parts):
            continue  # no object satisfies it
        keyed.append(({key for part in parts if isinstance(part.node.get("required"), list)
                       for key in part.node["required"] if isinstance(key, str)}, parts))
    if len(keyed) < 2:
        return True
    common = set.intersection(*(required for required, _ in keyed))
    for key in sorted(common):
        values = [_values(registry, parts, key) for _, parts in keyed]
        if all(found is not None for found in values) and \
                all(not a & b for a, b in combinations(values, 2)):
            return True
    return False


def _not_object(types: Any) -> bool:
    """Whether a `type` keyword's value leaves objects out."""
    return isinstance(types, str) and types != "object" or \
        isinstance(types, list) and "object" not in types


def _values(registry: Registry, parts: list[Ref], key: str) -> set | None:
    """The values (`value_key`s) the `parts` allow for `key` where one limits them to a
    `const` or an `enum`, else None."""
    allowed = None
    for part in parts:
        properties = part.node.get("properties")
        if not isinstance(properties, dict) or key not in properties:
            continue
        try:
            limits = registry.conjuncts(registry.at(properties[key], part.base), set())
        except GrammarError:
            return None
        for limit in limits:
            schema = limit.node
            if schema is False:
                found = set()
            elif isinstance(schema, dict) and "const" in schema:
                found = {value_key(schema["const"])}
            elif isinstance(schema, dict) and isinstance(schema.get("enum"), list):
                found = {value_key(value) for value in schema["enum"]}
            else:
                continue
            allowed = found if allowed is None else allowed & found
    return allowed


@dataclass(frozen=True)
class _Evaluated:
    """What a schema and those it applies in place evaluate, where the schema decides it."""

    names: list[str]      # the properties named, in order
    patterns: list[str]   # the patterns of patternProperties
    prefix: int           # the items of the longest prefix
    everything: bool      # every property (item)
    contains: list[Any]   # (items, 2020-12) the schemas of `contains`: the items they match
    applicators: list[tuple[Ref, str]]  # what makes it depend on the instance (`_applicators`)


def _marker(draft: int, seen: _Evaluated, items: bool) -> dict:
    """A schema that evaluates what `seen` says and asserts nothing."""
    if not items:
        return {"properties": {name: True for name in seen.names},
                "patternProperties": {pattern: True for pattern in seen.patterns}}
    marker: dict = {"allOf": [{"contains": schema, "minContains": 0}
                              for schema in seen.contains]} if seen.contains else {}
    if seen.prefix:
        marker["prefixItems" if draft >= 2020 else "items"] = [True] * seen.prefix
    return marker


def _branch(draft: int, unevaluated: Any, seen: _Evaluated, items: bool) -> dict:
    """The `allOf` branch `unevaluated...: unevaluated` stands for, given what is evaluated
    (an item past the prefix that a `contains` matches is evaluated)."""
    if not items:
        return {"properties": {name: True for name in seen.names},
                "patternProperties": {pattern: True for pattern in seen.patterns},
                "additionalProperties": unevaluated}
    if seen.contains:
        unevaluated = {"anyOf": [*seen.contains, unevaluated]}
    if not seen.prefix:
        return {"items": unevaluated}
    if draft >= 2020:
        return {"prefixItems": [True] * seen.prefix, "items": unevaluated}
    return {"items": [True] * seen.prefix, "additionalItems": unevaluated}


def _evaluated(registry: Registry, ref: Ref, items: bool) -> _Evaluated | None:
    """What the schema `ref` and those applied in place evaluate, with the applicators
    (theirs, as `_applicators` names them) that make more of it depend on the instance; it
    is decided by the schema alone where there are none. None where a `$ref` does not
    resolve, or (items) a `contains` is another resource's."""
    names: list[str] = []
    patterns: list[str] = []
    contains: list[Any] = []
    applicators: list[tuple[Ref, str]] = []
    prefix, everything = 0, False
    closure = _in_place(registry, ref)
    if closure is None:
        return None  # left to the compile, which reports the reference
    base = ref.base
    for ref, own in closure:
        node = ref.node
        applicators += [(ref, kind) for kind in _applicators(registry, ref, items)]
        if items and "contains" in node:  # (2020-12: `_applicators` refuses it before)
            if ref.base != base:
                return None  # its schema would be read beside the first one's
            contains.append(node["contains"])
        if items:
            listed = node.get("prefixItems") if registry.draft >= 2020 else node.get("items")
            if isinstance(listed, list):
                prefix = max(prefix, len(listed))
            if registry.draft >= 2020:
                everything |= "items" in node
            else:  # `additionalItems` only after a list of `items`
                everything |= "additionalItems" in node if isinstance(listed, list) else \
                    "items" in node
            everything |= not own and "unevaluatedItems" in node
        else:
            for key, found in (("properties", names), ("patternProperties", patterns)):
                if isinstance(node.get(key), dict):
                    found.extend(name for name in node[key] if name not in found)
            everything |= "additionalProperties" in node or \
                not own and "unevaluatedProperties" in node
    return _Evaluated(names, patterns, prefix, everything, contains, applicators)


def _in_place(registry: Registry, ref: Ref) -> list[tuple[Ref, bool]] | None:
    """The schema `ref` and those it applies in place through `allOf` and `$ref`, each once,
    with whether it is `ref` itself; None where a `$ref` does not resolve."""
    out: list[tuple[Ref, bool]] = []
    stack, seen = [(ref, True)], set()
    while stack:
        ref, own = stack.pop()
        node = ref.node
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        out.append((ref, own))
        if isinstance(node.get("allOf"), list):
            stack.extend((registry.at(sub, ref.base), False) for sub in node["allOf"])
        if isinstance(node.get("$ref"), str):
            try:
                stack.append((registry.resolve(ref), False))
            except GrammarError:
                return None
    return out


def _applicators(registry: Registry, ref: Ref, items: bool) -> list[str]:
    """The applicators of the schema `ref` whose subschemas evaluate properties (items), so
    that what is evaluated depends on the instance: `oneOf`, `anyOf`, `if` (with its `then`
    and `else`), `dependentSchemas`; `then` for a `then` or `else` without `if`; `contains`
    for items before draft 2020-12."""
    node = ref.node

    def evaluates(sub: Any) -> bool:
        return _evaluates(registry, registry.at(sub, ref.base), items, set())

    kinds = [kind for kind in ("oneOf", "anyOf") if isinstance(node.get(kind), list)
             and any(evaluates(sub) for sub in node[kind])]
    if any(evaluates(node[key]) for key in ("if", "then", "else") if key in node):
        kinds.append("if" if "if" in node else "then")
    if isinstance(node.get("dependentSchemas"), dict) and \
            any(evaluates(sub) for sub in node["dependentSchemas"].values()):
        kinds.append("dependentSchemas")
    if items and "contains" in node and registry.draft < 2020:
        kinds.append("contains")  # (from 2020-12 on, the items it matches: `_Evaluated`)
    return kinds


def _evaluates(registry: Registry, ref: Ref, items: bool, seen: set[int]) -> bool:
    """Whether the schema `ref`, or one it applies in place (not under `not`, which keeps no
    annotation), holds a keyword that evaluates properties (or items)."""
    node = ref.node
    if not isinstance(node, dict) or id(node) in seen:
        return False
    seen.add(id(node))
    if any(key in node for key in (_ITEM_KEYWORDS if items else _PROPERTY_KEYWORDS)):
        return True
    subs = [sub for keyword in ("allOf", "anyOf", "oneOf") if isinstance(node.get(keyword), list)
            for sub in node[keyword]]
    subs += [node[keyword] for keyword in ("if", "then", "else") if keyword in node]
    if isinstance(node.get("dependentSchemas"), dict):
        subs += list(node["dependentSchemas"].values())
    below = [registry.at(sub, ref.base) for sub in subs]
    if isinstance(node.get("$ref"), str):
        try:
            below.append(registry.resolve(ref))
        except GrammarError:
            return True  # unknown: as if it evaluated (the compile reports the reference)
    return any(_evaluates(registry, sub, items, seen) for sub in below)
