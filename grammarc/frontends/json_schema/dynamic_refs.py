"""`$dynamicRef` (draft 2020-12) where the schema alone decides its target.

A `$dynamicRef` resolves like `$ref` first. Where the schema it reaches has a `$dynamicAnchor`
of the fragment's name, the target is instead that anchor in the outermost schema resource of
the *dynamic scope* (the resources entered on the way from the root to the reference) that
defines one of that name. The root resource is always the outermost, so:

- a fragment that is a JSON pointer, or a name no `$dynamicAnchor` defines there: `$ref`;
- a name the root resource defines as a `$dynamicAnchor`: the root's anchor, wherever the
  reference is met;
- a name only one resource of the document defines: that resource's anchor (the one the
  reference reaches first).

Each of these becomes one more `allOf` branch `{"$ref": target}` (a schema may hold `$ref`
beside `$dynamicRef`). Where several resources define the name and the root does not, which
one applies depends on the path to the reference; the keyword stays, and
`resolution.check_supported` refuses it.
"""

from __future__ import annotations

from urllib.parse import urldefrag

from ...errors import GrammarError
from .resolution import ROOT_URI, Registry, all_schemas, join_uri


def rewrite_dynamic_refs(registry: Registry) -> bool:
    """Replace each `$dynamicRef` whose target the schema decides by the `allOf` branch that
    refers to it (module docstring); True where one was. The schemas are the compiler's own
    copy."""
    if registry.draft < 2020:
        return False
    root = registry.base_of.get(id(registry.root))
    changed = False
    for _, node in list(all_schemas(registry)):
        reference = node.get("$dynamicRef")
        if not isinstance(reference, str):
            continue
        target = join_uri(registry.base_of.get(id(node), ROOT_URI), reference)
        url, name = urldefrag(target)
        if url not in registry.resources:
            continue  # another document's: refused
        reached = registry.anchors.get((url, name))
        if reached is None and name and not name.startswith("/"):
            raise GrammarError(f"{registry.pointer(node)}: $dynamicRef {reference!r}: no "
                               f"$dynamicAnchor or $anchor {name!r} in that schema resource")
        if reached is not None and _defines(reached.node, name):
            definers = {base for (base, fragment), ref in registry.anchors.items()
                        if fragment == name and _defines(ref.node, name)}
            if root in definers:
                target = f"{root}#{name}"
            elif len(definers) > 1:
                continue  # the path to the reference decides: refused
        del node["$dynamicRef"]
        node["allOf"] = [*(node["allOf"] if isinstance(node.get("allOf"), list) else []),
                         {"$ref": target}]
        changed = True
    return changed


def _defines(node: object, name: str) -> bool:
    """Whether the schema `node` has a `$dynamicAnchor` named `name`."""
    return isinstance(node, dict) and node.get("$dynamicAnchor") == name
