"""`brain-pipeline gc` exits 75 naming the holder when another run holds the build dir.

The README's exit-code table promises 75 for `materialize` and `gc`; the materialize
half is pinned in locks/test_materialize_concurrency.py. The test takes the lock itself,
so the command is known to find it held: no sleeps.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from brain_pipeline.state.lock import acquire_lock, make_holder
from brain_pipeline_tests.state.test_lock import ledger_lock_path

REPO = Path(__file__).resolve().parents[2]


def test_gc_refuses_a_held_build_directory_with_75_and_the_holder(tmp_path: Path) -> None:
    build = tmp_path / "build"
    build.mkdir()
    config = tmp_path / "corpus_config.yaml"
    config.write_text(f"build_dir: {build}\nembedding: {{provider: none}}\n", encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "BRAIN_CONFIG": str(config),
        "BRAIN_LOCK_WAIT_SECONDS": "0",
    }
    holder = make_holder("brain-pipeline materialize", "run-5c1d")
    with acquire_lock(ledger_lock_path(build), wait_seconds=0, holder=holder):
        before = sorted(str(p) for p in build.rglob("*"))
        done = subprocess.run(
            [sys.executable, "-m", "brain_pipeline.cli", "gc"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        )
        after = sorted(str(p) for p in build.rglob("*"))
    assert done.returncode == 75, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert str(build) in lines[0]
    assert f"pid {os.getpid()}" in lines[0] and "run-5c1d" in lines[0]
    assert socket.gethostname() in lines[0]
    # gc created and removed nothing while refused (but the ledger it asked for the lease)
    def others(paths: list[str]) -> list[str]:
        return [p for p in paths if "ledger.sqlite" not in p]

    assert others(after) == others(before)
