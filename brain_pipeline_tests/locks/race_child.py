"""Start pairs of runs at the same instant on fresh instances; report how they ended.

Usage: python -m brain_pipeline_tests.locks.race_child ROOT REPETITIONS [--unlocked]

Dagster is imported once, then each repetition forks two children that wait on one pipe
and, released together, open a fresh instance under ROOT/home<N> and run a trivial asset.
Forking after the import makes a start cost milliseconds instead of seconds, so the two
first `DagsterInstance.get()` calls really overlap. `--unlocked` skips our instance lock
(to see the crash it prevents). Prints one JSON object: {"runs": [...], "errors": [...]}.
"""

import json
import os
import sys
import traceback
from pathlib import Path

import dagster as dg

from brain_pipeline.lib.instance import ensure_instance_home, in_process_run_tags, open_instance


@dg.asset
def trivial() -> int:
    return 1


def _child(home: Path, go: int, unlocked: bool) -> int:
    os.read(go, 1)
    try:
        os.environ["DAGSTER_HOME"] = str(home)
        if unlocked:
            instance = dg.DagsterInstance.get()
        else:
            instance = open_instance(home.parent / f"{home.name}-build")
        result = dg.materialize([trivial], instance=instance, tags=in_process_run_tags(None))
        return 0 if result.success else 1
    except Exception:  # noqa: BLE001 - the parent reports what went wrong
        (home / f"error-{os.getpid()}.txt").write_text(traceback.format_exc())
        return 2


def main() -> int:
    root, repetitions = Path(sys.argv[1]), int(sys.argv[2])
    unlocked = "--unlocked" in sys.argv
    codes: list[int] = []
    errors: list[str] = []
    for attempt in range(repetitions):
        home = root / f"home{attempt}"
        if unlocked:
            home.mkdir(parents=True, exist_ok=True)
            (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        else:
            ensure_instance_home(home)  # the yaml only; storage is made by the children
        go_read, go_write = os.pipe()
        pids = []
        for _ in range(2):
            pid = os.fork()
            if pid == 0:
                os.close(go_write)
                os._exit(_child(home, go_read, unlocked))
            pids.append(pid)
        os.close(go_read)
        os.write(go_write, b"xx")  # release both at once
        os.close(go_write)
        for pid in pids:
            codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        for path in home.glob("error-*.txt"):
            lines = [ln for ln in path.read_text().splitlines() if "Error" in ln]
            errors.append(lines[-1] if lines else path.read_text()[-300:])
    print(json.dumps({"runs": codes, "errors": errors}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
