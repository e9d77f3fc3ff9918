"""The evaluation's verdict: every judgement about one evaluation, made once, as one value.

`judge` turns an `EvaluationReport` (what the retrievers did), the configured thresholds
and the comparison with the baseline into an `EvaluationVerdict`: each bound next to its figure and
margin, the stale labels, the new misses of the agent's retriever, and from them the
failures, the warnings and one severity. Nothing else judges: the blocking check shows the
verdict, `brain-pipeline eval` prints it, the evaluation record stores it whole
(`to_dict`), and the publish gate (`publishing.gate.decide`) reads it back (`from_dict`)
without re-judging a threshold or re-running the comparison.

Severity: ERROR when anything fails (an empty store, a stale label, a fixture area the
store lacks, a missed bound, a new miss with `on_regression: block`); WARN when only
warnings remain (a new miss with `on_regression: warn`, nothing gated); PASS otherwise.
Pure: no files, no configuration, no Dagster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from brain_pipeline.evaluation.known_item_gate import ACCEPT_HINT, KnownItemVerdict

if TYPE_CHECKING:
    from brain_pipeline.evaluation.compare import Comparison
    from brain_pipeline.evaluation.runner import EvaluationReport

Severity = Literal["PASS", "WARN", "ERROR"]
HEADLINE_CHARS = 280
"""A headline is one line a notification can carry whole."""

_METRIC_LABELS = {"ndcg_at_10": "nDCG@10", "recall_at_10": "recall@10", "misses": "misses"}
_BOUNDS: tuple[tuple[str, str, str], ...] = (
    ("ndcg_at_10", "min_ndcg_at_10", "min"),
    ("recall_at_10", "min_recall_at_10", "min"),
    ("misses", "max_misses", "max"),
)


@dataclass(frozen=True)
class ThresholdRow:
    """One configured bound, the measured figure, and how far it is from failing."""

    retriever: str
    metric: str
    value: float
    bound: float
    kind: str  # "min" or "max"
    margin: float
    """value - bound for a floor, bound - value for a ceiling: negative means it failed."""

    @property
    def passed(self) -> bool:
        return self.margin >= 0

    def describe(self) -> str:
        """E.g. "nDCG@10 0.483 >= 0.450" or "misses 18 <= 20" (without the retriever)."""
        label = _METRIC_LABELS.get(self.metric, self.metric)
        if self.kind == "max":
            return f"{label} {self.value:.0f} {'<=' if self.passed else '>'} {self.bound:.0f}"
        return f"{label} {self.value:.3f} {'>=' if self.passed else '<'} {self.bound:.3f}"

    def failure(self) -> str:
        """The sentence a missed bound fails with."""
        label = _METRIC_LABELS.get(self.metric, self.metric)
        if self.kind == "max":
            return f"{self.retriever}: {self.value:.0f} {label} > maximum {self.bound:.0f}"
        return f"{self.retriever}: {label} {self.value:.3f} < minimum {self.bound:.3f}"


@dataclass(frozen=True)
class StaleLabel:
    """A labelled id that is not live in its query's area, and where its text last was."""

    id: str
    query: str
    area: str
    source: str | None = None


@dataclass(frozen=True)
class Regression:
    """A query the agent's retriever answered at the baseline and misses now."""

    retriever: str
    query: str
    area: str
    message: str
    """The sentence that names it (with the chunks that displaced the answer)."""
    blocking: bool
    """True with `on_regression: block` (it is among the failures), else a warning."""


