"""Resolution and drafts: every subschema of a document with its base URI, `$id` resources,
anchors and JSON pointers (`Registry`), `$ref` resolution, the draft a document is written
in, and the checks of a document for unsupported keywords and for near misses of keywords
(its check against its draft's meta-schema is `meta.py`'s)."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

from ...errors import GrammarError, UnsupportedError
from .. import FrontendOptions
from .node import ANNOTATIONS, KEYWORDS, TYPES, declared_types, json_type

ROOT_URI = "https://grammarc.invalid/root.json"
_DRAFTS = (("draft-00", 3), ("draft-01", 3), ("draft-02", 3), ("draft-03", 3),
           ("draft-04", 4), ("draft-06", 6), ("draft-07", 7), ("2019-09", 2019),
           ("2020-12", 2020))  # 3: draft 3 or earlier, which grammarc refuses
# keywords holding one subschema / a list of subschemas / a map of subschemas
_SCHEMA_KEYWORDS = ("additionalProperties", "additionalItems", "contains", "propertyNames",
                    "not", "if", "then", "else", "unevaluatedProperties", "unevaluatedItems",
                    "contentSchema")
_LIST_KEYWORDS = ("allOf", "anyOf", "oneOf", "prefixItems")
MAP_KEYWORDS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_UNSUPPORTED = ("unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef")
# an anyOf (dependentSchemas) of more branches (keys) that evaluate is not rewritten for
# unevaluated* (`unevaluated`)
MOST_UNEVALUATED_BRANCHES = 4
# every key the drafts (4 to 2020-12) define, and annotations common in the wild (OpenAPI):
# what `check_spelling` compares unknown keys with
_KNOWN_KEYS = frozenset(KEYWORDS | ANNOTATIONS | {
    *_SCHEMA_KEYWORDS, *_LIST_KEYWORDS, *MAP_KEYWORDS, "$schema", "$id", "id", "$anchor",
    "$dynamicAnchor", "$recursiveAnchor", "$vocabulary", "$defs", "definitions", "minContains",
    "maxContains", "contentEncoding", "contentMediaType", "contentSchema",
    "example", "nullable", "discriminator", "externalDocs", "xml"})
_KNOWN_BY_CASE = {key.lower(): key for key in sorted(_KNOWN_KEYS)}


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
        self._walk(root, ROOT_URI, "")
        self.resources.setdefault(ROOT_URI, root)

    def _walk(self, node: Any, base: str, pointer: str, names_only: bool = False) -> None:
        """Record the subschemas of `node` (at JSON `pointer`) with their pointers and, unless
        `names_only`, their base URIs, `$id` resources and anchors."""
        if not isinstance(node, dict):
            return
        self.pointer_of.setdefault(id(node), "#" + pointer)
        if names_only:
            self._walk_below(node, base, pointer, names_only)
            return
        node_id = node.get("$id" if self.draft >= 6 else "id")
        if "$ref" in node and self.draft <= 7:
            node_id = None  # draft 7 and earlier: $ref makes its siblings, $id too, ignored
        if isinstance(node_id, str):
            url, fragment = urldefrag(join_uri(base, node_id))
            if url:
                base = url
                self.resources.setdefault(url, node)
            if fragment and not fragment.startswith("/"):
                self.anchors[(base, fragment)] = Ref(node, base)
        self.base_of.setdefault(id(node), base)
        for key in ("$anchor", "$dynamicAnchor"):
            if isinstance(node.get(key), str):
                self.anchors[(base, node[key])] = Ref(node, base)
        self._walk_below(node, base, pointer, names_only)

    def _walk_below(self, node: dict, base: str, pointer: str, names_only: bool) -> None:
        for key in _SCHEMA_KEYWORDS:
            if key in node:
                self._walk(node[key], base, f"{pointer}/{key}", names_only)
        for key in _LIST_KEYWORDS + ("items",):
            value = node.get(key)
            if isinstance(value, list):
                for i, sub in enumerate(value):
                    self._walk(sub, base, f"{pointer}/{key}/{i}", names_only)
            elif key == "items":
                self._walk(value, base, f"{pointer}/items", names_only)
        for key in MAP_KEYWORDS + ("dependencies",):
            value = node.get(key)
            if isinstance(value, dict):
                for name, sub in value.items():
                    self._walk(sub, base, f"{pointer}/{key}/{escape_token(name)}", names_only)

    def at(self, node: Any, parent_base: str) -> Ref:
        """A subschema with its own base URI (its `$id` applied)."""
        return Ref(node, self.base_of.get(id(node), parent_base))

    def pointer(self, node: Any) -> str:
        return self.pointer_of.get(id(node), "?")

    def resolve(self, ref: Ref) -> Ref:
        target = ref.node["$ref"]
        if not isinstance(target, str):
            raise GrammarError(f"{self.pointer(ref.node)}: $ref must be a string")
        url, fragment = urldefrag(join_uri(ref.base, target))
        resource = self.resources.get(url)
        if resource is None:
            raise UnsupportedError(f"{self.pointer(ref.node)}: unsupported $ref {target!r}: "
                                   "only references within the schema document are supported")
        if not fragment:
            return Ref(resource, url)
        if fragment.startswith("/"):
            node = resource
            tokens = [unquote(token) for token in fragment[1:].split("/")]
            for token in tokens:
                token = token.replace("~1", "/").replace("~0", "~")
                if isinstance(node, dict) and token in node:
                    node = node[token]
                elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                    node = node[int(token)]
                else:
                    raise GrammarError(f"{self.pointer(ref.node)}: $ref {target!r} points to "
                                       "nothing in the document")
            if id(node) not in self.pointer_of and id(resource) in self.pointer_of:
                # a schema kept under a key no draft defines ("defs"): named for messages
                self._walk(node, url, self.pointer(resource)[1:] + "/" + "/".join(tokens),
                           names_only=True)
            return Ref(node, self.base_of.get(id(node), url))
        anchor = self.anchors.get((url, fragment))
        if anchor is None:
            raise GrammarError(f"{self.pointer(ref.node)}: $ref {target!r}: no anchor "
                               f"{fragment!r}")
        return anchor

    def conjuncts(self, ref: Ref, within: set[int], opened: list[str] | None = None
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
            target = self.conjuncts(self.resolve(self.at(node, ref.base)), within, opened)
            if self.draft <= 7:  # draft 7 and earlier: $ref replaces its siblings
                return target
            found.extend(target)
        branches = node.get("allOf")
        for branch in branches if isinstance(branches, list) else []:
            found.extend(self.conjuncts(self.at(branch, ref.base), within, opened))
        return found

    def value_types(self, ref: Ref, seen: frozenset[int] = frozenset()) -> set[str]:
        """A superset of the types of a schema's values, from its `type`, `enum` and `const`
        and those of the schemas it applies in place (`$ref`, `allOf`, `anyOf`, `oneOf`)."""
        node = ref.node
        if node is False:
            return set()
        if not isinstance(node, dict) or id(node) in seen:
            return set(TYPES)
        seen = seen | {id(node)}
        types = set(declared_types(node, self.pointer(node)))
        if "$ref" in node:
            found = self.value_types(self.resolve(self.at(node, ref.base)), seen)
            if self.draft <= 7:  # draft 7 and earlier: $ref replaces its siblings
                return found
            types &= found
        for branch in node["allOf"] if isinstance(node.get("allOf"), list) else []:
            types &= self.value_types(self.at(branch, ref.base), seen)
        for keyword in ("anyOf", "oneOf"):
            if isinstance(node.get(keyword), list):
                types &= set().union(*(self.value_types(self.at(b, ref.base), seen)
                                       for b in node[keyword]))
        if "const" in node or isinstance(node.get("enum"), list):
            values = node["enum"] if "enum" in node else [node["const"]]
            types &= {json_type(v) for v in values} | \
                ({"integer"} if any(json_type(v) == "number" for v in values) else set())
        return types


def join_uri(base: str, reference: str) -> str:
    """`urljoin`, also for bases like `urn:uuid:...` that urljoin does not resolve against."""
    if reference.startswith("#"):
        return urldefrag(base).url + reference
    return urljoin(base, reference)


def escape_token(name: str) -> str:
    """`name` as a token of a JSON pointer (`~` and `/` escaped)."""
    return name.replace("~", "~0").replace("/", "~1")


def draft_of(root: Any) -> int:
    """The draft a document is written in, by its `$schema` (2020-12 when it names none)."""
    uri = root.get("$schema", "") if isinstance(root, dict) else ""
    for marker, draft in _DRAFTS:
        if marker in str(uri):
            return draft
    return 2020


def _why_unsupported(key: str, draft: int) -> str:
    """Why `key` is left where the rewrites before compiling (`unevaluated`, `dynamic_refs`)
    took those the schema alone decides."""
    if key.startswith("unevaluated") and draft >= 2019:
        return (" (which it sees depends on the instance: a contains evaluates some, or more "
                "than one oneOf, anyOf, if or dependentSchemas of the schema and those it "
                "applies in place, or one below a branch of another, or an anyOf or "
                f"dependentSchemas of more than {MOST_UNEVALUATED_BRANCHES} that evaluate; or a "
                "$ref it applies is outside the document)")
    if key == "$dynamicRef" and draft >= 2020 or key == "$recursiveRef" and draft == 2019:
        anchor = "$dynamicAnchor" if key == "$dynamicRef" else "$recursiveAnchor"
        return (f" (several resources define its {anchor} and the root does not: which one it "
                "reaches depends on the path to it; or it refers to another document)")
    return ""


def check_supported(registry: Registry, options: FrontendOptions) -> None:
    """Refuse the keywords grammarc does not support (a notice with `--lenient`)."""
    found = []
    for pointer, node in all_schemas(registry):
        for key in _UNSUPPORTED:
            if key in node and node[key] is not True:
                found.append(f"{key} at {pointer}{_why_unsupported(key, registry.draft)}")
    if found:
        message = "unsupported JSON Schema keywords: " + ", ".join(found)
        if not options.lenient:
            raise UnsupportedError(message + " (--lenient ignores them, over-approximating)")
        options.notice(message + "; ignored (--lenient)")


def check_spelling(registry: Registry, options: FrontendOptions) -> None:
    """A notice for each key that is not a keyword but a near miss of one (`requird`,
    `maximun`, `itmes`, `Type`: two adjacent letters swapped, or a difflib ratio of 0.85
    or more, ignoring case): ignored like any unknown key, as the specification says, but
    most likely a typo. Keys not that close to a keyword (custom annotations, `x-...`,
    `tsType`) pass in silence."""
    for pointer, node in all_schemas(registry):
        for key in node:
            if key in _KNOWN_KEYS or key.startswith(("x-", "X-")):
                continue  # a keyword, or an extension by convention
            lower = key.lower()
            close = [swapped for i in range(len(lower) - 1) if (swapped := lower[:i] +
                     lower[i + 1] + lower[i] + lower[i + 2:]) in _KNOWN_BY_CASE] or \
                difflib.get_close_matches(lower, _KNOWN_BY_CASE, n=1, cutoff=0.85)
            if close:
                options.notice(f"unknown keyword {key!r} at {pointer}/{escape_token(key)} "
                               f"is ignored; did you mean {_KNOWN_BY_CASE[close[0]]!r}?")


def all_schemas(registry: Registry) -> Iterator[tuple[str, dict]]:
    """Every schema object of the document, each once, with its JSON pointer."""
    stack = [registry.root]
    seen = set()
    while stack:
        node = stack.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        yield registry.pointer(node), node
        stack.extend(subschemas(node))


def subschemas(node: dict) -> Iterator[Any]:
    """What the keywords of the schema object `node` hold in place of schemas (not through
    `$ref`; some may be no schema: a draft-4 dependency's list of names)."""
    for key in _SCHEMA_KEYWORDS:
        if key in node:
            yield node[key]
    for key in _LIST_KEYWORDS + ("items",):
        value = node.get(key)
        yield from value if isinstance(value, list) else [value] if key in node else []
    for key in MAP_KEYWORDS + ("dependencies",):
        if isinstance(node.get(key), dict):
            yield from node[key].values()
