"""State-machine specs: the seed's workflows compiled for SmolLM2, walked as event sequences
(text level and token level) with the workflow state named at every step; spec validation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from grammar_oracles import greedy_tokens

import grammarc
from grammarc.automaton import build_dfa
from grammarc.compiler import build_automaton
from grammarc.errors import GrammarError
from grammarc.frontends import FrontendOptions
from grammarc.frontends.fsm import parse_fsm

GRAMMARS = Path(__file__).resolve().parents[2] / "grammars"
FORM = GRAMMARS / "form-filling.fsm.yaml"
TICKET = GRAMMARS / "support-ticket.fsm.yaml"

# event sequences: (text of the event, workflow state once it has been read)
FORM_PATHS = [
    [("name is: ", "awaiting_name"), ("Ada Lovelace\n", "awaiting_age"),
     ("age is: ", "awaiting_age"), ("36\n", "awaiting_confirmation"),
     ("Confirm? yes/no: ", "awaiting_confirmation"), ("yes", "complete")],
    [("name is: ", "awaiting_name"), ("Grace\n", "awaiting_age"), ("85\n", "awaiting_confirmation"),
     ("no", "complete")],
]
TICKET_PATHS = [
    [("Question: I was charged twice.\n", "classify"), ("Category: billing\n", "suggest"),
     ("Solution: The duplicate charge is refunded.\n", "rate"),
     ("Rating: satisfied", "end_satisfied")],
    [("Question: The app crashes on start.\n", "classify"), ("Category: technical\n", "suggest"),
     ("Solution: Reinstall it.\n", "rate"),
     ("Rating: unsatisfied\nEscalated to a human agent.", "escalate_to_human")],
]
# skipped, reordered or invented steps
FORM_REJECTED = ["name is: Ada\nyes", "name is: Ada\nConfirm? yes/no: yes", "age is: 36\nyes",
                 "name is: Ada\n36\n", "name is: \n36\nyes", "name is: Ada\nage is: x\nyes",
                 "name is: Ada\n36\nmaybe", "name is: Ada\n36\nyes\n"]
TICKET_REJECTED = ["Question: x\nSolution: y\nRating: satisfied",
                   "Question: x\nCategory: sales\nSolution: y\nRating: satisfied",
                   "Category: billing\nSolution: y\nRating: satisfied",
                   "Question: x\nCategory: account\nSolution: y\n",
                   "Question: x\nCategory: account\nSolution: y\nRating: unsatisfied"]


@pytest.fixture(scope="module")
def workflows(smollm2) -> dict[str, grammarc.Grammar]:
    return {path.name: grammarc.compile(path, smollm2) for path in (FORM, TICKET)}


@pytest.mark.parametrize("name,paths,rejected", [
    (FORM.name, FORM_PATHS, FORM_REJECTED), (TICKET.name, TICKET_PATHS, TICKET_REJECTED),
])
def test_event_sequences(workflows, name, paths, rejected):
    grammar = workflows[name]
    assert grammar.state_name(grammar.initial_state) == "start"
    for path in paths:
        state = grammar.initial_state
        for event, reached in path:
            for i, byte in enumerate(event.encode()):
                before = grammar.state_name(state)
                state = grammar.walk_bytes(bytes([byte]), state)
                assert state != 0, (path, event)
                if i < len(event.encode()) - 1:  # inside an event: still in the same step
                    assert grammar.state_name(state) == before
            assert grammar.state_name(state) == reached, (path, event)
        assert grammar.is_accepting(state)
        assert grammar.matches("".join(event for event, _ in path))
    for text in rejected:
        assert not grammar.matches(text), text


@pytest.mark.parametrize("name,paths", [(FORM.name, FORM_PATHS), (TICKET.name, TICKET_PATHS)])
def test_token_steps_name_the_workflow_state(workflows, smollm2, name, paths):
    """Token by token through the table: no step dies, the state name is the one of the text
    read so far, and EOS is allowed exactly at the end of a finished workflow."""
    grammar = workflows[name]
    eos = smollm2.eos_token_ids[0]
    for path in paths:
        text = "".join(event for event, _ in path)
        state, read = grammar.initial_state, b""
        for token in greedy_tokens(smollm2, text):
            assert grammar.next_state(state, eos) == 0
            state = grammar.next_state(state, token)
            read += smollm2.token_bytes[token]
            assert state == grammar.walk_bytes(read) != 0
        assert grammar.state_name(state) == path[-1][1]
        assert grammar.next_state(state, eos) == state


def test_names_survive_save_and_load(workflows, tmp_path):
    grammar = workflows[FORM.name]
    names = [grammar.state_name(s) for s in range(grammar.num_states)]
    assert names[0] is None and set(names[1:]) == {"start", "awaiting_name", "awaiting_age",
                                                   "awaiting_confirmation", "complete"}
    for layout, suffix in (("factored", ".safetensors"), ("csr", ".npz"), ("dense", ".npz")):
        path = tmp_path / f"form-{layout}{suffix}"
        grammar.save(path, layout=layout)
        loaded = grammarc.load(path)
        assert [loaded.state_name(s) for s in range(loaded.num_states)] == names
        assert np.array_equal(loaded.to_dense(), grammar.to_dense())


def test_other_grammars_have_no_state_names(smollm2):
    grammar = grammarc.compile("yes|no", smollm2, kind="regex")
    assert grammar.state_name(1) is None and "state_names" not in grammar.metadata


def test_json_spec_is_the_same_machine(tmp_path):
    spec = yaml.safe_load(TICKET.read_text())
    as_json = tmp_path / "ticket.fsm.json"
    as_json.write_text(json.dumps(spec, indent="\t"))
    from_yaml = build_dfa(parse_fsm(TICKET.read_text(), TICKET.name))
    from_json = build_dfa(parse_fsm(as_json.read_text(), as_json.name))
    assert np.array_equal(from_yaml.trans, from_json.trans)
    assert np.array_equal(from_yaml.labels, from_json.labels)
    assert from_yaml.label_names == from_json.label_names


SPEC = """start: a
accept: [c]
states:
  a:
    - {to: b, text: "x"}
  b:
    - {to: c, regex: "[0-9]+;"}
  c: []
