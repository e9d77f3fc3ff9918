"""The baselines: what the next build is judged against, the same from every worker.

A regression is a difference from what the agent runs on now, so the reference is the
store last published, not the previous evaluation (an evaluation of a build that never
went out proves nothing). Two baselines are made of it, together: `record_baseline` (after
a successful publication, by `published_local`; or by `brain-pipeline eval --accept --note
"..."`, which is how a known regression is accepted: the note and the time stay in the
list of publications, so the acceptance leaves a trace) moves both.

- **The regression baseline**: the evaluation record of that store, copied whole into the
  blob the pointer `judgements.REGRESSION` names ({"kind", "note", "when", "record"});
  `compare_with_baseline` compares a new report with it query by query
  (`compare.compare`), naming where entered chunks come from (the chunk history), and
  picks the agent's retriever. What the differences mean is decided by `verdict.judge`.
- **The known-item baseline**: the candidate of that evaluation (the known items it
  sampled, with their ranks and the chunk count per area, kept by `save_candidate` under
  the pointer `judgements.CANDIDATE + <evaluation key>`, the key `gc` keeps them by),
  copied under `judgements.KNOWN_ITEMS`: what the next build's known-item check asks
  (`known_item_gate`).

Each publication's summary is a row of `eval_history` (`eval --history`). Pointers move by
compare-and-set (`judgements.point`). A baseline that is missing or unreadable is "no
baseline", with the reason in one line: never a crash, never a silent pass. No Dagster.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from brain_pipeline.evaluation import judgements
from brain_pipeline.evaluation.compare import ChunkOrigin, Comparison, OriginLookup, compare
from brain_pipeline.evaluation.eval_record import Clock, utc_now
from brain_pipeline.evaluation.known_item_gate import KnownItemBaseline
from brain_pipeline.evaluation.known_items import KnownItem
from brain_pipeline.evaluation.runner import EvaluationReport
from brain_pipeline.state.blobs import BlobError
from brain_pipeline.state.memory import Memory
from brain_pipeline.utils.digest import canonical_json, value_digest

AGENT_RETRIEVERS: tuple[str, ...] = ("hybrid", "bm25")
"""The retriever the agent answers with: hybrid (which is BM25 without vectors), else BM25."""
NO_KNOWN_ITEMS = (
    "no known-item baseline yet (nothing published since the known-item check began): "
    "the check passes; the next publication records one"
)


def _made(kind: str, note: str | None, when: str) -> str:
    """How and when a baseline was made, e.g. "accepted 2026-01-02T00:00:00 (why)"."""
    how = "accepted" if kind == "accepted" else "published"
    return f"{how} {when}" + (f" ({note})" if note else "")


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:160]


def _read(memory: Memory, pointer: str) -> tuple[Any, str | None]:
    """The JSON the pointer names (None: none), or why it cannot be read."""
    try:
        return judgements.pointed(memory, pointer), None
    except (BlobError, ValueError) as exc:
        return None, f"its blob is unreadable ({_short(exc)})"


# ---- the regression baseline ---------------------------------------------------------


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
        made = _made(self.kind, self.note, self.when)
        return f"baseline: the evaluation {made}, key {self.key[:12]}"


@dataclass(frozen=True)
class BaselineLookup:
    """The baseline, or None and the one line saying why there is none."""

    baseline: Baseline | None
    reason: str | None = None


def load_baseline(memory: Memory) -> BaselineLookup:
    """The regression baseline, or why there is none (none recorded, unreadable)."""
    entry, unreadable = _read(memory, judgements.REGRESSION)
    if unreadable is not None:
        return BaselineLookup(None, f"no baseline: {unreadable}")
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
    now: Clock = utc_now,
) -> dict[str, Any]:
    """Make `record` (an evaluation record) both baselines and add it to the publications.

    `intervals`: {"bm25.ndcg_at_10": [low, high], ...} for the history. The known items
    its evaluation sampled become the known-item baseline; a record from before the
    known-item check (a rollback to an old publication, say), or whose known items were
    not kept, clears it. Returns the summary written, with `known_items` the one line
    saying what happened to the known-item baseline.
    """
    when = now().isoformat(timespec="seconds")
    summary = summary_of(record, intervals, kind=kind, note=note, when=when)
    entry = {"kind": kind, "note": note, "when": when, "record": dict(record)}
    judgements.point(memory, judgements.REGRESSION, entry)
    judgements.ready(memory).ledger.execute(
        "INSERT INTO eval_history (recorded_at, summary) VALUES (?, ?)",
        (when, canonical_json(summary).decode("utf-8")),
    )
    candidate = record.get("known_items_candidate")
    if isinstance(candidate, str):
        summary["known_items"] = _record_known_items(memory, candidate, kind, note, when)
    else:
        summary["known_items"] = clear_known_items(
            memory, "this evaluation predates the known-item check"
        )
    return summary


def publications(memory: Memory) -> tuple[list[dict[str, Any]], str | None]:
    """The publication summaries, newest first, and why there are none when there are none."""
    rows = judgements.ready(memory).ledger.query(
        "SELECT summary FROM eval_history ORDER BY id DESC"
    )
    found = [p for p in (json.loads(row[0]) for row in rows) if isinstance(p, dict)]
    return found, (None if found else "no publications recorded yet")


@dataclass(frozen=True)
class BaselineComparison:
    """The evaluation against the baseline, or None and `status` saying why there is none."""

    comparison: Comparison | None
    baseline: Baseline | None
    status: str
    """One line: which baseline, how many queries were compared, or why there is none."""
    retriever: str | None = None
    """The agent's retriever, whose new misses the verdict gates."""


