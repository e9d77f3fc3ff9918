"""A child process that holds a lock until told to let go (or until it is killed).

Usage: python -m brain_pipeline_tests.locks.holder_child LOCK_PATH RUN_ID
Prints `held <pid>` once the lock is held; a line on stdin releases it (prints
`released`). Imports only the Dagster-free lock module, so it starts fast.
"""

from __future__ import annotations

import sys

from brain_pipeline.state.lock import acquire_lock, make_holder


def main() -> int:
    path, run_id = sys.argv[1], sys.argv[2]
    with acquire_lock(path, wait_seconds=0, holder=make_holder("holder_child", run_id)):
        print(f"held {__import__('os').getpid()}", flush=True)
        sys.stdin.readline()
    print("released", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
