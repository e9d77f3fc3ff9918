"""The step contract: a refusal people can read, a log, and the ritual every building
step follows with the records of the ledger (`state.records`).

The ritual, one code path for every step: take the upstream's record, which Dagster's
hand-off (`defs.hand_off`, an IO manager) reads with `upstream_record` or `load_build`
and passes in, so no step opens another's file by path; reuse this asset's record when
running again would reproduce it (`current_record`), else build and keep what was built
(`record_step`), which first checks that the upstream did not move underneath the step
(another writer). The step returns its record (`StepResult.record`), which is what the
hand-off gives the next step. A
`StepFailure`'s message is written for people: the Dagster layer shows it as the step's
failure description, the CLI as its one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.memory import Memory
from brain_pipeline.state.records import AssetRecord, FileStamp, read_record, write_record


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


def current_record(
    memory: Memory, asset: str, code_version: str, inputs: Mapping[str, Any]
) -> AssetRecord | None:
    """`asset`'s record when running its step again would reproduce it (same code, same
    inputs, its outputs intact or fetched from the blobs); None: the step builds."""
    record = read_record(memory, asset)
    if record is not None and record.is_current_for(memory, code_version, inputs):
        return record
    return None


def record_step(
    memory: Memory,
    asset: str,
    *,
    data_version: str,
    code_version: str,
    inputs: Mapping[str, Any],
    facts: Mapping[str, Any],
    run_id: str,
    outputs: Mapping[str, str | FileStamp] | None = None,
    upstream: AssetRecord | None = None,
) -> AssetRecord:
    """Keep what a step built as `asset`'s current record, its last act. `upstream`, the
    record the step read, must still be current (else nothing is kept: another run wrote
    it meanwhile). `outputs` name build-directory files by their sha256 (stamped here) or
    any file by a stamp already taken."""
    if upstream is not None:
        recheck_input(memory, upstream.asset, upstream.data_version)
    build_dir = memory.layout.build_dir
    record = AssetRecord(
        asset=asset,
        data_version=data_version,
        code_version=code_version,
        inputs=dict(inputs),
        outputs={
            name: stamp if isinstance(stamp, FileStamp) else FileStamp.of(build_dir / name, stamp)
            for name, stamp in (outputs or {}).items()
        },
        facts=dict(facts),
        run_id=run_id,
    )
    write_record(memory, record)
    return record


@dataclass(frozen=True)
class Build:
    """The build a check or publish step reads, as the hand-off gives it to the step: the
    store's and the vectors' current records (None: never built) and the layout their
    files are in, on this disk. The files were fetched from the blobs when missing (a
    step process in an empty folder, a fresh worker), so the step reads exactly the bytes
    the records name; a file that is here but not the recorded one is left alone (the
    step's own check then says so)."""

    store: AssetRecord | None
    vectors: AssetRecord | None
    layout: StateLayout


def load_build(where: Memory | StateLayout) -> Build:
    """The current build (`Build`), its recorded files brought onto this disk."""
    store, vectors = (read_record(where, asset) for asset in ("knowledge_store", "embeddings"))
    for record in (store, vectors):
        if record is not None:
            record.outputs_intact(where)
    return Build(store, vectors, where.layout if isinstance(where, Memory) else where)
