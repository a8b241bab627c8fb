"""vLLM's OpenAI-compatible server for the tests: started on 127.0.0.1 at a free port with
grammarc's logits processor and the hermes tool-call parser, stopped when the block ends.
Imported by the vLLM tests only (it starts vLLM in a subprocess, imports nothing of it)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

START_TIMEOUT = 300  # seconds; a cold start on the 2-core machine takes 60-120
REQUEST_TIMEOUT = 120


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def post(url: str, body: dict) -> tuple[int, dict]:
    """POST a JSON body; the HTTP status and the JSON answer (errors included)."""
    request = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


@contextmanager
def openai_server(model: Path, folder: Path, artifact_dirs: Path) -> Iterator[str]:
    """The server's base URL while it runs (working directory and log in `folder`), serving
    artifacts from `artifact_dirs`."""
    port = free_port()
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", GRAMMARC_ARTIFACT_DIRS=str(artifact_dirs))
    log_path = folder / "server.log"
    # `vllm serve` itself; the `vllm` command of vllm-cpu 0.32 fails on its own package
    # metadata (it asks for the distribution "vllm"), so the server module is started directly
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [sys.executable, "-W", "ignore::DeprecationWarning", "-m",
             "vllm.entrypoints.openai.api_server", "--model", str(model),
             "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
             "--enforce-eager", "--max-model-len", "1024",
             "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
             "--logits-processors", "grammarc.integrations.vllm:GrammarLogitsProcessor"],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=folder)
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + START_TIMEOUT
            while True:
                assert server.poll() is None, log_path.read_text()[-3000:]
                try:
                    with urllib.request.urlopen(f"{base}/health", timeout=5) as response:
                        if response.status == 200:
                            break
                except OSError:
                    pass
                assert time.monotonic() < deadline, f"the server did not start in {START_TIMEOUT} s"
                time.sleep(2)
            yield base
        finally:
            server.terminate()
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
