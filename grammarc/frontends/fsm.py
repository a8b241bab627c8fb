"""State-machine specs (`*.fsm.yaml`, `*.fsm.json`): workflows with named states.

A spec names a start state, the accepting states, and for each state its transitions, each
labelled by a literal text or a regex (grammarc's regex semantics: full match, ASCII classes):

    start: start
    accept: [done]
    states:
      start:
        - {to: awaiting_name, text: "name is: "}
      awaiting_name:
        - {to: done, regex: '[^\\n]+\\n'}
      done: []

The language is every text that spells a path of transitions from the start to an accepting
state. The spec becomes an `automaton.Graph`, so the compiled automaton knows which state a
text has reached (`Grammar.state_name`): while a transition's text is being read, the workflow
is still in the transition's source state. Validation rejects unknown keys and states, states
the start cannot reach, states that cannot reach an accepting state, and labels that match the
empty string; determinisation rejects transitions that make the reached state ambiguous.
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
from typing import Any

import yaml

from ..automaton.expr import Expr, Graph, literal, nullable
from ..errors import GrammarError
from . import MAX_DIGITS, TOO_MANY_DIGITS, FrontendOptions
from .json_text import TooLongNumber, bare_word_offset, json_integer
from .regex import parse_regex

_TOP_KEYS = {"start", "accept", "states", "description"}
_TRANSITION_KEYS = {"to", "text", "regex"}


def parse_fsm(text: str, source_name: str | None = None,
              options: FrontendOptions | None = None) -> Expr:
    """The `Graph` of a state-machine spec in YAML or JSON (JSON when the file name ends in
    `.json`, or when no name is given and the text starts with `{`). No front-end option
    applies to specs."""
    spec = _Spec(text, source_name)
    return spec.graph(spec.load(source_name))


def state_offset(text: str, source_name: str | None, names: tuple[str, ...]) -> int | None:
    """Where the transitions of the first declared state among `names` start in a spec that
    `parse_fsm` read (to locate errors found later, such as an ambiguity)."""
    spec = _Spec(text, source_name)
    states = spec.load(source_name)["states"]
    return next((spec.positions.get(id(transitions)) for name, transitions in states.items()
                 if name in names), None)


class _Spec:
    """One spec being read: its text, and where each mapping and list of it starts."""

    def __init__(self, text: str, source_name: str | None) -> None:
        self.text = text
        self.source_name = source_name
        self.positions: dict[int, int] = {}  # id of a dict or list of the data -> offset

    def error(self, message: str, where: Any = None, offset: int | None = None) -> GrammarError:
        if offset is None and where is not None:
            offset = self.positions.get(id(where))
        return GrammarError(message, source_name=self.source_name, text=self.text, offset=offset)

    # ------------------------------------------------------------------ loading
    def load(self, source_name: str | None) -> Any:
        """JSON when the file name ends in `.json`, or when no name is given and the text
        starts with `{`; YAML otherwise."""
        is_json = source_name.lower().endswith(".json") if source_name else \
            self.text.lstrip()[:1] == "{"
        return self.load_json() if is_json else self.load_yaml()

    def load_json(self) -> Any:
        """JSON (Python's parser), recording where each object and array starts."""
        decoder = json.JSONDecoder(parse_int=json_integer)

        def parse_object(s_and_end, strict, scan_once, object_hook, object_pairs_hook,
                         memo=None):
            pairs, end = json.decoder.JSONObject(s_and_end, strict, scan_once, object_hook,
                                                 list, memo)
            offset = s_and_end[1] - 1
            obj: dict[str, Any] = {}
            for key, value in pairs:
                if key in obj:
                    raise self.error(f"key {key!r} appears twice in one object", offset=offset)
                obj[key] = value
            self.positions[id(obj)] = offset
            return obj, end

        def parse_array(s_and_end, scan_once):
            arr, end = json.decoder.JSONArray(s_and_end, scan_once)
            self.positions[id(arr)] = s_and_end[1] - 1
            return arr, end

        decoder.parse_object = parse_object
        decoder.parse_array = parse_array
        decoder.scan_once = json.scanner.py_make_scanner(decoder)
        try:
            return decoder.decode(self.text)
        except json.JSONDecodeError as exc:
            raise self.error(f"invalid JSON: {exc.msg}", offset=exc.pos) from None
        except TooLongNumber as exc:
            raise self.error(f"invalid JSON: {exc}",
                             offset=bare_word_offset(self.text, exc.args[0])) from None

    def load_yaml(self) -> Any:
        """YAML (PyYAML's safe loader), recording where each mapping and sequence starts."""
        loader = _YamlLoader(self.text)
        loader.positions = self.positions
        try:
            return loader.get_single_data()
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            raise self.error(f"invalid YAML: {exc.problem or exc.context}",
                             offset=mark.index if mark else None) from None
        except yaml.YAMLError as exc:
            raise self.error(f"invalid YAML: {exc}") from None
        finally:
            loader.dispose()

    # ---------------------------------------------------------------- checking
    def graph(self, data: Any) -> Graph:
        if not isinstance(data, dict):
            raise self.error("a state-machine spec is a mapping with keys start, accept and "
                             "states", offset=0)
        self.check_keys(data, _TOP_KEYS, "the spec", required=("start", "accept", "states"))
        states = data["states"]
        if not isinstance(states, dict) or not states:
            raise self.error("'states' must map each state name to its list of transitions",
                             data)
        names = [self.name(name, data["states"]) for name in states]
        index = {name: i for i, name in enumerate(names)}
        start = self.known(data["start"], index, "the start state", data)
        accept = data["accept"]
        if not isinstance(accept, list) or not accept:
            raise self.error("'accept' must be a non-empty list of state names", data)
        accepting = sorted({self.known(name, index, "accepting state", accept)
                            for name in accept})
        edges = []
        for src, transitions in zip(names, states.values()):
            if transitions is None:
                transitions = []
            if not isinstance(transitions, list):
                raise self.error(f"the transitions of state {src!r} must be a list", states)
            for transition in transitions:
                dst, label = self.transition(src, transition, index)
                edges.append((index[src], dst, label))
        self.check_paths(names, start, accepting, edges, states)
        return Graph(tuple(names), start, tuple(accepting), tuple(edges))

    def check_keys(self, mapping: dict, allowed: set[str], what: str,
                   required: tuple[str, ...]) -> None:
        for key in mapping:
            if key not in allowed:
                raise self.error(f"unknown key {key!r} in {what} (allowed: "
                                 f"{', '.join(sorted(allowed))})", mapping)
        for key in required:
            if key not in mapping:
                raise self.error(f"{what} has no {key!r}", mapping)

    def name(self, name: Any, where: Any) -> str:
        if not isinstance(name, str) or not name:
            raise self.error(f"state names must be non-empty strings, not {name!r}", where)
        return name

    def known(self, name: Any, index: dict[str, int], what: str, where: Any) -> int:
        if not isinstance(name, str) or name not in index:
            raise self.error(f"{what} {name!r} is not a declared state (declared: "
                             f"{', '.join(index)})", where)
        return index[name]

    def transition(self, src: str, transition: Any, index: dict[str, int]) -> tuple[int, Expr]:
        where = f"a transition of state {src!r}"
        if not isinstance(transition, dict):
            raise self.error(f"{where} must be a mapping with 'to' and 'text' or 'regex'",
                             transition)
        self.check_keys(transition, _TRANSITION_KEYS, where, required=("to",))
        dst = self.known(transition["to"], index, f"{where} goes to", transition)
        kinds = [k for k in ("text", "regex") if k in transition]
        if len(kinds) != 1:
            raise self.error(f"{where} needs exactly one of 'text' and 'regex'", transition)
        value = transition[kinds[0]]
        if not isinstance(value, str):
            raise self.error(f"{where}: {kinds[0]} must be a string (quote it), not {value!r}",
                             transition)
        if any(0xD800 <= ord(c) <= 0xDFFF for c in value):
            raise self.error(f"{where}: {kinds[0]} holds a lone surrogate (not a character)",
                             transition)
        if kinds[0] == "text":
            label = literal(value)
        else:
            try:
                label = parse_regex(value, after=None)
            except GrammarError as exc:
                raise self.error(f"{where}: {exc.message} (in regex {value!r})",
                                 transition) from None
        if nullable(label):
            raise self.error(f"{where} to {transition['to']!r} can read the empty text; "
                             "every transition must read at least one character", transition)
        return dst, label

    def check_paths(self, names: list[str], start: int, accepting: list[int],
                    edges: list[tuple[int, int, Expr]], states: dict) -> None:
        """Every state is reachable from the start and can reach an accepting state."""
        forward = _closure([start], [(s, d) for s, d, _ in edges])
        backward = _closure(accepting, [(d, s) for s, d, _ in edges])
        for i, name in enumerate(names):
            where = states[name] if isinstance(states[name], list) else states
            if i not in forward:
                raise self.error(f"state {name!r} is unreachable: no transitions lead to it "
                                 f"from the start state {names[start]!r}", where)
            if i not in backward:
                raise self.error(f"state {name!r} has no path to an accepting state "
                                 f"({', '.join(names[a] for a in accepting)})", where)


class _YamlLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """PyYAML's safe loader (on libyaml when PyYAML has it: the pure-Python scanner takes
    quadratic time on nested flow collections) that records where each mapping and sequence
    starts (in `positions`, by the id of the constructed object) and rejects duplicate keys."""

    positions: dict[int, int]

    def construct_located_map(self, node: yaml.MappingNode):
        data: dict[Any, Any] = {}
        self.positions[id(data)] = node.start_mark.index
        yield data
        data.update(self.construct_mapping(node))  # fails on unhashable keys
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice in one mapping", key_node.start_mark)
            seen.add(key)

    def construct_checked_int(self, node: yaml.ScalarNode) -> int:
        """An integer of at most MAX_DIGITS digits (Python converts no longer one)."""
        if len(node.value) > MAX_DIGITS:
            raise yaml.constructor.ConstructorError(None, None, TOO_MANY_DIGITS,
                                                    node.start_mark)
        return self.construct_yaml_int(node)

    def construct_located_seq(self, node: yaml.SequenceNode):
        data: list[Any] = []
        self.positions[id(data)] = node.start_mark.index
        yield data
        data.extend(self.construct_sequence(node))


_YamlLoader.add_constructor("tag:yaml.org,2002:map", _YamlLoader.construct_located_map)
_YamlLoader.add_constructor("tag:yaml.org,2002:seq", _YamlLoader.construct_located_seq)
_YamlLoader.add_constructor("tag:yaml.org,2002:int", _YamlLoader.construct_checked_int)


def _closure(seeds: list[int], arcs: list[tuple[int, int]]) -> set[int]:
    seen = set(seeds)
    stack = list(seeds)
    while stack:
        node = stack.pop()
        for src, dst in arcs:
            if src == node and dst not in seen:
                seen.add(dst)
                stack.append(dst)
    return seen
