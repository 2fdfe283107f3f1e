"""One BLAS thread for the process (services/retrieval/blas.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PROBE = """
import json, threadpoolctl
from services.retrieval import blas
before = [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
blas.one_blas_thread()
blas.one_blas_thread()
after = [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
print(json.dumps({"before": before, "after": after}))
"""


def test_every_loaded_blas_library_runs_one_thread_after_the_call() -> None:
    """In a fresh process (numpy not imported before the call), every BLAS library numpy loads runs
    one thread once ``one_blas_thread`` has run, and calling it again changes nothing."""
    env = {"OPENBLAS_NUM_THREADS": "2", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["before"] == []  # numpy is imported by the call itself
    assert seen["after"]
    assert set(seen["after"]) == {1}
