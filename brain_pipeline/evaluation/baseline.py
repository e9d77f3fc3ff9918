"""The baseline: the evaluation of the last published (or deliberately accepted) store.

A regression is a difference from what the agent runs on now, so the reference for the
comparison is the evaluation of the store last published, not the previous evaluation
(an evaluation of a build that never went out proves nothing). `published_local` records
it after a successful publication; `brain-pipeline eval --accept --note "..."` records
the current evaluation instead, which is how a known regression is accepted: the note and
the time stay in the list of publications, so the acceptance leaves a trace.

Kept in the ledger (`evaluation.judgements`), the same from every worker: the pointer
`judgements.REGRESSION` names the blob {"kind", "note", "when", "record"} (the whole
evaluation record, copied), moved by compare-and-set; each publication's summary is a row
of `eval_history`. A baseline that is missing or unreadable is "no baseline", with the
reason in one line: never a crash, never a silent pass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from brain_pipeline.evaluation import judgements
from brain_pipeline.evaluation.runner import EvaluationReport
from brain_pipeline.state.blobs import BlobError
from brain_pipeline.state.memory import Memory

Clock = Callable[[], datetime]


@dataclass(frozen=True)
class Baseline:
    """A readable baseline: the stored evaluation record and how it became the baseline."""

    kind: str
    note: str | None
    when: str
    """When it was published or accepted (ISO-8601 UTC)."""
    record: Mapping[str, Any]
    report: EvaluationReport

    @property
    def key(self) -> str:
        return str(self.record.get("key", ""))

    @property
    def evaluated_at(self) -> str:
        return str(self.record.get("when") or self.when)

    def describe(self) -> str:
        how = "accepted" if self.kind == "accepted" else "published"
        note = f" ({self.note})" if self.note else ""
        return f"baseline: the evaluation {how} {self.when}{note}, key {self.key[:12]}"


@dataclass(frozen=True)
class BaselineLookup:
    """The baseline, or None and the one line saying why there is none."""

    baseline: Baseline | None
    reason: str | None = None


def load_baseline(memory: Memory) -> BaselineLookup:
    """The baseline, or why there is none (none recorded, unreadable)."""
    try:
        entry = judgements.pointed(memory, judgements.REGRESSION)
    except (BlobError, ValueError) as exc:
        return BaselineLookup(None, f"no baseline: its blob is unreadable ({_short(exc)})")
    if entry is None:
        return BaselineLookup(
            None,
            "no baseline: nothing has been published yet "
            "(or accepted with `brain-pipeline eval --accept`)",
        )
    if not isinstance(entry, dict) or not isinstance(entry.get("record"), dict):
        return BaselineLookup(None, "no baseline: the baseline holds no evaluation")
    record = entry["record"]
    try:
        report = EvaluationReport.from_dict(record["report"])
    except (KeyError, TypeError, ValueError) as exc:
        return BaselineLookup(None, f"no baseline: an unreadable report ({_short(exc)})")
    return BaselineLookup(
        Baseline(
            kind=str(entry.get("kind") or "published"),
            note=entry.get("note") if isinstance(entry.get("note"), str) else None,
            when=str(entry.get("when") or record.get("when") or "?"),
            record=record,
            report=report,
        )
    )


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:160]


def summary_of(
    record: Mapping[str, Any],
    intervals: Mapping[str, Any],
    *,
    kind: str,
    note: str | None,
    when: str,
) -> dict[str, Any]:
    """One line of `eval --history`: figures, their intervals, misses, note, and the
    known-item figures (`reports.known_item_summary`) of the verdict it went out on."""
    inputs = record.get("inputs") if isinstance(record.get("inputs"), Mapping) else {}
    verdict = record.get("verdict") if isinstance(record.get("verdict"), Mapping) else None
    return {
        "when": when,
        "kind": kind,
        "note": note,
        "evaluation_key": record.get("key"),
        "evaluated_at": record.get("when"),
        # A record written before verdicts were stored says "passed" itself.
        "passed": verdict.get("severity") != "ERROR" if verdict else record.get("passed"),
        "severity": verdict.get("severity") if verdict else None,
        "store_sha256": (inputs or {}).get("store_sha256"),
        "fixture_sha256": (inputs or {}).get("fixture_sha256"),
        "figures": dict(record.get("figures") or {}),
        "intervals": {name: list(value) for name, value in intervals.items()},
        "run_id": record.get("run_id"),
        "known_items": _known_items_of(verdict),
    }


def _known_items_of(verdict: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The known-item figures of a stored verdict (None: none, or unreadable)."""
    from brain_pipeline.evaluation.known_item_gate import KnownItemVerdict
    from brain_pipeline.evaluation.reports import known_item_summary

    data = (verdict or {}).get("known_items")
    if not isinstance(data, Mapping):
        return None
    try:
        return known_item_summary(KnownItemVerdict.from_dict(data))
    except (KeyError, TypeError, ValueError):
        return None


def record_baseline(
    memory: Memory,
    record: Mapping[str, Any],
    intervals: Mapping[str, Any],
    *,
    kind: str,
    note: str | None = None,
    now: Clock | None = None,
) -> dict[str, Any]:
    """Make `record` (an evaluation record) the baseline and add it to the publications.

    `intervals`: {"bm25.ndcg_at_10": [low, high], ...} for the history. Returns the
    summary written.
    """
    when = (now or (lambda: datetime.now(UTC)))().isoformat(timespec="seconds")
    summary = summary_of(record, intervals, kind=kind, note=note, when=when)
    entry = {"kind": kind, "note": note, "when": when, "record": dict(record)}
    judgements.move(memory, judgements.REGRESSION, judgements.put_json(memory, entry))
    judgements.add_history(memory, when, summary)
    return summary


def publications(memory: Memory) -> tuple[list[dict[str, Any]], str | None]:
    """The publication summaries, newest first, and why there are none when there are none."""
    rows = [p for p in judgements.history(memory) if isinstance(p, dict)]
    return rows, (None if rows else "no publications recorded yet")
