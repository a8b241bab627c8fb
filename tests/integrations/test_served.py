"""The server's artifact cache (grammarc/integrations/served.py, no vLLM needed): an artifact
is warmed once when it is loaded, so that no step of the engine pays a first mask or, for a
grammar with calls, a first per-state or per-pair table."""

from __future__ import annotations

from pathlib import Path

import grammarc
from grammarc.integrations.served import ArtifactCache
from grammarc.runtime import Grammar
from grammarc.runtime.calls import CallGrammar

ROOT = Path(__file__).resolve().parents[2]


def test_artifacts_are_warmed_once_when_loaded(tmp_path, smollm2, monkeypatch):
    warmed: list[Grammar] = []
    real_warm = Grammar.warm

    def spy(self, limit=None):  # CallGrammar.warm calls it first too
        warmed.append(self)
        return real_warm(self, limit)

    monkeypatch.setattr(Grammar, "warm", spy)
    grammarc.compile("[0-9]+", smollm2, "regex").save(tmp_path / "digits.safetensors")
    grammarc.compile(ROOT / "grammars" / "json-value.gbnf", smollm2).save(
        tmp_path / "json.safetensors")
    cache, dirs = ArtifactCache(), (str(tmp_path.resolve()),)
    flat = cache.get("digits.safetensors", None, dirs)
    calls = cache.get("json.safetensors", None, dirs)
    assert isinstance(calls, CallGrammar) and not isinstance(flat, CallGrammar)
    assert warmed == [flat, calls]
    assert cache.get("digits.safetensors", None, dirs) is flat  # cached: not warmed again
    assert cache.get("json.safetensors", None, dirs) is calls
    assert warmed == [flat, calls]
    # what a step would compute first is there: every table state's table, every pair's
    infos, tops = dict(calls._infos), dict(calls._tops)
    assert len(infos) == calls.num_states - 1 and tops
    calls.warm()
    assert calls._infos == infos and calls._tops == tops
