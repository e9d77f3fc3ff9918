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
from brain_pipeline.state.memory import Memory
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


def _folder(where: Memory | StateLayout) -> str:
    return str((where.layout if isinstance(where, Memory) else where).build_dir)


def upstream_record(where: Memory | StateLayout, asset: str, needed_by: str) -> AssetRecord:
    """The upstream asset's record in the ledger, or a failure saying what to run; its
    outputs missing from this build directory are fetched from the blobs first."""
    record = read_record(where, asset)
    if record is None:
        raise StepFailure(
            f"{needed_by} needs {asset}, which has not been materialised in the build "
            f"directory {_folder(where)}; materialise it first (e.g. --select '{asset}+')"
        )
    record.outputs_intact(where)  # a file another worker made is fetched from the blobs
    return record


def recheck_input(where: Memory | StateLayout, asset: str, expected: str) -> None:
    """Fail when an input's record moved while this step worked (another writer)."""
    now = read_record(where, asset)
    if now is None or now.data_version != expected:
        raise StepFailure(
            f"{asset} changed in {_folder(where)} while this step was reading it "
            "(another run wrote it); nothing was recorded, run again"
        )


BUILD_ASSETS = ("knowledge_store", "embeddings")
"""The assets whose files the checks and publish steps read from the build directory."""


def fetch_build(where: Memory | StateLayout) -> None:
    """Bring the build's recorded files (the store, the vectors) onto this disk when they
    are missing, from the blobs: a step process in an empty folder, or a fresh worker,
    evaluates and publishes exactly the bytes the records name. A file that is here but
    not the recorded one is left alone (the step's own check then says so)."""
    for asset in BUILD_ASSETS:
        record = read_record(where, asset)
        if record is not None:
            record.outputs_intact(where)
