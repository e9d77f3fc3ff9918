"""A run in a child process, on a real SQLite instance (DAGSTER_HOME given).

Usage: python -m brain_pipeline_tests.locks.pool_child HOME tagged|untagged

Materialise an asset in the `gemini_embedding` pool (with or without the pid/host tags
our runner adds), print `claimed <run id>` once the step holds the pool's slot, then wait
for a line on stdin (or for kill -9).
"""

import sys
from pathlib import Path

import dagster as dg

from brain_pipeline.lib.instance import (
    GEMINI_POOL,
    ensure_instance_home,
    ensure_pool_limit,
    in_process_run_tags,
    open_instance,
)


@dg.asset(pool=GEMINI_POOL)
def paid_embedding(context: dg.AssetExecutionContext) -> int:
    print(f"claimed {context.run_id}", flush=True)
    sys.stdin.readline()
    return 1


def main() -> int:
    home, mode = Path(sys.argv[1]), sys.argv[2]
    ensure_instance_home(home)
    instance = open_instance(home.parent / "build")
    ensure_pool_limit(instance)  # what `materialize` does: the pool gets its one slot
    tags = in_process_run_tags(None) if mode == "tagged" else {}
    result = dg.materialize([paid_embedding], instance=instance, tags=tags)
    print("success" if result.success else "failure", flush=True)
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main())
