"""The step contract: a refusal people can read, a log, and the build records a step
reads its inputs from.

Every step records what it made in the build directory (`state.records`); a step reads
its upstream's record, and before recording its own checks that the upstream did not
move underneath it (another writer). A `StepFailure`'s message is written for people:
the Dagster layer shows it as the step's failure description, the CLI as its one line.
"""

from __future__ import annotations

from typing import Any, Protocol

from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.records import AssetRecord, read_record


class StepFailure(RuntimeError):
    """A step refused or could not finish; the message says why and what to do.

    `metadata` (plain values) is what the failed step still has to show, e.g. how many
    texts an interrupted embedding build saved.
    """

    def __init__(self, message: str, metadata: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.metadata = dict(metadata or {})


class StepLog(Protocol):
    """Where a step reports progress (Dagster's context.log satisfies it)."""

    def info(self, msg: str) -> None: ...

    def warning(self, msg: str) -> None: ...


def upstream_record(layout: StateLayout, asset: str, needed_by: str) -> AssetRecord:
    """The upstream asset's record in the build directory, or a failure saying what to run."""
    record = read_record(layout, asset)
    if record is None:
        raise StepFailure(
            f"{needed_by} needs {asset}, which has not been materialised in the build "
            f"directory {layout.build_dir}; materialise it first (e.g. --select '{asset}+')"
        )
    return record


def recheck_input(layout: StateLayout, asset: str, expected: str) -> None:
    """Fail when an input's record moved while this step worked (another writer)."""
    now = read_record(layout, asset)
    if now is None or now.data_version != expected:
        raise StepFailure(
            f"{asset} changed in {layout.build_dir} while this step was reading it "
            "(another run wrote it); nothing was recorded, run again"
        )
