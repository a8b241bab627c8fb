"""`$dynamicRef` where the schema alone decides its target (`frontends/json_schema/
dynamic_refs.py`), judged by jsonschema on every small instance; where the path to the
reference decides, it is refused."""

from __future__ import annotations

from itertools import product

import pytest
from helpers import dfa_of, judged_like_jsonschema

from grammarc.errors import GrammarError, UnsupportedError

D2020 = "https://json-schema.org/draft/2020-12/schema"
D2019 = "https://json-schema.org/draft/2019-09/schema"
VALUES = [1, "s", None, [], [1], ["s", 2], {"a": 1}]

# a list of any items by default, whose items the root narrows to integers
GENERIC_LIST = {"$id": "list", "type": "array", "items": {"$dynamicRef": "#item"},
                "$defs": {"default": {"$dynamicAnchor": "item"}}}


@pytest.mark.parametrize("schema", [
    # the root defines the name: its anchor, wherever the reference is met
    {"$schema": D2020, "$id": "https://example.com/root", "$ref": "list",
     "$defs": {"list": GENERIC_LIST, "item": {"$dynamicAnchor": "item", "type": "integer"}}},
    # one resource defines it: its anchor (the list of any items)
    {"$schema": D2020, "$id": "https://example.com/root", "$ref": "list",
     "$defs": {"list": GENERIC_LIST}},
    # a name of an $anchor, not a $dynamicAnchor: a $ref
    {"$schema": D2020, "$id": "https://example.com/root", "$ref": "list",
     "$defs": {"list": {**GENERIC_LIST, "$defs": {"default": {"$anchor": "item",
                                                             "type": "string"}}},
               "item": {"$dynamicAnchor": "item", "type": "integer"}}},
    # a JSON pointer, beside a $ref of the same schema object
    {"$schema": D2020, "type": "array", "$ref": "#/$defs/short",
     "items": {"$dynamicRef": "#/$defs/small"},
     "$defs": {"short": {"maxItems": 1}, "small": {"type": "integer", "maximum": 1}}},
    # recursion: a tree whose nodes the root defines
    {"$schema": D2020, "$dynamicAnchor": "node", "type": ["array", "integer"],
     "items": {"$dynamicRef": "#node"}},
    # draft 2019-09: $recursiveRef to the root of a resource with a $recursiveAnchor
    {"$schema": D2019, "$recursiveAnchor": True, "type": ["array", "integer"],
     "items": {"$recursiveRef": "#"}},
    {"$schema": D2019, "$id": "https://example.com/root", "$ref": "list",
     "$defs": {"list": {"$id": "list", "type": "array", "items": {"$recursiveRef": "#"}}}},
])
def test_a_decided_target_agrees_with_jsonschema(schema):
    instances = [list(items) for size in range(3) for items in product(VALUES, repeat=size)]
    instances += VALUES + [[[1, [2]]], [[["s"]]]]
    assert 0 < judged_like_jsonschema(schema, instances) < len(instances)


def test_a_target_the_path_decides_is_refused():
    """Two resources define the name and the root does not: the list reached through `ints`
    takes integers, through `strs` strings."""
    schema = {"$schema": D2020, "$id": "https://example.com/root",
              "properties": {"a": {"$ref": "ints"}, "b": {"$ref": "strs"}},
              "$defs": {"list": GENERIC_LIST,
                        "ints": {"$id": "ints", "$ref": "list",
                                 "$defs": {"i": {"$dynamicAnchor": "item", "type": "integer"}}},
                        "strs": {"$id": "strs", "$ref": "list",
                                 "$defs": {"s": {"$dynamicAnchor": "item", "type": "string"}}}}}
    with pytest.raises(UnsupportedError, match=r"\$dynamicRef at #/\$defs/list/items"):
        dfa_of(schema)
    # draft 2019-09 searches outwards only while each resource has a $recursiveAnchor: the
    # root's applies through `middle` but not through `plain`
    schema = {"$schema": D2019, "$id": "https://example.com/root", "$recursiveAnchor": True,
              "type": ["array", "integer"], "items": {"$ref": "middle"},
              "$defs": {"middle": {"$id": "middle", "$ref": "plain"},
                        "plain": {"$id": "plain", "$recursiveAnchor": True,
                                  "items": {"$recursiveRef": "#"}}}}
    with pytest.raises(UnsupportedError, match=r"\$recursiveRef at #/\$defs/plain/items"):
        dfa_of(schema)


def test_a_name_no_anchor_defines_is_an_error_at_its_pointer():
    with pytest.raises(GrammarError, match=r"#/items: \$dynamicRef '#x': no \$dynamicAnchor"):
        dfa_of({"$schema": D2020, "items": {"$dynamicRef": "#x"}})


def _trees(depth: int) -> list:
    """Objects of the keys data, children and daat (a misspelling), children lists of up to
    two such trees, `depth` levels deep."""
    below = _trees(depth - 1) if depth else []
    out = []
    for keys in ([], ["data"], ["daat"], ["data", "children"], ["children"]):
        for kids in ([[]] + [[tree] for tree in below[:6]] + [below[:2]] if "children" in keys
                     else [None]):
            out.append({key: kids if key == "children" else 1 for key in keys})
    return out


@pytest.mark.parametrize("draft", [D2019, D2020])
def test_a_strict_tree_agrees_with_jsonschema(draft):
    """The extension pattern: a tree whose children are, through the root's anchor, trees of
    the strict root (no property but the tree's), at every depth."""
    anchor, reference = ({"$recursiveAnchor": True}, {"$recursiveRef": "#"}) if draft == D2019 \
        else ({"$dynamicAnchor": "node"}, {"$dynamicRef": "#node"})
    schema = {"$schema": draft, "$id": "https://example.com/strict", **anchor, "$ref": "tree",
              "unevaluatedProperties": False,
              "$defs": {"tree": {"$id": "tree", **anchor, "type": "object",
                                 "properties": {"data": True, "children": {
                                     "type": "array", "items": reference}}}}}
    instances = _trees(2) + [{"children": [{"children": [{"daat": 1}]}]},
                             {"children": [{"children": [{"data": 1}]}]}]
    assert 0 < judged_like_jsonschema(schema, instances) < len(instances)
