"""One record per asset: which inputs produced which outputs, kept in the ledger.

A record is a row of the ledger's `step_results` (step = the asset; inputs = the digest
of its inputs; code = the digest of the code and settings that shape it) and the pointer
`record:<asset>` names the asset's current row. Outputs are named by their sha256, which
is also their blob's name: an output put in the blobs when it was recorded can be
fetched by a worker whose build directory lacks it (a fresh worker, a step process in
an empty folder), so no step depends on another step's file being on this disk.
A record's `FileStamp`s are the local proof that a file is unchanged without hashing it:
an output absent here is fetched and stamped anew (the row keeps this disk's stamps); one
present but not matching its stamp is not trusted, and the step builds again.

Build directories written before the ledger kept one JSON file per asset in
`state/assets/`; `_import_old_records` reads them in once, then removes them.
"""

from __future__ import annotations

import errno
import json
import shutil
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypeVar

from brain_pipeline.state.code_digest import code_digest
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.ledger import Ledger, StepKey, StepResult
from brain_pipeline.state.memory import Memory, memory_for_layout
from brain_pipeline.utils.digest import file_sha256, value_digest
from brain_pipeline.utils.file_signature import FileSignature

POINTER = "record:"
_imported: weakref.WeakSet[Ledger] = weakref.WeakSet()
"""The ledgers this process read the old records into (once each)."""


def digest_of(value: Any) -> str:
    """A stable short digest of any JSON-able value: data and code versions."""
    return value_digest(value)[:16]


@dataclass(frozen=True)
class FileStamp:
    """A file's sha256 and the signature that proves it unchanged since (utils.file_signature)."""

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
        return cls(sha256, signature.size, signature.mtime_ns, signature.inode, signature.ctime_ns)

    def still_matches(self, path: Path) -> bool:
        if self.ctime_ns is None:
            return False
        signature = FileSignature(self.size, self.mtime_ns, self.inode, self.ctime_ns)
        return signature.still_matches(path)


@dataclass(frozen=True)
class AssetRecord:
    """What one asset last wrote: its data version, the inputs it read, the files it made.

    An output named by a relative path is a file of the build directory (and a blob); one
    named by an absolute path (a live publication's files) is only stamped."""

    asset: str
    data_version: str
    code_version: str
    inputs: dict[str, Any]
    outputs: dict[str, FileStamp] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    run_id: str | None = None
    written_at: str = ""

    def outputs_intact(self, where: Memory | StateLayout) -> bool:
        """Every output is still the one this record describes (its stamp matches); a
        build-directory output missing here is fetched from the blobs and stamped anew."""
        memory = _memory(where)
        fetched = {}
        for name, stamp in self.outputs.items():
            path = memory.layout.build_dir / name
            if stamp.still_matches(path):
                continue
            if path.exists() or Path(name).is_absolute() or not memory.blobs.has(stamp.sha256):
                return False
            memory.blobs.get_file(stamp.sha256, path)
            fetched[name] = FileStamp.of(path, stamp.sha256)
        if fetched:  # the stamps of this disk prove it unchanged next time
            restamped = replace(self, outputs={**self.outputs, **fetched})
            _write(memory, restamped, put=False, current=False)
        return True

    def is_current_for(
        self, where: Memory | StateLayout, code_version: str, inputs: Mapping[str, Any]
    ) -> bool:
        """True when re-running with these inputs would reproduce exactly these outputs."""
        return (
            self.code_version == code_version
            and self.inputs == dict(inputs)
            and self.outputs_intact(where)
        )


def _memory(where: Memory | StateLayout) -> Memory:
    memory = where if isinstance(where, Memory) else memory_for_layout(where)
    if memory.ledger not in _imported:
        _import_old_records(memory)
        _imported.add(memory.ledger)
    return memory


def read_record(where: Memory | StateLayout, asset: str) -> AssetRecord | None:
    """The asset's current record, or None when it never ran (here or on any worker
    sharing the ledger)."""
    ledger = _memory(where).ledger
    current = ledger.pointer(POINTER + asset)
    inputs, _, code = (current or "").partition(" ")
    row = ledger.step_result(StepKey(asset, inputs, code, "")) if current else None
    if row is None:
        return None
    body = dict(row.facts)
    stamps = body.get("stamps") or {}
    return AssetRecord(
        asset=asset,
        data_version=str(body["data_version"]),
        code_version=code,
        inputs=dict(body.get("inputs") or {}),
        outputs={
            name: FileStamp(sha, *stamps.get(name, (-1, -1, -1, None)))
            for name, sha in row.outputs.items()
        },
        facts=dict(body.get("facts") or {}),
        run_id=row.run_id,
        written_at=row.recorded_at,
    )


def write_record(where: Memory | StateLayout, record: AssetRecord) -> None:
    """Keep `record` as the asset's current record; its build-directory outputs go to the
    blobs first, so the row never names a blob that is not there."""
    _write(_memory(where), record, put=True)


