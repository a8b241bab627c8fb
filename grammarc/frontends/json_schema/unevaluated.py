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

Where a property or an item may be evaluated or not depending on the instance, the keyword is
left in place, and `resolution.check_supported` refuses it as before.
"""

from __future__ import annotations

from typing import Any

from ...errors import GrammarError
from .resolution import ROOT_URI, Ref, Registry, all_schemas

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
        for keyword in ("unevaluatedProperties", "unevaluatedItems"):
            if keyword not in node or node[keyword] is True:
                continue
            ref = Ref(node, registry.base_of.get(id(node), ROOT_URI))
            items = keyword == "unevaluatedItems"
            seen = _evaluated(registry, ref, items)
            if seen is None:
                continue  # depends on the instance: refused by `check_supported`
            unevaluated = node.pop(keyword)
            names, patterns, prefix, everything = seen
            if not everything:
                node["allOf"] = [*(node["allOf"] if isinstance(node.get("allOf"), list) else []),
                                 _branch(registry.draft, unevaluated, names, patterns, prefix,
                                         items)]
            changed = True
    return changed


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
