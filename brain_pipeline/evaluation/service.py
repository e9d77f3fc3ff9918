"""Evaluate a store directory for the blocking check and `brain-pipeline eval` (no Dagster).

`evaluate_store_dir` is the one code path behind both: measure the store against the
fixture (or reuse the recorded report for identical inputs), compare it with the
baseline, judge it once (`verdict.judge`) and keep the report and the whole `EvaluationVerdict`
in the evaluation record, where the publish steps read it. Which embedder embeds the
queries is `embedding.factory`'s business; what the baseline comparison finds is
`baseline`'s; what it means is `verdict`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain_pipeline.config import BrainConfig
from brain_pipeline.retrieval.vectors import EMBEDDINGS_FILENAME
from brain_pipeline.utils.digest import sha256_hex

if TYPE_CHECKING:
    from brain_pipeline.corpus.store_reader import StoreView
    from brain_pipeline.embedding.factory import QueryEmbedding
    from brain_pipeline.evaluation.baseline import BaselineComparison
    from brain_pipeline.evaluation.eval_record import EvalInputs
    from brain_pipeline.evaluation.fixture.model import Fixture
    from brain_pipeline.evaluation.known_item_run import KnownItemRun
    from brain_pipeline.evaluation.runner import EvaluationProgress, EvaluationReport
    from brain_pipeline.evaluation.verdict import EvaluationVerdict
    from brain_pipeline.evaluation.verdict_rule import VerdictRule
    from brain_pipeline.retrieval.vectors import EmbeddingStore
    from brain_pipeline.state.layout import StateLayout
    from brain_pipeline.state.memory import Memory


@dataclass
class EvaluationOutcome:
    """What the blocking check and `brain-pipeline eval` show: the verdict, and the
    report and comparison it was judged on (None when nothing could be evaluated)."""

    verdict: EvaluationVerdict
    report: EvaluationReport | None = None
    flat_metrics: dict[str, float] = field(default_factory=dict)
    markdown: str = ""
    reused: bool = False
    """True when the report is the stored one for identical inputs (nothing re-ran)."""
    evaluated_at: str | None = None
    """ISO-8601 UTC time the evaluation actually ran (the earlier run when `reused`)."""
    record_key: str | None = None
    """Digest of the inputs (evaluation/eval_record.py); None when nothing could be evaluated."""
    inputs: dict[str, Any] = field(default_factory=dict)
    """The digests the key covers: store, embeddings, fixture, thresholds, code, provider."""
    intervals: dict[str, Any] = field(default_factory=dict)
    """{"bm25.ndcg_at_10": bootstrap.Interval, ...}: 95% intervals over queries."""
    regression: BaselineComparison | None = None
    """The comparison with the baseline (None when nothing could be evaluated)."""
    known_item_run: KnownItemRun | None = None
    """The known-item check's run on this store (None when nothing could be evaluated)."""
    rule: VerdictRule | None = None
    """What the verdict was judged by besides the inputs (settings, baselines, code): a
    publish gate counts it only under the same rule (evaluation/verdict_rule.py)."""

    @property
    def failures(self) -> list[str]:
        return list(self.verdict.failures)

    @property
    def stale_ids(self) -> list[str]:
        return list(self.report.stale_ids) if self.report is not None else []


@dataclass(frozen=True)
class _Measured:
    """A report and what it was measured from; `keep` False for one not to remember."""

    report: EvaluationReport
    layout: StateLayout | None
    key: str
    inputs: dict[str, Any]
    previous: Mapping[str, Any] | None
    """The stored record the report was reused from (None: it was measured now)."""
    keep: bool
    vectors: tuple[EmbeddingStore | None, QueryEmbedding] | None = None
    """The store's vectors and query embedder, when measuring read them."""