"""


@pytest.mark.parametrize("old,new,message", [
    ('{to: b, text: "x"}', '{to: d, text: "x"}', "f.fsm.yaml:5:7: a transition of state 'a' "
                                                 "goes to 'd' is not a declared state"),
    ("start: a", "start: z", "f.fsm.yaml:1:1: the start state 'z' is not a declared state"),
    ("accept: [c]", "accept: [c, q]", "f.fsm.yaml:2:9: accepting state 'q' is not a declared"),
    ("  c: []", "  c: []\n  d:\n    - {to: c, text: y}", "f.fsm.yaml:10:5: state 'd' is "
                                                        "unreachable: no transitions lead to it"),
    ("  c: []", "  c: []\n  d: []\n", "f.fsm.yaml:9:6: state 'd' is unreachable"),
    ("- {to: c, regex: \"[0-9]+;\"}", "- {to: b, regex: \"[0-9]+;\"}",
     "f.fsm.yaml:5:5: state 'a' has no path to an accepting state (c)"),
    ('regex: "[0-9]+;"', 'regex: "[0-9]*"', "f.fsm.yaml:7:7: a transition of state 'b' to 'c' "
                                           "can read the empty text"),
    ('regex: "[0-9]+;"', 'regex: "(?<=x)1"', "f.fsm.yaml:7:7: a transition of state 'b': "
                                            "unsupported regex construct: lookbehind"),
    ('text: "x"', "text: yes", "f.fsm.yaml:5:7: a transition of state 'a': text must be a "
                               "string (quote it), not True"),
    ('text: "x"', 'text: "x", regex: "y"', "needs exactly one of 'text' and 'regex'"),
    ('{to: b, text: "x"}', '{text: "x"}', "f.fsm.yaml:5:7: a transition of state 'a' has no "
                                          "'to'"),
    ('{to: b, text: "x"}', '{to: b, text: "x", event: go}', "unknown key 'event' in a "
                                                            "transition of state 'a'"),
    ("accept: [c]", "accept: [c]\nstart: b", "f.fsm.yaml:3:1: invalid YAML: key 'start' "
                                              "appears twice"),
    ("  a:\n", "  a\n", "f.fsm.yaml:5:10: invalid YAML: mapping values are not allowed"),
    ("states:", "stats:", "f.fsm.yaml:1:1: unknown key 'stats' in the spec"),
])
def test_spec_errors_have_positions(old, new, message):
    assert old in SPEC
    with pytest.raises(GrammarError) as info:
        parse_fsm(SPEC.replace(old, new, 1), "f.fsm.yaml")
    assert message in str(info.value)


@pytest.mark.parametrize("text,message", [
    ('{"start": "a", "accept": ["c"], "states": {"a": [{"to": "c", "text": "x"}], "c": [],\n'
     ' "b": []}}', "f.fsm.json:2:7: state 'b' is unreachable"),
    ('{"start": "a", "start": "a"}', "f.fsm.json:1:1: key 'start' appears twice"),
    ('{"start": "a",\n "accept": ["c"] "states": {}}', "f.fsm.json:2:18: invalid JSON: "
                                                       "Expecting ',' delimiter"),
    ('["a"]', "f.fsm.json:1:1: a state-machine spec is a mapping"),
    ('{"start": "a", "accept": ["b"], "states": {"a": [{"to": "b", "text": "\\ud800"}], '
     '"b": []}}', "f.fsm.json:1:50: a transition of state 'a': text holds a lone surrogate"),
])
def test_json_spec_errors_have_positions(text, message):
    with pytest.raises(GrammarError) as info:
        parse_fsm(text, "f.fsm.json")
    assert message in str(info.value)


def test_ambiguous_transitions_are_rejected():
    ambiguous = SPEC.replace('- {to: b, text: "x"}', '- {to: b, text: "x"}\n    - {to: c, '
                             'regex: "x[0-9]"}')
    with pytest.raises(GrammarError) as info:
        build_automaton("fsm", ambiguous, "f.fsm.yaml", FrontendOptions())
    # located at the transitions of the first declared of the two states
    assert str(info.value) == ("f.fsm.yaml:5:5: ambiguous state machine: after 'x' the state could "
                               "be 'a' or 'b'; no text of a transition may be read, or begin a "
                               "longer text, by another path out of the same state (end free "
                               "text with a delimiter)")
    # a transition whose text can go on (more digits after 'x0') never knows it is done
    endless = SPEC.replace('"[0-9]+;"', '"[0-9]+"')
    with pytest.raises(GrammarError, match="^f.fsm.yaml:7:5: .* after 'x0' the state could be "
                                           "'b' or 'c'"):
        build_automaton("fsm", endless, "f.fsm.yaml", FrontendOptions())
    # overlapping transitions to the same state, ending together, are not ambiguous
    overlap = SPEC.replace('- {to: b, text: "x"}', '- {to: b, text: "x"}\n    - {to: b, '
                           'regex: "x|y"}')
    assert build_automaton("fsm", overlap, "f.fsm.yaml", FrontendOptions()).accepts(b"y1;")
