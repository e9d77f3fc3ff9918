"""The evaluation record: the last outcomes of the retrieval evaluation, keyed by inputs.

An evaluation is a pure function of the store bytes, the embeddings bytes, the fixture
bytes, the thresholds, the evaluation/retrieval code and the effective query provider
and model. `eval_key` digests exactly those; when the digest is unchanged the previous
outcome is reused (the check says so in its metadata) instead of re-running the
fixture. The record is also the publish gate's source of truth: `latest` is the newest
outcome and its inputs, so a gate can compare them with the artifacts it is about to
publish.

File: `layout.eval_record` (JSON, written atomically), holding up to `_KEEP` outcomes
(so alternating `eval --fixture` runs do not evict the pipeline's) and a small memo of
file digests keyed by (size, mtime_ns, inode, ctime_ns), so an unchanged 800 MB
embeddings.bin is not re-hashed on every check.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from brain_pipeline.publishing.atomic import atomic_write_bytes
from brain_pipeline.retrieval.bm25 import RETRIEVAL_VERSION
from brain_pipeline.state.layout import StateLayout

EVALUATION_VERSION = 1
"""Bump when evaluation semantics change (metrics, judging, report): old records expire."""

CODE_VERSION = f"eval{EVALUATION_VERSION}-retrieval{RETRIEVAL_VERSION}"
_KEEP = 8
_FORMAT = 1

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class EvalInputs:
    """Everything an evaluation's outcome depends on (digests, never secrets)."""

    store_sha256: str
    embeddings_sha256: str | None
    fixture_sha256: str
    thresholds: Mapping[str, Any]
    provider: str
    model: str | None
    query_embedder: str
    """How queries get vectors, e.g. "gemini" or "none: no Gemini API key" (no key text)."""
    code_version: str = CODE_VERSION

    def key(self) -> str:
        """The record key: sha256 over the canonical JSON of the inputs."""
        canonical = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass
class EvalRecord:
    """One stored outcome."""

    key: str
    inputs: dict[str, Any]
    passed: bool
    failures: list[str]
    stale_ids: list[str]
    figures: dict[str, float]
    markdown: str
    report: dict[str, Any] | None
    when: str
    """ISO-8601 UTC time the evaluation ran."""
    extra: dict[str, Any] = field(default_factory=dict)


def _read(layout: StateLayout) -> dict[str, Any]:
    try:
        data = json.loads(layout.eval_record.read_bytes())
    except (FileNotFoundError, ValueError):
        return {"format": _FORMAT, "records": [], "digests": {}}
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        return {"format": _FORMAT, "records": [], "digests": {}}
    data.setdefault("records", [])
    data.setdefault("digests", {})
    return data


def _write(layout: StateLayout, data: dict[str, Any]) -> None:
    payload = json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True).encode("utf-8")
    atomic_write_bytes(layout.eval_record, payload)


def _as_record(raw: Any) -> EvalRecord | None:
    try:
        return EvalRecord(**raw)
    except TypeError:
        return None


def lookup(layout: StateLayout, key: str) -> EvalRecord | None:
    """The stored outcome for `key`, or None (never an outcome of other inputs)."""
    for raw in _read(layout)["records"]:
        if isinstance(raw, dict) and raw.get("key") == key:
            return _as_record(raw)
    return None


def latest(layout: StateLayout) -> EvalRecord | None:
    """The most recently saved outcome (what the publish gate consults), or None."""
    records = _read(layout)["records"]
    return _as_record(records[0]) if records and isinstance(records[0], dict) else None


def save(
    layout: StateLayout,
    inputs: EvalInputs,
    outcome: Any,
    *,
    now: Clock = utc_now,
) -> EvalRecord:
    """Store `outcome` (an EvaluationOutcome-like object) under `inputs.key()`, newest first."""
    report = getattr(outcome, "report", None)
    record = EvalRecord(
        key=inputs.key(),
        inputs=asdict(inputs),
        passed=not outcome.failures,
        failures=list(outcome.failures),
        stale_ids=list(outcome.stale_ids),
        figures=dict(outcome.flat_metrics),
        markdown=outcome.markdown,
        report=report.to_dict() if report is not None and hasattr(report, "to_dict") else None,
        when=now().isoformat(timespec="seconds"),
    )
    data = _read(layout)
    kept = [r for r in data["records"] if isinstance(r, dict) and r.get("key") != record.key]
    data["records"] = [asdict(record), *kept][:_KEEP]
    _write(layout, data)
    return record


def file_sha256(layout: StateLayout | None, path: Path) -> str | None:
    """sha256 of `path` (None when absent), memoised in the record by its stat signature."""
    try:
        st = Path(path).stat()
    except FileNotFoundError:
        return None
    signature = [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]
    name = str(Path(path).resolve())
    data = _read(layout) if layout is not None else {"digests": {}}
    known = data["digests"].get(name)
    if isinstance(known, dict) and known.get("stat") == signature:
        return str(known["sha256"])
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while block := handle.read(1 << 24):
            digest.update(block)
    sha = digest.hexdigest()
    if layout is None:
        return sha
    data["digests"] = {name: {"stat": signature, "sha256": sha}} | {
        k: v for k, v in data["digests"].items() if k != name
    }
    data["digests"] = dict(list(data["digests"].items())[:_KEEP])
    with contextlib.suppress(OSError):  # read-only: hash again next time
        _write(layout, data)
    return sha