def evaluate_store_dir(
    cfg: BrainConfig,
    store_dir: Path,
    fixture: Path | None = None,
    warn: Any = None,
    progress: EvaluationProgress | None = None,
    *,
    reuse: bool = True,
    now: Callable[[], Any] | None = None,
    run_id: str | None = None,
) -> EvaluationOutcome:
    """Measure (see `_measure`), compare with the baseline, judge once, and record it.

    The comparison depends on the baseline, which changes without the inputs changing
    (a publication, an `--accept`), and the verdict on settings the inputs do not cover
    (`on_regression`, `known_items.*`), so a reused report is compared and judged afresh;
    the verdict is stored with the rule it was judged by (`verdict_rule`), and the
    record is rewritten only when the verdict or that rule differs from the stored ones.
    `run_id`: the Dagster run evaluating, kept in the record so a publish can link to it.
    """
    from brain_pipeline.evaluation import eval_record
    from brain_pipeline.evaluation.baseline import compare_with_baseline
    from brain_pipeline.evaluation.bootstrap import figure_intervals
    from brain_pipeline.evaluation.reports import report_markdown
    from brain_pipeline.evaluation.verdict import EvaluationVerdict, judge
    from brain_pipeline.evaluation.verdict_rule import rule_of

    measured = _measure(cfg, store_dir, fixture, warn, progress, reuse=reuse)
    if isinstance(measured, str):
        return EvaluationOutcome(EvaluationVerdict.unusable(measured))
    report = measured.report
    regression = compare_with_baseline(report, judgement_memory(cfg))
    known = known_items_of(
        cfg, store_dir, measured.layout, measured.inputs, vectors=measured.vectors
    )
    verdict = judge(
        report,
        _applied_thresholds(cfg),
        comparison=regression.comparison,
        agent_retriever=regression.retriever,
        baseline=regression.status,
        on_regression=cfg.evaluation.on_regression,
        evaluation_key=measured.key,
        known_items=known.verdict,
    )
    # Exactly the baselines this verdict was judged against, and today's settings.
    rule = rule_of(
        cfg,
        regression.baseline.key if regression.baseline is not None else None,
        known.baseline_candidate,
        known.baseline_digest,
    )
    outcome = EvaluationOutcome(
        verdict,
        report=report,
        flat_metrics=report.flat_metrics(),
        markdown=report_markdown(report),
        reused=measured.previous is not None,
        evaluated_at=(measured.previous or {}).get("when"),
        record_key=measured.key,
        inputs=measured.inputs,
        intervals=figure_intervals(report.queries),
        regression=regression,
        known_item_run=known,
        rule=rule,
    )
    previous = measured.previous
    if not measured.keep or measured.layout is None:
        return outcome
    if (
        previous is not None
        and previous.get("verdict") == verdict.to_dict()
        and previous.get("rule") == rule.to_dict()
    ):
        return outcome
    stored = {
        "report": report.to_dict(),
        "figures": outcome.flat_metrics,
        "inputs": outcome.inputs,
        "verdict": verdict.to_dict(),
        "known_items_candidate": known.candidate,
        "rule": rule.to_dict(),
    }
    # A reused report keeps when (and in which run) it was evaluated.
    for name in ("when", "run_id"):
        if previous is not None and previous.get(name):
            stored[name] = previous[name]
    if "run_id" not in stored and run_id:
        stored["run_id"] = run_id
    try:
        clock = now or eval_record.utc_now
        saved = eval_record.save(judgement_memory(cfg), measured.key, stored, now=clock)
    except OSError:
        pass  # a read-only store directory: evaluated, just not remembered
    else:
        outcome.evaluated_at = str(saved["when"])
    return outcome


def stored_verdict(record: Mapping[str, Any] | None) -> EvaluationVerdict | None:
    """The verdict kept in an evaluation record; None when there is none or it cannot be
    read (a record written before verdicts were stored, or by another verdict format)."""
    from brain_pipeline.evaluation.verdict import EvaluationVerdict

    data = (record or {}).get("verdict")
    if not isinstance(data, Mapping):
        return None
    try:
        return EvaluationVerdict.from_dict(data)
    except (KeyError, TypeError, ValueError):
        return None


def record_as_baseline(
    cfg: BrainConfig,
    record: Mapping[str, Any],
    *,
    kind: str,
    note: str | None = None,
) -> dict[str, Any]:
    """Make a stored evaluation record both baselines (after a publication, or accepted):
    `baseline.record_baseline`, with the figures' intervals for the history."""
    from brain_pipeline.evaluation.baseline import record_baseline
    from brain_pipeline.evaluation.bootstrap import figure_intervals
    from brain_pipeline.evaluation.runner import EvaluationReport

    report = EvaluationReport.from_dict(record["report"])
    intervals = {n: i.to_list() for n, i in figure_intervals(report.queries).items()}
    return record_baseline(judgement_memory(cfg), record, intervals, kind=kind, note=note)


