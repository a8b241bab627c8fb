"""What a server does with the artifacts its clients name, without vLLM (so it is tested where
vLLM is not installed): which files it serves, the cache of loaded artifacts, whether a
request's artifact can meet vLLM's own constraint on it, and one request's row of the bitmask. `grammarc.integrations.vllm` builds its processor on these.

A client names an artifact by path; the server loads it only from the directories its
operator allows: the processor's `artifact_dirs` setting, else the environment variable
GRAMMARC_ARTIFACT_DIRS (directories separated by `os.pathsep`), else the server's working
directory. A relative path is looked up in each of them in turn; symbolic links are followed
first, so a link out of them is refused. Every refusal of a path (outside them, missing, not
readable, not an artifact) is the same message, so clients learn nothing about the server's
files; the reason goes to the server's log.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import GrammarcError
from ..runtime import Grammar, Matcher, check_tokenizer, load

EXTRA_ARGS_KEY = "grammarc"
ARTIFACT_DIRS_ENV = "GRAMMARC_ARTIFACT_DIRS"
log = logging.getLogger("grammarc.vllm")


def artifact_path(params: Any) -> str | None:
    """The artifact a request (vLLM's `SamplingParams`) names in `extra_args`, or None for an
    unconstrained request; a `ValueError` when the option is malformed."""
    spec = (params.extra_args or {}).get(EXTRA_ARGS_KEY)
    if spec is None:
        return None
    if isinstance(spec, dict) and set(spec) == {"artifact"}:
        spec = spec["artifact"]
    if not isinstance(spec, str) or not spec:
        raise ValueError(f'grammarc: extra_args["{EXTRA_ARGS_KEY}"] must be an artifact path or '
                         f'{{"artifact": path}}, not {spec!r}')
    return spec


def served_dirs(setting: Sequence[str] | None = None) -> tuple[str, ...]:
    """The directories artifacts are served from: `setting`, else GRAMMARC_ARTIFACT_DIRS,
    else the working directory; each with its links resolved."""
    if setting is None:
        setting = [d for d in os.environ.get(ARTIFACT_DIRS_ENV, "").split(os.pathsep) if d]
    return tuple(os.path.realpath(d) for d in setting or [os.getcwd()])


def not_served(path: str) -> ValueError:
    """The one answer to a client whose artifact path is refused, whatever the reason."""
    return ValueError(f"grammarc: artifact {path!r} is not served here (the server's "
                      f"{ARTIFACT_DIRS_ENV} lists the directories it serves)")


def served_file(path: str, dirs: Sequence[str]) -> str:
    """The file `path` names in the served directories `dirs` (resolved, as `served_dirs`
    gives them), or `not_served`."""
    candidates = [path] if os.path.isabs(path) else [os.path.join(d, path) for d in dirs]
    for candidate in candidates:
        real = os.path.realpath(candidate)
        if any(os.path.commonpath([real, d]) == d for d in dirs) and os.path.isfile(real):
            return real
    log.warning("grammarc: refused artifact %r: not a file in the served directories %s",
                 path, os.pathsep.join(dirs))
    raise not_served(path)


class ArtifactCache:
    """Artifacts loaded once per process (their masks computed ahead: `Grammar.warm`),
    checked against vocabularies once per pair, and loaded again when their file changes
    (size or modification time). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._grammars: dict[str, tuple[tuple[int, int], Grammar]] = {}
        self._checked: set[tuple[str, tuple[int, int], str]] = set()

    def get(self, path: str, tokenizer: str | None = None,
            dirs: Sequence[str] | None = None) -> Grammar:
        """The grammar of the artifact a client names as `path`, served from `dirs` (default
        `served_dirs()`); with `tokenizer` (a model folder or anything
        `grammarc.load_tokenizer` reads), checked to be compiled for its vocabulary. Every
        failure is a `ValueError` with a one-line message: `not_served` for the path, or the
        vocabulary mismatch of a served artifact."""
        resolved = served_file(path, served_dirs() if dirs is None else dirs)
        try:
            info = os.stat(resolved)
        except OSError:
            raise not_served(path) from None
        stamp = (info.st_size, info.st_mtime_ns)
        with self._lock:
            cached = self._grammars.get(resolved)
            if cached is None or cached[0] != stamp:
                try:
                    grammar = load(resolved)
                    grammar.warm()  # every row's mask now, not in a step of the engine
                    cached = self._grammars[resolved] = (stamp, grammar)
                except (GrammarcError, OSError) as exc:
                    log.warning("grammarc: refused artifact %r: %s", path, exc)
                    raise not_served(path) from None
            grammar = cached[1]
            if tokenizer is not None and (resolved, stamp, tokenizer) not in self._checked:
                try:
                    check_tokenizer(grammar, tokenizer, artifact_name=path)
                except GrammarcError as exc:
                    raise ValueError(f"grammarc: {exc}") from None
                self._checked.add((resolved, stamp, tokenizer))
        return grammar


def check_stop_ids(params: Any, grammar: Grammar) -> None:
    """A `ValueError` for a stop token id of the request outside the grammar's vocabulary
    (the processor sets those ids' bits in the bitmask)."""
    for token in getattr(params, "stop_token_ids", None) or ():
        if not isinstance(token, int) or not 0 <= token < grammar.vocab_size:
            raise ValueError(f"grammarc: stop token id {token!r} is outside the vocabulary "
                             f"(0 to {grammar.vocab_size - 1})")


_JSON_STARTS = frozenset(b'{["-0123456789tfn')


def constraint_conflict(grammar: Grammar, structured: Any) -> str | None:
    """Why no text of `grammar` meets vLLM's own structured output of the same request
    (`SamplingParams.structured_outputs`: what `tool_choice` "required" or named and
    `response_format` become), or None when some may. Decided on the bytes every text of the
    grammar opens with (`Grammar.forced`) against those every text of vLLM's constraint may
    open with: a JSON value's first character, or the strings a structural tag begins with
    (its tags' `begin`); other constraints are not judged."""
    if structured is None:
        return None
    head = grammar.forced(grammar.initial_state).text
    if getattr(structured, "json", None) is not None or getattr(structured, "json_object", None):
        first = head.lstrip(b" \t\n\r")[:1]
        if first and first[0] not in _JSON_STARTS:
            return (f"writes {_shown(head)} first, and vLLM also constrains this request to "
                    "JSON (tool_choice \"required\" or a named tool with the JSON tool-call "
                    "format, or response_format): send tool_choice \"auto\" without "
                    "response_format (the artifact decides which calls are made)")
        return None
    tag = getattr(structured, "structural_tag", None)
    if not tag:
        return None
    try:
        openings = _openings(json.loads(tag).get("format"))
    except (ValueError, AttributeError):
        return None
    if not openings or any(o.startswith(head) or head.startswith(o) for o in openings):
        return None
    return (f"writes {_shown(head)} first, and vLLM's own constraint on this request "
            f"(tool_choice \"required\" or a named tool, or a structural tag) opens with "
            f"{' or '.join(_shown(o) for o in openings)}: send tool_choice \"auto\" (the "
            "artifact decides which calls are made) or an artifact of the named tool")


def _openings(node: Any) -> list[bytes] | None:
    """The strings one of which every text of a structural-tag format begins with; None
    where that is not known (free text, JSON, token formats, anything that may be empty)."""
    if not isinstance(node, dict):
        return None
    kind = node.get("type")
    if kind == "const_string" and isinstance(node.get("value"), str):
        return [node["value"].encode()]
    if kind == "tag" and isinstance(node.get("begin"), str):
        return [node["begin"].encode()]
    if kind == "sequence" and node.get("elements"):
        return _openings(node["elements"][0])
    if kind == "tags_with_separator" and node.get("at_least_one") or kind == "or":
        parts = [_openings(n) for n in node.get("tags" if kind != "or" else "elements") or []]
        if parts and all(p is not None for p in parts):
            return [o for p in parts for o in p]
    return None


def _shown(text: bytes) -> str:
    """Bytes as a short JSON string for a message."""
    shown = json.dumps(text.decode("utf-8", "replace"), ensure_ascii=False)
    return shown if len(shown) <= 48 else shown[:44] + '..."'


@dataclass
class ServedRequest:
    """A constrained request in the batch: its matcher (None when its artifact failed in the
    engine), the engine's live list of its output tokens, the grammar's EOS ids the engine
    does not stop on (kept at -inf), and the ids it does stop on (all a request that went off
    may pick)."""

    matcher: Matcher | None
    output: list[int]
    unstoppable: tuple[int, ...]
    stops: tuple[int, ...]

    def catch_up(self) -> None:
        """Accept the tokens generated since the last step."""
        matcher = self.matcher
        if matcher is not None and not matcher.accept(self.output[matcher.num_tokens:]):
            self.matcher = None
            log.error("grammarc: a generated token is outside the grammar (another logits "
                       "processor's doing?); the request may only end now")

    def fill(self, words: np.ndarray, vocab_size: int) -> None:
        """This request's allowed tokens, packed, into one row of the bitmask buffer, over
        the `vocab_size` columns of the logits."""
        bits = words.view(np.uint32)
        if self.matcher is None:  # end now; with no stop token to end on, left unconstrained
            stops = [t for t in self.stops if 0 <= t < vocab_size]  # ids the client gave
            bits[:] = 0 if stops else np.uint32(0xFFFFFFFF)
            for token in stops:
                bits[token // 32] |= np.uint32(1 << (token % 32))
            return
        self.matcher.fill_bitmask(words)
        for token in self.unstoppable:
            bits[token // 32] &= ~np.uint32(1 << (token % 32))
        if self.stops and not bits.any():  # the budget fits no text of the grammar: end now
            for token in self.stops:
                if 0 <= token < vocab_size:
                    bits[token // 32] |= np.uint32(1 << (token % 32))


ARTIFACTS = ArtifactCache()

__all__ = ["ARTIFACTS", "ARTIFACT_DIRS_ENV", "ArtifactCache", "EXTRA_ARGS_KEY", "ServedRequest",
           "artifact_path", "check_stop_ids", "constraint_conflict", "not_served", "served_dirs",
           "served_file"]
