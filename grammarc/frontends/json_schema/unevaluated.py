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
evaluated by `prefixItems` (the first n), `items` and `contains` (the items that match:
known only from the instance), `unevaluatedItems: U` is `{"prefixItems": [true] * n,
"items": U}` (draft 2019-09: `items` as a list, `additionalItems`).

Where the schema's own `oneOf`, `anyOf`, `if` or `dependentSchemas` is all that makes what is
evaluated depend on the instance (the schemas below each branch deciding alone), the schema is
rewritten into the cases of what validates, each carrying the keyword beside what it
evaluates, and read as above.
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
(`contains`, two such applicators, one below a branch), the keyword is left in place, and `resolution.check_supported` refuses it as before.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from ...errors import GrammarError
from .conditions import value_key
from .resolution import MOST_UNEVALUATED_BRANCHES, ROOT_URI, Ref, Registry, all_schemas

_PROPERTY_KEYWORDS = ("properties", "patternProperties", "additionalProperties",
                      "unevaluatedProperties")
_ITEM_KEYWORDS = ("prefixItems", "items", "additionalItems", "contains", "unevaluatedItems")
_CONDITIONAL = ("anyOf", "oneOf", "if", "then", "else", "dependentSchemas")


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
        return _into_branches(registry, ref, keyword)
    unevaluated = node.pop(keyword)
    names, patterns, prefix, everything = seen
    if not everything:
        node["allOf"] = [*(node["allOf"] if isinstance(node.get("allOf"), list) else []),
                         _branch(registry.draft, unevaluated, names, patterns, prefix, items)]
    return True


def _into_branches(registry: Registry, ref: Ref, keyword: str) -> bool:
    """Where one applicator of the schema's own, its `oneOf`, `anyOf`, `if` or (properties)
    `dependentSchemas`, is all that makes the evaluated properties (items) depend on the
    instance: the schema rewritten so
    that each case of what validates carries the keyword beside what it evaluates, read
    there as a schema that decides alone (module docstring); False, and nothing changed,
    otherwise."""
    node = ref.node
    items = keyword == "unevaluatedItems"

    def doubtful(sub: Any) -> bool:
        return _evaluates(registry, registry.at(sub, ref.base), items, set())

    kinds = [kind for kind in ("oneOf", "anyOf") if isinstance(node.get(kind), list)
             and any(doubtful(sub) for sub in node[kind])]
    if "if" in node and any(doubtful(node[key]) for key in ("if", "then", "else") if key in node):
        kinds.append("if")
    dependents = node.get("dependentSchemas") if not items else None
    evaluating = [name for name, sub in dependents.items() if doubtful(sub)] \
        if isinstance(dependents, dict) else []
    if evaluating:
        kinds.append("dependentSchemas")
    if len(kinds) != 1:
        return False
    kind = kinds[0]
    applicator = {"if": ("if", "then", "else")}.get(kind, (kind,))
    own = _evaluated(registry, Ref({k: v for k, v in node.items() if k not in applicator},
                                   ref.base), items)
    if own is None:
        return False
    names, patterns, prefix, everything = own
    marker = _marker(registry.draft, names, patterns, prefix, items)
    unevaluated = node[keyword]
    made: list[dict] = []

    def case(parts: list[Any]) -> dict:
        """The schemas `parts` all valid, and `keyword` with what they and the schema's own
        keywords evaluate."""
        made.append({"allOf": [*parts, marker], keyword: unevaluated})
        return made[-1]

    if kind == "if":
        cases = {"then": case([node["if"], node.get("then", True)]),
                 "else": case([node.get("else", True)])}
    elif kind == "dependentSchemas":  # those of the keys present: the dependentSchemas stays
        if len(evaluating) > MOST_UNEVALUATED_BRANCHES:
            return False
        cases = {"allOf": [*(node["allOf"] if isinstance(node.get("allOf"), list) else []),
                           {"anyOf": [case([{"required": list(present)},
                                            *(dependents[name] for name in present)])
                                      for size in range(len(evaluating) + 1)
                                      for present in combinations(evaluating, size)]}]}
    else:
        branches = node[kind]
        if not items and _discriminated(registry, [registry.at(sub, ref.base)
                                                    for sub in branches]):
            cases = {kind: [case([branch]) for branch in branches]}  # at most one validates
        elif kind == "oneOf":  # exactly one validates: the oneOf stays, and says which
            cases = {"allOf": [*(node["allOf"] if isinstance(node.get("allOf"), list) else []),
                               {"anyOf": [case([branch]) for branch in branches]}]}
        elif len(branches) <= MOST_UNEVALUATED_BRANCHES:  # any that validate: every nonempty set
            cases = {kind: [case(list(chosen)) for size in range(1, len(branches) + 1)
                            for chosen in combinations(branches, size)]}
        else:
            return False
    if not everything and any(_evaluated(registry, Ref(one, ref.base), items) is None
                              for one in made):
        return False  # a case that still depends on the instance: refused as it stands
    del node[keyword]
    if everything:  # the schema's own keywords evaluate every property (item)
        return True
    node.update(cases)
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


def _marker(draft: int, names: list[str], patterns: list[str], prefix: int,
            items: bool) -> dict:
    """A schema that evaluates these properties (or the first `prefix` items) and asserts
    nothing."""
    if not items:
        return {"properties": {name: True for name in names},
                "patternProperties": {pattern: True for pattern in patterns}}
    return {"prefixItems" if draft >= 2020 else "items": [True] * prefix} if prefix else {}


def _branch(draft: int, unevaluated: Any, names: list[str], patterns: list[str], prefix: int,
            items: bool) -> dict:
    """The `allOf` branch `unevaluated...: unevaluated` stands for, given what is evaluated."""
    if not items:
        return {"properties": {name: True for name in names},
                "patternProperties": {pattern: True for pattern in patterns},
                "additionalProperties": unevaluated}
    if not prefix:
        return {"items": unevaluated}
    if draft >= 2020:
        return {"prefixItems": [True] * prefix, "items": unevaluated}
    return {"items": [True] * prefix, "additionalItems": unevaluated}


def _evaluated(registry: Registry, ref: Ref, items: bool
               ) -> tuple[list[str], list[str], int, bool] | None:
    """What the schema `ref` and those applied in place evaluate, if the schema alone
    decides it: (property names in order, patterns, items of the longest prefix, whether
    everything is); None where an applicator that may fail for some instances holds an
    evaluating keyword, or (items) where `contains` does."""
    names: list[str] = []
    patterns: list[str] = []
    prefix, everything = 0, False
    stack, seen = [(ref, True)], set()
    while stack:
        ref, own = stack.pop()
        node = ref.node
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        if items:
            if "contains" in node:
                return None
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
        for keyword in _CONDITIONAL:
            value = node.get(keyword)
            subs = value if isinstance(value, list) else \
                list(value.values()) if isinstance(value, dict) and keyword == "dependentSchemas" \
                else [value] if keyword in node else []
            if any(_evaluates(registry, registry.at(sub, ref.base), items, set()) for sub in subs):
                return None
        if isinstance(node.get("allOf"), list):
            stack.extend((registry.at(sub, ref.base), False) for sub in node["allOf"])
        if isinstance(node.get("$ref"), str):
            try:
                stack.append((registry.resolve(ref), False))
            except GrammarError:
                return None  # left to the compile, which reports the reference
    return names, patterns, prefix, everything


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