def known_items_of(
    cfg: BrainConfig,
    store_dir: Path,
    layout: StateLayout | None,
    inputs: Mapping[str, Any],
    warn: Any = None,
    *,
    vectors: tuple[EmbeddingStore | None, QueryEmbedding] | None = None,
) -> KnownItemRun:
    """The known-item check on the store in `store_dir` (see `known_item_run`); `vectors`:
    the store's vectors and query embedder when the labelled evaluation read them (read
    once, and an unreadable file warned about once)."""
    from brain_pipeline.corpus.store import STORE_FILENAME
    from brain_pipeline.corpus.store_reader import open_store_view
    from brain_pipeline.embedding.factory import choose_query_embedder
    from brain_pipeline.embedding.store_file import read_embeddings
    from brain_pipeline.evaluation import eval_record
    from brain_pipeline.evaluation.known_item_gate import KnownItemSettings
    from brain_pipeline.evaluation.known_item_run import run_known_items
    from brain_pipeline.retrieval.view_source import ViewSource

    settings = cfg.evaluation.known_items
    view = open_store_view(store_dir / STORE_FILENAME, layout)
    embeddings = None
    embed = model = None
    if cfg.retrieval.mode == "hybrid" and cfg.effective_provider() != "none":
        if vectors is None:
            embeddings = read_embeddings(store_dir / EMBEDDINGS_FILENAME, warn, mapped=True)
            vectors = embeddings, choose_query_embedder(cfg, embeddings)
        embeddings, choice = vectors
        embed, model = choice.embed, choice.model
    return run_known_items(
        ViewSource(view, layout),
        layout,
        memory=judgement_memory(cfg),
        sample_per_area=settings.sample_per_area,
        settings=KnownItemSettings(settings.max_found_drop, settings.max_area_loss),
        embeddings=embeddings,
        query_embedder=embed,
        query_model=model,
        retrieval_mode=cfg.retrieval.mode,
        candidate=eval_record.inputs_key(inputs),
    )


def accept_evaluation(cfg: BrainConfig, key: str, note: str) -> EvaluationVerdict | None:
    """`eval --accept`: the recorded evaluation `key` becomes the baseline, and its stored
    verdict no longer fails on the regressions it accepted (`EvaluationVerdict.accepting`), so a
    publish of these bytes reads the accepted verdict. None when `key` is not recorded."""
    from brain_pipeline.evaluation import eval_record

    record = eval_record.lookup(judgement_memory(cfg), key)
    verdict = stored_verdict(record)
    if record is None or verdict is None:
        return None
    accepted = verdict.accepting(note)
    updated = eval_record.save(
        judgement_memory(cfg), key, {**record, "verdict": accepted.to_dict()}
    )
    record_as_baseline(cfg, updated, kind="accepted", note=note)
    return accepted


def _measure(
    cfg: BrainConfig,
    store_dir: Path,
    fixture: Path | None,
    warn: Any,
    progress: EvaluationProgress | None,
    *,
    reuse: bool,
) -> _Measured | str:
    """The report on the store (and vectors) in `store_dir`, or why there can be none.

    The store is read through the memory-mapped StoreView and BM25 indexes come from the
    cache in `<store_dir>/state/`; when the inputs (store, embeddings and fixture
    digests, thresholds, code version, query provider and model) match a stored record,
    its report is returned and nothing is re-evaluated. `progress` hears about every
    query of every retriever (the CLI prints on a clock).
    """
    from brain_pipeline.embedding.factory import choose_query_embedder
    from brain_pipeline.embedding.store_file import read_embeddings
    from brain_pipeline.evaluation import eval_record
    from brain_pipeline.evaluation.baseline import origin_lookup
    from brain_pipeline.evaluation.runner import EvaluationReport, evaluate
    from brain_pipeline.retrieval.view_source import ViewSource

    opened = _open(cfg, store_dir, fixture)
    if isinstance(opened, str):
        return opened
    layout, view, loaded, inputs = opened
    key = inputs.key()
    if reuse and layout is not None:
        record = eval_record.lookup(judgement_memory(cfg), key)
        if record is not None and isinstance(record.get("report"), dict):
            try:
                report = EvaluationReport.from_dict(record["report"])
            except (KeyError, TypeError, ValueError):
                pass  # a record from another version: evaluate again (and overwrite it)
            else:
                stored_inputs = record.get("inputs")
                return _Measured(
                    report,
                    layout,
                    key,
                    dict(stored_inputs) if isinstance(stored_inputs, dict) else asdict(inputs),
                    record,
                    keep=True,
                )

    embeddings = read_embeddings(store_dir / EMBEDDINGS_FILENAME, warn, mapped=True)
    choice = choose_query_embedder(cfg, embeddings)
    report = evaluate(
        ViewSource(view, layout),
        loaded,
        embeddings=embeddings,
        query_embedder=choice.embed,
        query_model=choice.model,
        progress=progress,
    )
    if report.stale_ids:
        # Name the file each stale label's text was in (from the chunk history), so the
        # verdict says where to look, not only which id.
        origins = origin_lookup(judgement_memory(cfg))(report.stale_ids)
        report.stale_sources = {i: o.source for i, o in origins.items() if o.source}
    if choice.note:
        report.notes.append(f"hybrid runs without query vectors: {choice.note}")
    if "hybrid" in cfg.evaluation.thresholds and "hybrid" not in _applied_thresholds(cfg):
        report.notes.append("hybrid thresholds not applied: embedding.provider is 'none'")
    # A query that fell back because the provider failed (not by configuration) may
    # answer differently next time: such a report is not kept for reuse.
    transient = not choice.note and any(s.fallback_queries for s in report.retrievers)
    return _Measured(report, layout, key, asdict(inputs), None, not transient, (embeddings, choice))


