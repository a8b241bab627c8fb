"""Hostile inputs, issue 15: a short run of `benchmarks/fuzz.py` (random mutations of every
kind of source and of artifacts), so the script stays working and a finding fails CI. The
figures of long runs are in benchmarks/README.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_short_fuzz_run_finds_nothing():
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fuzz.py"), "--cases",
                             "120", "--seed", "11", "--jobs", "2", "--timeout", "60"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    total = next(line for line in result.stdout.splitlines() if line.startswith("TOTAL"))
    cases, compiled, errors = (int(x) for x in total.split()[1:4])
    assert cases == 120 and compiled > 0 and errors > 0, total