def _write(memory: Memory, record: AssetRecord, *, put: bool, current: bool = True) -> None:
    """Keep `record`'s row (`Ledger.record_step`); `current`: then point the asset at it
    (a restamp leaves the pointer alone, so it never moves it back from a newer record).
    A writer stopped between the two leaves a row nothing points at: harmless."""
    if put:
        for name, stamp in record.outputs.items():
            if not Path(name).is_absolute() and not memory.blobs.has(stamp.sha256):
                memory.blobs.put_file(memory.layout.build_dir / name)
    key = StepKey(record.asset, value_digest(record.inputs), record.code_version, "")
    body = {
        "data_version": record.data_version,
        "inputs": record.inputs,
        "facts": record.facts,
        "stamps": {
            name: [s.size, s.mtime_ns, s.inode, s.ctime_ns] for name, s in record.outputs.items()
        },
    }
    outputs = {name: stamp.sha256 for name, stamp in record.outputs.items()}
    row = memory.ledger.record_step(StepResult(key, outputs, body, record.run_id))
    if current:
        memory.ledger.execute(
            "INSERT INTO pointers VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
            "value = excluded.value, updated_at = excluded.updated_at",
            (POINTER + record.asset, f"{key.inputs} {key.code}", row.recorded_at),
        )


F = TypeVar("F")


def facts_of(kind: type[F], record: AssetRecord) -> F:
    """`record`'s facts as `kind`, a frozen dataclass whose every field has a default:
    facts it does not declare are left out, the ones a record lacks take the default."""
    names = {f.name for f in fields(kind)}  # type: ignore[arg-type]
    return kind(**{name: value for name, value in record.facts.items() if name in names})


@dataclass(frozen=True)
class ChunksFacts:
    """What `knowledge_chunks`' record tells the checks after it: the files that need a
    look (`corpus_problems`) and the areas that yielded nothing, with what they hold
    (`no_empty_area`, evaluated in the store's step)."""

    occurrences: int = 0
    problems: list[list[str]] = field(default_factory=list)
    """The first `steps.ingest.PROBLEM_ROWS_KEPT` of them: file, reason, detail."""
    problem_count: int = 0
    empty_areas: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StoreFacts:
    """What `knowledge_store`'s record tells the steps after it (the publish gate, the
    health checks, the up-to-date record, clean-up): the store's sha256, the corpus
    snapshot it was assembled from, and its counts. The ledger keeps them as the record's
    plain facts, under the names records written before the ledger used too."""

    store_sha256: str = ""
    corpus_digest: str | None = None
    """The corpus identity: the digest of the snapshot the store was assembled from."""
    chunks: int = 0
    chunks_per_area: dict[str, int] = field(default_factory=dict)
    utf16_units: int = 0
    store_bytes: int = 0
    duplicates_collapsed: int = 0
    preview: list[list[str]] = field(default_factory=list)


def store_facts(where: Memory | StateLayout) -> StoreFacts | None:
    """The current store's facts, or None when no store was assembled yet."""
    record = read_record(where, "knowledge_store")
    return None if record is None else facts_of(StoreFacts, record)


STEP_CODE: dict[str, tuple[str, ...]] = {
    "knowledge_chunks": ("brain_pipeline.corpus.chunk_cache",),
    "knowledge_store": ("brain_pipeline.corpus.assembly",),
    "published_local": ("brain_pipeline.publishing.local",),
}
"""The modules whose code shapes an asset's outputs (`code_version`)."""

_OLD_CODE_VERSIONS = {"store-1": "knowledge_store", "publish-1": "published_local",
                      "chunks-3": "knowledge_chunks"}
"""The last hand-bumped versions of pre-ledger records (the chunks' followed by a digest
of their settings): current by their own rule when imported."""


def code_version(asset: str) -> str:
    """The digest of the code that shapes `asset` (`state.code_digest`), never bumped by hand."""
    return "code-" + code_digest(*STEP_CODE[asset])[:16]


def _imported_code(old: str) -> str:
    """A pre-ledger record's code version as today's: `chunks-3-<settings>` becomes
    `code-<digest>-<settings>`, as `steps.ingest.chunks_code_version` writes it."""
    head, dash, settings = old.rpartition("-") if old.startswith("chunks-") else (old, "", "")
    asset = _OLD_CODE_VERSIONS.get(head)
    return code_version(asset) + dash + settings if asset else old


def _import_old_records(memory: Memory) -> None:
    """Read `state/assets/*.json` (written before the ledger) in once, then remove them.
    A record the ledger already holds (another worker ran since) is not overwritten."""
    folder = memory.layout.assets_dir
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("*.json")):
        try:
            raw = json.loads(path.read_bytes())
            record = AssetRecord(
                asset=str(raw["asset"]),
                data_version=str(raw["data_version"]),
                code_version=_imported_code(str(raw["code_version"])),
                inputs=dict(raw.get("inputs") or {}),
                outputs={k: FileStamp(**v) for k, v in dict(raw.get("outputs") or {}).items()},
                facts=dict(raw.get("facts") or {}),
                run_id=raw.get("run_id"),
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue  # unreadable: as before, the step simply runs again
        if memory.ledger.pointer(POINTER + record.asset) is not None:
            continue
        _write(memory, replace(record, outputs=_restamped(memory, record.outputs)), put=False)
    shutil.rmtree(folder, ignore_errors=True)


def _restamped(memory: Memory, outputs: Mapping[str, FileStamp]) -> dict[str, FileStamp]:
    """The imported stamps, checked once by their bytes where the stat differs (a build
    directory copied or unpacked elsewhere); each build-directory output becomes a blob."""
    out = dict(outputs)
    for name, stamp in outputs.items():
        path = memory.layout.build_dir / name
        if not stamp.still_matches(path) and path.is_file():
            if file_sha256(path) != stamp.sha256:
                continue  # another file now: the record no longer matches, as before
            out[name] = FileStamp.of(path, stamp.sha256)
        if not Path(name).is_absolute() and path.is_file():
            memory.blobs.put_file(path)
    return out
