"""The baseline: the evaluation of the last published (or deliberately accepted) store.

A regression is a difference from what the agent runs on now, so the reference for the
comparison is the evaluation of the store last published, not the previous evaluation
(an evaluation of a build that never went out proves nothing). `published_local` records
it after a successful publication; `brain-pipeline eval --accept --note "..."` records
the current evaluation instead, which is how a known regression is accepted: the note and
the time stay in the list of publications, so the acceptance leaves a trace.

File: `layout.eval_baseline` (JSON, written atomically):

    {"format": 1,
     "baseline": {"kind": "published" | "accepted", "note", "when", "record": {...}},
     "publications": [summary, ...]}   newest first: figures, intervals, misses, note

The whole evaluation record is copied (the evaluation record itself keeps only a few
outcomes and would evict it). A baseline that is missing, unreadable, or written by
another evaluation version is "no baseline", with the reason in one line: never a crash,
never a silent pass.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from brain_pipeline.evaluation.eval_record import EVALUATION_VERSION
from brain_pipeline.evaluation.runner import EvaluationReport
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.utils.atomic import atomic_write_bytes
from brain_pipeline.utils.damage import healed, set_aside_copy

_FORMAT = 1
_KEEP_PUBLICATIONS = 500
"""Summaries are a few hundred bytes each: years of nightly publications."""

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


def _parse(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_bytes())
    if not isinstance(data, dict):
        raise ValueError("not a baseline file")
    return data


def _read(layout: StateLayout) -> dict[str, Any]:
    """The file's content; raises ValueError/OSError when it cannot be used.

    Damaged bytes are set aside (kept once for inspection, with the publications list
    they hold) and named in one WARN line; the file is then missing, so the next
    publication records a new baseline. A readable file of another format is refused
    but left in place: it is not damage.
    """
    path = layout.eval_baseline
    data = healed(
        path,
        partial(_parse, path),
        what="evaluation baseline",
        consequence="no baseline until the next publication records one",
    )
    if data.get("format") != _FORMAT:
        raise ValueError("unknown format")
    return data


def load_baseline(layout: StateLayout) -> BaselineLookup:
    """The baseline, or why there is none (missing, unreadable, another version)."""
    path = layout.eval_baseline
    try:
        data = _read(layout)
    except FileNotFoundError:
        return BaselineLookup(None, "no baseline: nothing has been published from this build "
                              "directory yet (or accepted with `brain-pipeline eval --accept`)")
    except (OSError, ValueError) as exc:
        return BaselineLookup(None, f"no baseline: {path} is unreadable ({_short(exc)})")
    entry = data.get("baseline")
    if not isinstance(entry, dict) or not isinstance(entry.get("record"), dict):
        return BaselineLookup(None, f"no baseline: {path} holds no baseline evaluation")
    version = entry.get("evaluation_version")
    if version != EVALUATION_VERSION:
        return BaselineLookup(
            None,
            f"no baseline: the baseline was recorded by evaluation version {version} "
            f"(this is {EVALUATION_VERSION}); the next publication records a new one",
        )
    record = entry["record"]
    try:
        report = EvaluationReport.from_dict(record["report"])
    except (KeyError, TypeError, ValueError) as exc:
        return BaselineLookup(None, f"no baseline: {path} has an unreadable report ({_short(exc)})")
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
    layout: StateLayout,
    record: Mapping[str, Any],
    intervals: Mapping[str, Any],
    *,
    kind: str,
    note: str | None = None,
    now: Clock | None = None,
) -> dict[str, Any]:
    """Make `record` (an evaluation record) the baseline and add it to the publications.

    `intervals`: {"bm25.ndcg_at_10": [low, high], ...} for the history. An unreadable
    file is replaced (its publications list is lost, which the caller is told by the
    returned summary being the only one). Returns the summary written.
    """
    when = (now or (lambda: datetime.now(UTC)))().isoformat(timespec="seconds")
    try:
        data = _read(layout)
    except (OSError, ValueError):
        data = {"format": _FORMAT, "publications": []}
    summary = summary_of(record, intervals, kind=kind, note=note, when=when)
    previous = data.get("publications")
    kept = [p for p in previous if isinstance(p, dict)] if isinstance(previous, list) else []
    data["publications"] = [summary, *kept][:_KEEP_PUBLICATIONS]
    data["baseline"] = {
        "kind": kind,
        "note": note,
        "when": when,
        "evaluation_version": EVALUATION_VERSION,
        "record": dict(record),
    }
    payload = json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True, default=str)
    layout.state_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(layout.eval_baseline, payload.encode("utf-8"))
    return summary


def publications(layout: StateLayout) -> tuple[list[dict[str, Any]], str | None]:
    """The publication summaries, newest first, and why there are none when there are none."""
    try:
        data = _read(layout)
    except FileNotFoundError:
        aside = set_aside_copy(layout.eval_baseline)
        if aside.exists():
            # Its list was damaged and set aside: say so rather than "none yet".
            return [], f"{layout.eval_baseline} was damaged and set aside as {aside.name}"
        return [], "no publications recorded in this build directory yet"
    except (OSError, ValueError) as exc:
        return [], f"{layout.eval_baseline} is unreadable ({_short(exc)})"
    rows = data.get("publications")
    return ([p for p in rows if isinstance(p, dict)] if isinstance(rows, list) else []), None
