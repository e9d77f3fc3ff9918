"""The evaluation record: the last outcomes of the retrieval evaluation, keyed by inputs.

An evaluation is a pure function of the store bytes, the embeddings bytes, the fixture
bytes, the thresholds, the evaluation/retrieval code and the effective query provider
and model. `EvalInputs.key()` digests exactly those; when the digest is unchanged the
previous outcome is reused (and says so) instead of re-running the fixture. The record
is also what a publish gate consults: `lookup(layout, key)` finds the outcome for exactly
the inputs it is about to publish, `latest(layout)` the newest one. The key covers what
was *measured*; the verdict also depends on the rule it was judged by (every evaluation
setting, the baselines compared with), which the outcome keeps as `rule` and the gate
matches too (`verdict_rule.lookup_judged`): a reused report is judged again under a new
rule, a verdict is never reused under one.

File: `layout.eval_record` (JSON, written atomically). It holds up to `_KEEP` outcomes,
newest first, so alternating `eval --fixture` runs do not evict the pipeline's (each
outcome a plain dict with at least `key` and `when`), and a small memo of file digests
keyed by (size, mtime_ns, inode, ctime_ns), so an unchanged 800 MB embeddings.bin is
not re-hashed on every check.

An outcome holds `report` (runner.EvaluationReport.to_dict), `figures`, `markdown`,
`inputs`, `run_id`, `verdict` (verdict.EvaluationVerdict.to_dict, the whole judgement the
publish gate reads) and `rule` (verdict_rule.VerdictRule.to_dict, what it was judged
by). Outcomes written before verdicts (or rules) were stored still lend their report
for reuse; the next check judges it and rewrites the outcome with a verdict and its
rule, and until then a publish gate finds no verdict.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from brain_pipeline.retrieval.bm25 import RETRIEVAL_VERSION
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.records import read_record
from brain_pipeline.utils.atomic import atomic_write_bytes
from brain_pipeline.utils.damage import healed_json
from brain_pipeline.utils.digest import file_sha256, value_digest
from brain_pipeline.utils.file_signature import FileSignature

EVALUATION_VERSION = 2
"""Bump when evaluation semantics change (metrics, judging, report): old records expire.

2: per-query results carry each relevant id's rank and the miss flag (the regression
comparison reads them)."""

CODE_VERSION = f"eval{EVALUATION_VERSION}-retrieval{RETRIEVAL_VERSION}"
_KEEP = 8
_WRITERS = ("embeddings", "knowledge_store")
"""Assets whose records stamp the files an evaluation hashes."""
_FORMAT = 2

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
    """How queries get vectors, e.g. "gemini; gemini key set: True" (never the key)."""
    code_version: str = CODE_VERSION

    def key(self) -> str:
        """The record key: sha256 over the canonical JSON of the inputs."""
        return value_digest(asdict(self))


def _read(layout: StateLayout) -> dict[str, Any]:
    empty: dict[str, Any] = {"format": _FORMAT, "records": [], "digests": {}}
    data = healed_json(
        layout.eval_record,
        empty,
        what="evaluation record",
        consequence="the evaluation runs again (nothing is reused, nothing published on it)",
    )
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        return empty  # an older layout (one bare record) is simply not reused
    if not isinstance(data.get("records"), list) or not isinstance(data.get("digests"), dict):
        return empty
    return data


def _write(layout: StateLayout, data: dict[str, Any]) -> None:
    payload = json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True, default=str)
    atomic_write_bytes(layout.eval_record, payload.encode("utf-8"))


def lookup(layout: StateLayout, key: str) -> dict[str, Any] | None:
    """The stored outcome for `key` (a dict with `key` and `when`), or None."""
    for record in _read(layout)["records"]:
        if isinstance(record, dict) and record.get("key") == key:
            return record
    return None


def latest(layout: StateLayout) -> dict[str, Any] | None:
    """The most recently saved outcome, or None."""
    records = _read(layout)["records"]
    return records[0] if records and isinstance(records[0], dict) else None


def save(
    layout: StateLayout,
    key: str,
    record: Mapping[str, Any],
    *,
    now: Clock = utc_now,
) -> dict[str, Any]:
    """Store `record` under `key`, newest first; returns it with `key` and `when` added.

    `when` (ISO-8601 UTC, from the injected clock) is kept if the record already has one.
    """
    stored = {**record, "key": key}
    stored.setdefault("when", now().isoformat(timespec="seconds"))
    data = _read(layout)
    kept = [r for r in data["records"] if isinstance(r, dict) and r.get("key") != key]
    data["records"] = [stored, *kept][:_KEEP]
    _write(layout, data)
    return stored


def known_sha256(layout: StateLayout | None, path: Path) -> str | None:
    """sha256 of `path` (None when absent) without reading it when its hash is known.

    Known means: the asset record that wrote the file stamped it and the stamp still
    matches (the embeddings step does, so the first evaluation after it does not read
    the vectors again), or this record memoised it under the same stat signature.
    """
    path = Path(path)
    current = FileSignature.of(path)
    if current is None:
        return None
    if layout is not None:
        for record in filter(None, (read_record(layout, a) for a in _WRITERS)):
            stamp = record.outputs.get(path.name)
            if stamp is not None and stamp.still_matches(path):
                return stamp.sha256
    signature = current.as_list()
    name = str(path.resolve())
    data = _read(layout) if layout is not None else {"digests": {}}
    known = data["digests"].get(name)
    if isinstance(known, dict) and known.get("stat") == signature:
        return str(known["sha256"])
    sha = file_sha256(path)
    if layout is None:
        return sha
    digests = {name: {"stat": signature, "sha256": sha}}
    digests.update((k, v) for k, v in data["digests"].items() if k != name)
    data["digests"] = dict(list(digests.items())[:_KEEP])
    with contextlib.suppress(OSError):  # read-only: hash again next time
        _write(layout, data)
    return sha
