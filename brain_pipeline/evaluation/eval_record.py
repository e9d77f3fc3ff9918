"""The evaluation record: the outcomes of the retrieval evaluation, keyed by inputs.

An evaluation is a pure function of the store bytes, the embeddings bytes, the fixture
bytes, the thresholds, the evaluation/retrieval code and the effective query provider
and model. `EvalInputs.key()` digests exactly those; when the digest is unchanged the
previous outcome is reused (and says so) instead of re-running the fixture. The record
is also what a publish gate consults: `lookup(memory, key)` finds the outcome for exactly
the inputs it is about to publish (`lookup(memory, None)`: the newest one). The key covers what
was *measured*; the verdict also depends on the rule it was judged by (every evaluation
setting, the baselines compared with), which the outcome keeps as `rule` and the gate
matches too (`verdict_rule.lookup_judged`): a reused report is judged again under a new
rule, a verdict is never reused under one.

Outcomes live in the ledger and the blobs (`evaluation.judgements`), so every worker
reads the same ones. An outcome holds `report` (runner.EvaluationReport.to_dict),
`figures`, `inputs`, `run_id`, `verdict` (verdict.EvaluationVerdict.to_dict,
the whole judgement the publish gate reads) and `rule` (verdict_rule.VerdictRule.to_dict).

The code an outcome depends on is digested from the code (`judging_code`), not bumped by
hand. What stays local: a memo of file digests keyed by (size, mtime_ns, inode,
ctime_ns) in `state/eval-digests.json`, so an unchanged 800 MB embeddings.bin is not
re-hashed on every check (a fresh worker hashes it once).
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from brain_pipeline.evaluation import judgements
from brain_pipeline.state.blobs import BlobError
from brain_pipeline.state.code_digest import code_digest
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.memory import Memory
from brain_pipeline.state.records import read_record
from brain_pipeline.utils.atomic import atomic_write_bytes
from brain_pipeline.utils.digest import file_sha256, value_digest
from brain_pipeline.utils.file_signature import FileSignature

_KEEP_DIGESTS = 8
_WRITERS = ("embeddings", "knowledge_store")
"""Assets whose records stamp the files an evaluation hashes."""

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


@functools.cache
def judging_code() -> str:
    """Digest of the code that measures and judges an evaluation (replaces the hand-bumped
    EVALUATION_VERSION/RETRIEVAL_VERSION pair)."""
    return code_digest(
        "brain_pipeline.evaluation.runner",
        "brain_pipeline.evaluation.verdict",
        "brain_pipeline.evaluation.baseline",
        "brain_pipeline.evaluation.known_item_run",
    )


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
    code_version: str = field(default_factory=judging_code)

    def key(self) -> str:
        """The record key (`inputs_key`)."""
        return inputs_key(asdict(self))


def inputs_key(inputs: Mapping[str, Any]) -> str:
    """The key of an evaluation of `inputs` (as `EvalInputs`, or the `inputs` its record
    keeps): sha256 over their canonical JSON. Its outcome and the known items it sampled
    are kept under it."""
    return value_digest(dict(inputs))


def lookup(memory: Memory, key: str | None) -> dict[str, Any] | None:
    """The stored outcome for `key` (None: the newest), a dict with `key` and `when`;
    None when there is none."""
    ledger = judgements.ready(memory).ledger
    if key is None:
        rows = ledger.query("SELECT outcome FROM eval_outcomes ORDER BY recorded_at DESC LIMIT 1")
    else:
        rows = ledger.query("SELECT outcome FROM eval_outcomes WHERE key = ?", (key,))
    try:
        found = judgements.get_json(memory, rows[0][0]) if rows else None
    except (BlobError, ValueError):
        # Gone from (or damaged in) the blob store this worker reaches: an outcome to
        # measure again, never a reason to fail the check.
        return None
    return found if isinstance(found, dict) else None


def save(
    memory: Memory,
    key: str,
    record: Mapping[str, Any],
    *,
    now: Clock = utc_now,
) -> dict[str, Any]:
    """Store `record` under `key`; returns it with `key` and `when` added.

    `when` (ISO-8601 UTC, from the injected clock) is kept if the record already has one.
    """
    at = now()
    stored = {**record, "key": key}
    stored.setdefault("when", at.isoformat(timespec="seconds"))
    digest = judgements.put_json(memory, stored)
    judgements.ready(memory).ledger.execute(
        "INSERT INTO eval_outcomes VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
        "recorded_at = excluded.recorded_at, outcome = excluded.outcome",
        (key, at.isoformat(timespec="microseconds"), digest),
    )
    return stored


def _digest_memo(layout: StateLayout) -> Path:
    return layout.state_dir / "eval-digests.json"


def _read_memo(layout: StateLayout) -> dict[str, Any]:
    try:
        data = json.loads(_digest_memo(layout).read_bytes())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def known_sha256(layout: StateLayout | None, path: Path) -> str | None:
    """sha256 of `path` (None when absent) without reading it when its hash is known.

    Known means: the asset record that wrote the file stamped it and the stamp still
    matches (the embeddings step does, so the first evaluation after it does not read
    the vectors again), or the local memo kept it under the same stat signature.
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
    memo = _read_memo(layout) if layout is not None else {}
    known = memo.get(name)
    if isinstance(known, dict) and known.get("stat") == signature:
        return str(known["sha256"])
    sha = file_sha256(path)
    if layout is None:
        return sha
    digests = {name: {"stat": signature, "sha256": sha}}
    digests.update((k, v) for k, v in memo.items() if k != name)
    with contextlib.suppress(OSError):  # read-only: hash again next time
        layout.state_dir.mkdir(parents=True, exist_ok=True)
        payload = json.dumps(dict(list(digests.items())[:_KEEP_DIGESTS]), sort_keys=True)
        atomic_write_bytes(_digest_memo(layout), payload.encode("utf-8"))
    return sha