def _applied_thresholds(cfg: BrainConfig) -> dict[str, dict[str, Any]]:
    """The configured bounds that are judged (hybrid's are not without vectors), as the
    plain JSON the evaluation's inputs digest, by retriever name."""
    thresholds = {str(n): b.model_dump() for n, b in cfg.evaluation.thresholds.items()}
    if cfg.effective_provider() == "none":
        # No vectors by choice: hybrid *is* BM25, so only BM25's floors can be judged.
        thresholds.pop("hybrid", None)
    return thresholds


def _open(
    cfg: BrainConfig, store_dir: Path, fixture: Path | None
) -> tuple[StateLayout | None, StoreView, Fixture, EvalInputs] | str:
    """The store, its cache layout, the fixture and the inputs an evaluation of them is
    recorded under; or why there can be none."""
    from brain_pipeline.corpus.store import STORE_FILENAME
    from brain_pipeline.corpus.store_reader import cache_layout, open_store_view
    from brain_pipeline.evaluation import eval_record
    from brain_pipeline.evaluation.fixture.model import FixtureError, parse_fixture

    store_file = store_dir / STORE_FILENAME
    if not store_file.exists():
        return f"no store at {store_file}: materialise knowledge_store first"
    # The build directory remembers evaluations (and caches indexes) in its state/; a
    # store elsewhere is evaluated from scratch unless it has a state/ of its own.
    layout = cache_layout(store_dir, cfg.build_dir)
    fixture_path = Path(fixture or cfg.evaluation.fixture)
    try:
        # Read once: the digest in the record is of exactly the bytes evaluated.
        fixture_bytes = fixture_path.read_bytes()
        # No labels yet is allowed: the known-item check is then the gate.
        loaded = parse_fixture(fixture_bytes, source=str(fixture_path), allow_empty=True)
    except FileNotFoundError:
        return f"fixture unusable: {fixture_path}: fixture file not found"
    except OSError as exc:
        return f"fixture unusable: {fixture_path}: cannot read fixture: {exc.strerror}"
    except FixtureError as exc:
        return f"fixture unusable: {exc}"
    view = open_store_view(store_file, layout)
    provider = cfg.effective_provider()
    inputs = eval_record.EvalInputs(
        store_sha256=view.sha256,
        embeddings_sha256=eval_record.known_sha256(layout, store_dir / EMBEDDINGS_FILENAME),
        fixture_sha256=sha256_hex(fixture_bytes),
        thresholds=dict(sorted(_applied_thresholds(cfg).items())),
        provider=provider,
        model=cfg.effective_model() or None,
        query_embedder=f"{provider}; gemini key set: {bool(cfg.gemini_api_key())}",
    )
    return layout, view, loaded, inputs


def evaluation_inputs(
    cfg: BrainConfig, store_dir: Path, fixture: Path | None = None
) -> EvalInputs | None:
    """The inputs (and so `.key()`) an evaluation of `store_dir` would be recorded under.

    For a publish gate: `eval_record.lookup(memory, inputs.key())` is the outcome for
    exactly the bytes about to be published. None when the store or fixture is missing
    or unusable. Cheap when nothing changed: the store's sha256 comes from its sidecar
    index and the embeddings' from the record's stat-keyed memo.
    """
    try:
        opened = _open(cfg, store_dir, fixture)
    except OSError:
        return None
    return None if isinstance(opened, str) else opened[3]


def judgement_memory(cfg: BrainConfig) -> Memory:
    """The ledger and blobs the judgements live in (`evaluation.judgements`)."""
    from brain_pipeline.config import memory_of
    from brain_pipeline.evaluation.judgements import ready

    return ready(memory_of(cfg))