def compare_with_baseline(report: EvaluationReport, memory: Memory) -> BaselineComparison:
    """Compare `report` with the regression baseline the ledger of `memory` keeps.

    Cheap for an evaluation that is otherwise reused: a JSON read of the baseline, a
    dictionary join over the queries, and one chunk-history query per chunk that
    entered a changed query's top 10.
    """
    found = load_baseline(memory)
    if found.baseline is None:
        return BaselineComparison(None, None, str(found.reason))
    baseline = found.baseline
    comparison = compare(
        report.queries,
        baseline.report.queries,
        origin_lookup(memory, baseline.evaluated_at),
    )
    if comparison.shared == 0:
        return BaselineComparison(
            None, baseline, "no baseline: the baseline shares no query with this fixture"
        )
    names = [s.name for s in report.retrievers]
    retriever = next((name for name in AGENT_RETRIEVERS if name in names), None)
    status = f"{baseline.describe()}; {comparison.shared} queries compared"
    if comparison.only_now or comparison.only_baseline:
        status += (
            f" (the fixture changed: {comparison.only_now} new or relabelled, "
            f"{comparison.only_baseline} gone; only shared queries are compared)"
        )
    return BaselineComparison(comparison, baseline, status, retriever)


def origin_lookup(memory: Memory, since: str | None = None) -> OriginLookup:
    """Where chunks come from, per the chunk history (the chunks that entered a top 10,
    the stale labels' texts); "new" = first seen after `since`, when the baseline was
    evaluated. A history that cannot be read leaves origins unknown."""
    from brain_pipeline.corpus.chunk_history import HistoryError, lookup_many

    def parse(text: str) -> datetime | None:
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None

    baseline_time = parse(since) if since else None

    def origins(ids: Sequence[str]) -> dict[str, ChunkOrigin]:
        try:
            entries = lookup_many(memory, ids)
        except (HistoryError, OSError, ValueError):
            return {}
        out: dict[str, ChunkOrigin] = {}
        for chunk_id, entry in entries.items():
            first = parse(entry.first_seen)
            new = None if first is None or baseline_time is None else first > baseline_time
            out[chunk_id] = ChunkOrigin(
                chunk_id, entry.source, entry.heading_text or None, entry.first_seen, new
            )
        return out

    return origins


# ---- the known-item baseline ---------------------------------------------------------


def save_candidate(
    memory: Memory,
    key: str,
    items: Sequence[KnownItem],
    area_chunks: Mapping[str, int],
    notes: Sequence[str],
) -> None:
    """Keep the known items of the evaluation `key` (`EvalInputs.key()`): its publication
    makes them the baseline."""
    data = {
        "items": [item.to_dict() for item in items],
        "area_chunks": dict(area_chunks),
        "notes": list(notes),
    }
    judgements.point(memory, judgements.CANDIDATE + key, data)


def _parse(data: Any) -> tuple[list[KnownItem], dict[str, int]]:
    """The items and chunk counts of a candidate; KeyError, TypeError or ValueError for
    anything else (another shape is never half read)."""
    if not isinstance(data, dict):
        raise ValueError("not a known-item candidate")
    items = [KnownItem.from_dict(i) for i in data["items"]]
    chunks = {str(a): int(n) for a, n in dict(data["area_chunks"]).items()}
    return items, chunks


def _record_known_items(
    memory: Memory, key: str, kind: str, note: str | None, when: str
) -> str:
    """Make candidate `key` the known-item baseline; the one line saying what happened."""
    data = judgements.pointed(memory, judgements.CANDIDATE + key)
    if data is None:
        return clear_known_items(memory, "no known items were kept for this store")
    _parse(data)  # refuse to copy what could not be read back
    entry = {**data, "kind": kind, "note": note, "when": when, "candidate": key}
    judgements.point(memory, judgements.KNOWN_ITEMS, entry)
    return f"known items: {len(data['items'])} known items recorded as the baseline ({kind})"


def clear_known_items(memory: Memory, why: str) -> str:
    """No known-item baseline (the published store has no known items): asking the next
    build about another store's passages would blame it for the difference."""
    judgements.move(memory, judgements.KNOWN_ITEMS, judgements.CLEARED)
    return (
        f"known items: {why}; the known-item baseline is cleared (the check passes until "
        "the next publication records one)"
    )


def load_known_items(memory: Memory) -> KnownItemBaseline | str:
    """The known-item baseline, or the one line saying why there is none."""
    data, unreadable = _read(memory, judgements.KNOWN_ITEMS)
    if unreadable is not None:
        return f"no known-item baseline: {unreadable}: the check passes"
    if data is None:
        return NO_KNOWN_ITEMS
    try:
        items, chunks = _parse(data)
    except (KeyError, TypeError, ValueError):
        return (
            "no known-item baseline: it is of another format: the check passes; "
            "the next publication records one"
        )
    made = _made(str(data.get("kind")), data.get("note"), str(data.get("when", "?")))
    candidate = data.get("candidate")
    return KnownItemBaseline(
        tuple(items),
        chunks,
        f"known items of the store {made}",
        candidate=candidate if isinstance(candidate, str) else None,
        digest=value_digest({"items": data["items"], "area_chunks": data["area_chunks"]}),
    )
