"""`$dynamicRef` (draft 2020-12) and `$recursiveRef` (2019-09) where the schema alone decides
their target.

A `$dynamicRef` resolves like `$ref` first. Where the schema it reaches has a `$dynamicAnchor`
of the fragment's name, the target is instead that anchor in the outermost schema resource of
the *dynamic scope* (the resources entered on the way from the root to the reference) that
defines one of that name. The root resource is always the outermost, so:

- a fragment that is a JSON pointer, or a name no `$dynamicAnchor` defines there: `$ref`;
- a name the root resource defines as a `$dynamicAnchor`: the root's anchor, wherever the
  reference is met;
- a name only one resource of the document defines: that resource's anchor (the one the
  reference reaches first).

`$recursiveRef: "#"` alike, with the root of a resource whose `$recursiveAnchor` is true for
the name's `$dynamicAnchor`, except that the dynamic scope is searched outwards only as long as
each resource has one: the root's applies where every resource of the document has one.

Each of these becomes one more `allOf` branch `{"$ref": target}` (a schema may hold `$ref`
beside `$dynamicRef`). Where several resources define the name and the root does not, which
one applies depends on the path to the reference; the keyword stays, and
`resolution.check_supported` refuses it. So does one into another document.
"""

from __future__ import annotations

from urllib.parse import urldefrag

from ...errors import GrammarError
from .resolution import ROOT_URI, Registry, all_schemas, join_uri


def rewrite_dynamic_refs(registry: Registry) -> bool:
    """Replace each `$dynamicRef` (`$recursiveRef`) whose target the schema decides by the
    `allOf` branch that refers to it (module docstring); True where one was. The schemas are
    the compiler's own copy."""
    key = {2019: "$recursiveRef", 2020: "$dynamicRef"}.get(registry.draft)
    if key is None:
        return False
    changed = False
    for _, node in list(all_schemas(registry)):
        if isinstance(node.get(key), str):
            target = _target(registry, node, key)
            if target is not None:
                del node[key]
                node["allOf"] = [*(node["allOf"] if isinstance(node.get("allOf"), list)
                                   else []), {"$ref": target}]
                changed = True
    return changed


def _target(registry: Registry, node: dict, key: str) -> str | None:
    """The absolute URI the `key` of `node` refers to, where the schema decides it; None
    where the path to it decides, or where it is another document's (both refused)."""
    reference = node[key]
    target = join_uri(registry.base_of.get(id(node), ROOT_URI), reference)
    url, name = urldefrag(target)
    if url not in registry.resources:
        return None
    if key == "$recursiveRef":  # "#": the resource's root, dynamic where it has the anchor
        if reference != "#":
            raise GrammarError(f"{registry.pointer(node)}: $recursiveRef must be '#', not "
                               f"{reference!r}")
        reached, name = registry.resources[url], ""
    else:
        found = registry.anchors.get((url, name))
        if found is None and name and not name.startswith("/"):
            raise GrammarError(f"{registry.pointer(node)}: $dynamicRef {reference!r}: no "
                               f"$dynamicAnchor or $anchor {name!r} in that schema resource")
        reached = None if found is None else found.node
    if not _defines(reached, key, name):
        return target  # a $ref
    root = registry.base_of.get(id(registry.root))
    if key == "$recursiveRef":
        resources = {id(resource): resource for resource in registry.resources.values()}
        definers = {at for at, resource in resources.items() if _defines(resource, key, name)}
        # the scope is searched outwards only while each resource has the anchor
        if len(definers) == len(resources):
            return f"{root}#"
    else:
        if _defines(getattr(registry.anchors.get((root, name)), "node", None), key, name):
            return f"{root}#{name}"
        definers = {base for (base, fragment), ref in registry.anchors.items()
                    if fragment == name and _defines(ref.node, key, name)}
    return target if len(definers) == 1 else None


def _defines(node: object, key: str, name: str) -> bool:
    """Whether the schema `node` is a dynamic anchor for `key`: a `$dynamicAnchor` named
    `name`, or (`$recursiveRef`) a `$recursiveAnchor` of true."""
    if not isinstance(node, dict):
        return False
    if key == "$recursiveRef":
        return node.get("$recursiveAnchor") is True
    return node.get("$dynamicAnchor") == name