@dataclass(frozen=True)
class EvaluationVerdict:
    """Everything judged about one evaluation; see the module docstring."""

    severity: Severity
    failures: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    thresholds: tuple[ThresholdRow, ...] = ()
    regressions: tuple[Regression, ...] = ()
    stale_labels: tuple[StaleLabel, ...] = ()
    baseline: str | None = None
    """Which baseline the regressions are judged against, or why there is none."""
    on_regression: str = "block"
    accepted: str | None = None
    """The note of `eval --accept`, once this evaluation's regressions were accepted."""
    evaluation_key: str | None = None
    """The evaluation record's key (the digest of the inputs judged), when recorded."""
    known_items: KnownItemVerdict | None = None
    """The known-item check (known_item_gate): its blocking sentences are among
    `failures` (and can be accepted, like regressions), its warnings among `warnings`."""
    notes: tuple[str, ...] = ()
    """Lines that change nothing but must be said (no labels: thresholds skipped)."""

    @property
    def passed(self) -> bool:
        """Nothing failed and nothing to warn about (the check's own "passed")."""
        return self.severity == "PASS"

    @property
    def own_failures(self) -> tuple[str, ...]:
        """The failures that are not regressions or known-item losses (these cannot be
        accepted)."""
        blocking = self._acceptable()
        return tuple(f for f in self.failures if f not in blocking)

    def _acceptable(self) -> set[str]:
        blocking = {r.message for r in self.regressions if r.blocking}
        if self.known_items is not None:
            blocking.update(self.known_items.failures)
        return blocking

    def headline(self) -> str:
        """One line saying what decided the verdict, for a notification or a log.

        ERROR names the first failure (and how many more), WARN the first warning, PASS
        every applied bound with its figure.
        """
        if self.severity == "ERROR":
            text = _first("retrieval evaluation FAILED", self.failures)
        elif self.severity == "WARN":
            text = _first("retrieval evaluation passed with warnings", self.warnings)
        else:
            text = "retrieval evaluation passed: " + self.bounds_summary() + self._gate_summary()
        text = " ".join(text.split())  # one line, whatever a failure holds
        return text if len(text) <= HEADLINE_CHARS else text[: HEADLINE_CHARS - 1] + "…"

    def bounds_summary(self) -> str:
        """Every applied bound with its figure, grouped by retriever."""
        groups: dict[str, list[str]] = {}
        for row in self.thresholds:
            groups.setdefault(row.retriever, []).append(row.describe())
        parts = [f"{name} {', '.join(items)}" for name, items in groups.items()]
        if not parts and self.notes:
            return self.notes[0]
        return "; ".join(parts) if parts else "no thresholds configured"

    def line(self) -> str:
        """`PASSED: <every bound and figure>` or `FAILED: <every failure>` (the CLI's last line)."""
        if self.failures:
            return "FAILED: " + "; ".join(self.failures)
        return "PASSED: " + self.bounds_summary() + self._gate_summary()

    def _gate_summary(self) -> str:
        """With no labels the known-item check is the gate: a PASS line names its figure
        (with labels the line stays the bounds, and the known-item table is printed apart)."""
        if self.notes and self.known_items is not None:
            return "; " + self.known_items.summary()
        return ""

    def accepting(self, note: str) -> EvaluationVerdict:
        """This verdict once its regressions are accepted as the new baseline: they no
        longer fail it (they stay listed, non-blocking). Other failures stay."""
        blocking = self._acceptable()
        failures = tuple(f for f in self.failures if f not in blocking)
        regressions = tuple(replace(r, blocking=False) for r in self.regressions)
        return replace(
            self,
            severity=_severity(failures, self.warnings),
            failures=failures,
            regressions=regressions,
            accepted=note,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvaluationVerdict:
        """The inverse of `to_dict`; ValueError for a bad severity, KeyError or TypeError
        for a stored shape this code does not read: checked by the fields themselves, so
        there is no format number to bump (an older record's `"format": 1` is ignored)."""
        severity = data["severity"]
        if severity not in ("PASS", "WARN", "ERROR"):
            raise ValueError(f"unknown severity {severity!r}")
        return cls(
            severity=severity,
            failures=tuple(str(f) for f in data["failures"]),
            warnings=tuple(str(w) for w in data["warnings"]),
            thresholds=tuple(ThresholdRow(**row) for row in data["thresholds"]),
            regressions=tuple(Regression(**row) for row in data["regressions"]),
            stale_labels=tuple(StaleLabel(**row) for row in data["stale_labels"]),
            baseline=data.get("baseline"),
            on_regression=str(data.get("on_regression", "block")),
            accepted=data.get("accepted"),
            evaluation_key=data.get("evaluation_key"),
            known_items=(
                KnownItemVerdict.from_dict(data["known_items"])
                if isinstance(data.get("known_items"), Mapping)
                else None
            ),
            notes=tuple(str(n) for n in data.get("notes", ())),
        )

    @classmethod
    def unusable(cls, reason: str) -> EvaluationVerdict:
        """Nothing could be evaluated (no store, an unreadable fixture): an ERROR."""
        return cls(severity="ERROR", failures=(reason,))


def _first(prefix: str, items: Sequence[str]) -> str:
    more = f" (+{len(items) - 1} more)" if len(items) > 1 else ""
    return f"{prefix}: {items[0]}{more}" if items else prefix


def _severity(failures: Sequence[str], warnings: Sequence[str]) -> Severity:
    if failures:
        return "ERROR"
    return "WARN" if warnings else "PASS"


def _bound(bounds: Any, key: str) -> Any:
    """Read a bound from a pydantic/dataclass object or a plain mapping."""
    if isinstance(bounds, Mapping):
        return bounds.get(key)
    return getattr(bounds, key, None)


def threshold_rows(
    report: EvaluationReport, thresholds: Mapping[Any, Any] | None
) -> tuple[list[ThresholdRow], list[str]]:
    """Every configured bound next to its figure, and the retrievers with bounds that
    were not evaluated (an ignored bound is a lie, so those fail)."""
    rows: list[ThresholdRow] = []
    missing: list[str] = []
    for name, bounds in (thresholds or {}).items():
        summary = report.summary(str(name))
        if summary is None:
            missing.append(str(name))
            continue
        for metric, key, kind in _BOUNDS:
            bound = _bound(bounds, key)
            if bound is None:
                continue
            value = float(getattr(summary, metric))
            margin = value - float(bound) if kind == "min" else float(bound) - value
            rows.append(ThresholdRow(str(name), metric, value, float(bound), kind, margin))
    return rows, missing


def _stale_failure(report: EvaluationReport, labels: Sequence[StaleLabel]) -> str:
    def where(label: StaleLabel) -> str:
        return f", was in {label.source}" if label.source else ""

    named = "; ".join(
        f"{label.id} (query {label.query!r}, area {label.area}{where(label)})" for label in labels
    ) or ", ".join(report.stale_ids)
    return (
        f"stale fixture: {len(report.stale_ids)} labelled chunk id(s) no longer in the "
        f"store: {named}; relabel {report.fixture_source} "
        "(`brain-pipeline fixture repair` proposes the new ids)"
    )


def judge(
    report: EvaluationReport,
    thresholds: Mapping[Any, Any] | None = None,
    *,
    comparison: Comparison | None = None,
    agent_retriever: str | None = None,
    baseline: str | None = None,
    on_regression: str = "block",
    evaluation_key: str | None = None,
    known_items: KnownItemVerdict | None = None,
) -> EvaluationVerdict:
    """The verdict on `report`: the one place thresholds, staleness and regressions are
    judged.

    Fails on an empty store, stale labels, fixture areas absent from the store, any
    configured bound (min_ndcg_at_10, min_recall_at_10, max_misses per retriever) missed,
    a bound for a retriever that was not evaluated, and, with `on_regression: block`, a
    query `agent_retriever` answered at the baseline (`comparison`) and misses now.
    `comparison` None means there is no baseline to compare with (`baseline` says why).
    A fixture with no queries skips every threshold (and `notes` says so): then the
    known-item check (`known_items`, whose failures and warnings join these) is the gate.
    """
    failures: list[str] = []
    warnings: list[str] = []
    notes: list[str] = []
    if not report.queries:
        notes.append(
            f"no labelled queries in {report.fixture_source}: the labelled thresholds are "
            "skipped; the known-item check is the gate"
        )
        thresholds = None
    if report.n_chunks == 0:
        failures.append("the knowledge store is empty: nothing can be retrieved")
    stale = tuple(
        StaleLabel(chunk, query, area, report.stale_sources.get(chunk))
        for chunk, query, area in report.stale_labels
    )
    if report.stale_ids:
        failures.append(_stale_failure(report, stale))
    if report.unknown_areas:
        failures.append(
            f"fixture asks about area(s) not in the store: {', '.join(report.unknown_areas)}"
        )
    rows, missing = threshold_rows(report, thresholds)
    for name in (str(n) for n in (thresholds or {})):
        if name in missing:
            failures.append(f"{name}: thresholds are configured but {name} was not evaluated")
        failures.extend(row.failure() for row in rows if row.retriever == name and not row.passed)
    regressions: list[Regression] = []
    if comparison is not None:
        if agent_retriever is None:
            warnings.append("no agent retriever (hybrid or bm25) evaluated: nothing gated")
        else:
            block = on_regression == "block"
            for change in comparison.new_misses(agent_retriever):
                message = f"regression: {change.describe()}"
                if block:
                    message += ACCEPT_HINT
                (failures if block else warnings).append(message)
                regressions.append(
                    Regression(change.retriever, change.query, change.area, message, block)
                )
    if known_items is not None:
        failures.extend(known_items.failures)
        warnings.extend(known_items.warnings)
    return EvaluationVerdict(
        severity=_severity(failures, warnings),
        failures=tuple(failures),
        warnings=tuple(warnings),
        thresholds=tuple(rows),
        regressions=tuple(regressions),
        stale_labels=stale,
        baseline=baseline,
        on_regression=on_regression,
        evaluation_key=evaluation_key,
        known_items=known_items,
        notes=tuple(notes),
    )
