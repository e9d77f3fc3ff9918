"""One record per asset in the build directory: which inputs produced which outputs.

The record is the file-based hand-off between assets: a step reads its upstream's
record (not a pickle in the Dagster instance) to learn which snapshot, store or vector
file it should consume, and writes its own once its outputs are in place. Because a
record names the digests of the inputs it was made from, a step whose inputs are
unchanged can prove its outputs are still current and skip the work (a no-change run
costs a few stats), and a step can re-check before writing that nothing it read has
moved under it.
"""

from __future__ import annotations

import errno
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from brain_pipeline.state.layout import StateLayout
from brain_pipeline.utils.atomic import atomic_write_bytes
from brain_pipeline.utils.damage import healed
from brain_pipeline.utils.digest import value_digest
from brain_pipeline.utils.file_signature import FileSignature

RECORD_FORMAT = 1


def digest_of(value: Any) -> str:
    """A stable short digest of any JSON-able value: data and code versions."""
    return value_digest(value)[:16]


@dataclass(frozen=True)
class FileStamp:
    """A file's sha256 and the signature that proves it unchanged since (utils.file_signature).

    `ctime_ns` is None in records written before the one rule included it: such a stamp
    never matches, so the file is hashed once more and stamped anew.
    """

    sha256: str
    size: int
    mtime_ns: int
    inode: int
    ctime_ns: int | None = None

    @classmethod
    def of(cls, path: Path, sha256: str) -> FileStamp:
        signature = FileSignature.of(path)
        if signature is None:
            raise FileNotFoundError(errno.ENOENT, "no such file to stamp", str(path))
        return cls(
            sha256, signature.size, signature.mtime_ns, signature.inode, signature.ctime_ns
        )

    def still_matches(self, path: Path) -> bool:
        if self.ctime_ns is None:
            return False
        signature = FileSignature(self.size, self.mtime_ns, self.inode, self.ctime_ns)
        return signature.still_matches(path)


@dataclass(frozen=True)
class AssetRecord:
    """What one asset last wrote: its data version, the inputs it read, the files it made."""

    asset: str
    data_version: str
    code_version: str
    inputs: dict[str, Any]
    outputs: dict[str, FileStamp] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    run_id: str | None = None
    written_at: str = ""
    format: int = RECORD_FORMAT

    def to_json(self) -> bytes:
        return (json.dumps(asdict(self), sort_keys=True, indent=1) + "\n").encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes) -> AssetRecord:
        raw = json.loads(data)
        outputs = {k: FileStamp(**v) for k, v in dict(raw.get("outputs") or {}).items()}
        return cls(
            asset=str(raw["asset"]),
            data_version=str(raw["data_version"]),
            code_version=str(raw["code_version"]),
            inputs=dict(raw.get("inputs") or {}),
            outputs=outputs,
            facts=dict(raw.get("facts") or {}),
            run_id=raw.get("run_id"),
            written_at=str(raw.get("written_at", "")),
            format=int(raw.get("format", RECORD_FORMAT)),
        )

    def outputs_intact(self, layout: StateLayout) -> bool:
        """Every output file is still the one this record describes."""
        return all(
            stamp.still_matches(layout.build_dir / name) for name, stamp in self.outputs.items()
        )

    def is_current_for(
        self, layout: StateLayout, code_version: str, inputs: Mapping[str, Any]
    ) -> bool:
        """True when re-running with these inputs would reproduce exactly these outputs."""
        return (
            self.code_version == code_version
            and self.inputs == dict(inputs)
            and self.outputs_intact(layout)
        )


def record_path(layout: StateLayout, asset: str) -> Path:
    return layout.assets_dir / f"{asset}.json"


def read_record(layout: StateLayout, asset: str) -> AssetRecord | None:
    """The asset's record, or None when it never ran here (or the record is unreadable)."""
    path = record_path(layout, asset)

    def load() -> AssetRecord | None:
        try:
            return AssetRecord.from_json(path.read_bytes())
        except FileNotFoundError:
            return None

    # A torn or foreign file is treated as "never ran": the step redoes it.
    return healed(path, load, what=f"record of {asset}", consequence="the step runs again")


def write_record(layout: StateLayout, record: AssetRecord) -> None:
    """Write the record atomically, stamped with the time."""
    stamped = AssetRecord(
        **{
            **asdict(record),
            "outputs": record.outputs,
            "written_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
    )
    atomic_write_bytes(record_path(layout, record.asset), stamped.to_json())


def stamp_outputs(layout: StateLayout, files: Mapping[str, str]) -> dict[str, FileStamp]:
    """FileStamps for build-dir-relative names -> their known sha256."""
    return {name: FileStamp.of(layout.build_dir / name, sha) for name, sha in files.items()}

