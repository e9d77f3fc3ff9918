"""Configuration -> core wiring shared by the Dagster layer and the CLI (no Dagster import).

Each function here is the one code path for a behaviour that both the assets and the
command line need: which embedder the configuration asks for, and how a build directory
is evaluated against the fixture.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain_pipeline.config import BrainConfig
from brain_pipeline.retrieval.vectors import EMBEDDINGS_FILENAME
from brain_pipeline.utils.digest import sha256_hex

if TYPE_CHECKING:
    from brain_pipeline.embedding.protocol import Embedder
    from brain_pipeline.evaluation.baseline import Baseline
    from brain_pipeline.evaluation.compare import Comparison, OriginLookup
    from brain_pipeline.evaluation.record import EvalInputs
    from brain_pipeline.evaluation.runner import EvaluationProgress, EvaluationReport
    from brain_pipeline.retrieval.vectors import EmbeddingStore
    from brain_pipeline.state.layout import StateLayout


def embedder_for(
    cfg: BrainConfig, *, api_key: str | None = None, base_url: str | None = None
) -> Embedder | None:
    """The embedder the configuration selects (`auto` resolved), or None for `none`.

    `api_key`/`base_url` are the Gemini client's settings when a caller holds them (the
    Dagster resource); otherwise the key comes from the environment and the endpoint from
    the SDK's own resolution (GOOGLE_GEMINI_BASE_URL).
    """
    from brain_pipeline.embedding.factory import make_embedder

    emb = cfg.embedding
    return make_embedder(
        cfg.effective_provider(),
        model=emb.model,
        dimension=emb.dimension,
        api_key=api_key or cfg.gemini_api_key(),
        base_url=base_url,
        texts_per_minute=emb.texts_per_minute,
        requests_per_minute=emb.requests_per_minute,
        max_attempts=emb.max_attempts,
        batch_size=emb.batch_size,
        local_model=emb.local_model,
    )


@dataclass
class EvaluationOutcome:
    """What the blocking check and `brain-pipeline eval` report."""

    failures: list[str]
    stale_ids: list[str] = field(default_factory=list)
    flat_metrics: dict[str, float] = field(default_factory=dict)
    markdown: str = ""
    report: Any = None
    thresholds: list[Any] = field(default_factory=list)
    """ThresholdRow per configured bound that was applied (value, bound, margin)."""
    reused: bool = False
    """True when the outcome is the stored one for identical inputs (nothing re-ran)."""
    evaluated_at: str | None = None
    """ISO-8601 UTC time the evaluation actually ran (the earlier run when `reused`)."""
    record_key: str | None = None
    """Digest of the inputs (evaluation/record.py); None when nothing could be evaluated."""
    inputs: dict[str, Any] = field(default_factory=dict)
    """The digests the key covers: store, embeddings, fixture, thresholds, code, provider."""
    intervals: dict[str, Any] = field(default_factory=dict)
    """{"bm25.ndcg_at_10": bootstrap.Interval, ...}: 95% intervals over queries."""
    regression: RegressionOutcome | None = None
    """The comparison with the baseline (None when nothing could be evaluated)."""


@dataclass(frozen=True)
class QueryEmbedding:
    """How queries get vectors: `embed` and its model, or None and `note` saying why not."""

    embed: Callable[[str], Any] | None
    model: str | None
    note: str | None = None


def choose_query_embedder(cfg: BrainConfig, embeddings: EmbeddingStore | None) -> QueryEmbedding:
    """The configured provider's query embedder, if it made `embeddings`; else why not.

    Nothing is loaded or contacted when the answer is "lexical".
    """
    if embeddings is None:
        return QueryEmbedding(None, None, f"no readable {EMBEDDINGS_FILENAME} in the store")
    provider = cfg.effective_provider()
    if provider == "none":
        return QueryEmbedding(None, None, "the embedding provider is 'none'")
    expected = cfg.effective_model()
    if embeddings.model != expected:
        return QueryEmbedding(
            None,
            None,
            f"the store's vectors were made by {embeddings.model!r}, but the configured "
            f"{provider} provider embeds queries with {expected!r}",
        )
    if provider == "gemini" and not cfg.gemini_api_key():
        return QueryEmbedding(None, None, "no Gemini API key (set GEMINI_API_KEY)")
    from brain_pipeline.embedding.protocol import EmbeddingError

    try:
        embedder = embedder_for(cfg)
    except (EmbeddingError, ValueError) as exc:
        return QueryEmbedding(None, None, f"cannot embed queries with {provider}: {exc}")
    if embedder is None:
        return QueryEmbedding(None, None, "the embedding provider is 'none'")
    return QueryEmbedding(embedder.embed_query, embedder.name)


AGENT_RETRIEVERS: tuple[str, ...] = ("hybrid", "bm25")
"""The retriever the agent answers with: hybrid (which is BM25 without vectors), else BM25."""


@dataclass
class RegressionOutcome:
    """The evaluation against the baseline: the comparison and what the gate makes of it."""

    comparison: Comparison | None
    baseline: Baseline | None
    status: str
    """One line: which baseline, how many queries were compared, or why there is none."""
    retriever: str | None = None
    """The agent's retriever, whose new misses are gated."""
    failures: list[str] = field(default_factory=list)
    """New misses when on_regression is block (they fail the check)."""
    warnings: list[str] = field(default_factory=list)
    """New misses when on_regression is warn, and anything the comparison could not do."""


def compare_with_baseline(
    cfg: BrainConfig, report: EvaluationReport, layout: StateLayout | None = None
) -> RegressionOutcome:
    """Compare `report` with the build directory's baseline and apply on_regression.

    Cheap for an evaluation that is otherwise reused: a JSON read of the baseline, a
    dictionary join over the queries, and one chunk-history query per chunk that
    entered a changed query's top 10.
    """
    from brain_pipeline.evaluation.baseline import load_baseline
    from brain_pipeline.evaluation.compare import compare
    from brain_pipeline.state.layout import StateLayout

    layout = layout or StateLayout.of(cfg.build_dir)
    found = load_baseline(layout)
    if found.baseline is None:
        return RegressionOutcome(None, None, str(found.reason))
    baseline = found.baseline
    comparison = compare(
        report.queries, baseline.report.queries, _origin_lookup(layout, baseline.evaluated_at)
    )
    if comparison.shared == 0:
        return RegressionOutcome(
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
    outcome = RegressionOutcome(comparison, baseline, status, retriever)
    if retriever is None:
        outcome.warnings.append("no agent retriever (hybrid or bm25) evaluated: nothing gated")
        return outcome
    for change in comparison.new_misses(retriever):
        message = f"regression: {change.describe()}"
        if cfg.evaluation.on_regression == "block":
            outcome.failures.append(
                message + " (accept with `brain-pipeline eval --accept --note ...`)"
            )
        else:
            outcome.warnings.append(message)
    return outcome


def _origin_lookup(layout: StateLayout, since: str) -> OriginLookup:
    """Where entered chunks come from, per the chunk history; "new" = first seen after
    the baseline was evaluated. A history that cannot be read leaves origins unknown."""
    from datetime import datetime

    from brain_pipeline.corpus.history import HistoryError, lookup_many
    from brain_pipeline.evaluation.compare import ChunkOrigin

    def parse(text: str) -> datetime | None:
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None

    baseline_time = parse(since)

    def origins(ids: Sequence[str]) -> dict[str, ChunkOrigin]:
        try:
            entries = lookup_many(layout, ids)
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
    """Evaluate (see `_evaluate_store_dir`), then add intervals and the baseline comparison.

    The comparison depends on the baseline, which changes without the inputs changing
    (a publication, an `--accept`), so it is made afresh even for a reused outcome and
    never stored in the evaluation record: a new miss of the agent's retriever is added
    to `failures` when `evaluation.on_regression` is block.
    """
    from brain_pipeline.evaluation.bootstrap import figure_intervals
    from brain_pipeline.evaluation.runner import EvaluationReport

    outcome = _evaluate_store_dir(
        cfg, store_dir, fixture, warn, progress, reuse=reuse, now=now, run_id=run_id
    )
    if isinstance(outcome.report, EvaluationReport):
        outcome.intervals = figure_intervals(outcome.report.queries)
        outcome.regression = compare_with_baseline(cfg, outcome.report)
        outcome.failures.extend(outcome.regression.failures)
    return outcome


def regression_failures(cfg: BrainConfig, record: Mapping[str, Any]) -> list[str]:
    """The blocking regressions of a stored evaluation record (for a publish gate)."""
    from brain_pipeline.evaluation.runner import EvaluationReport

    try:
        report = EvaluationReport.from_dict(record["report"])
    except (KeyError, TypeError, ValueError):
        return []  # the gate's own check (passed or not) judges an unreadable record
    return compare_with_baseline(cfg, report).failures


def record_as_baseline(
    cfg: BrainConfig,
    record: Mapping[str, Any],
    *,
    kind: str,
    note: str | None = None,
    layout: StateLayout | None = None,
) -> dict[str, Any]:
    """Make a stored evaluation record the baseline (after a publication, or accepted)."""
    from brain_pipeline.evaluation.baseline import record_baseline
    from brain_pipeline.evaluation.bootstrap import figure_intervals
    from brain_pipeline.evaluation.runner import EvaluationReport
    from brain_pipeline.state.layout import StateLayout

    report = EvaluationReport.from_dict(record["report"])
    intervals = {n: i.to_list() for n, i in figure_intervals(report.queries).items()}
    return record_baseline(
        layout or StateLayout.of(cfg.build_dir), record, intervals, kind=kind, note=note
    )


def _evaluate_store_dir(
    cfg: BrainConfig,
    store_dir: Path,
    fixture: Path | None,
    warn: Any,
    progress: EvaluationProgress | None,
    *,
    reuse: bool,
    now: Callable[[], Any] | None,
    run_id: str | None,
) -> EvaluationOutcome:
    """Evaluate the store (and vectors) in `store_dir` against the fixture and thresholds.

    The single code path behind the blocking `retrieval_eval` check and `brain-pipeline
    eval`: an empty store, a stale fixture or a missed threshold are failures. The store
    is read through the memory-mapped StoreView and BM25 indexes come from the cache in
    `<store_dir>/state/`; when the inputs (store, embeddings and fixture digests,
    thresholds, code version, query provider and model) match a stored record, that
    outcome is returned with `reused=True` and nothing is re-evaluated.
    `progress` hears about every query of every retriever (the CLI prints on a clock).
    `run_id`: the Dagster run evaluating, kept in the record so a publish can link to it.
    """
    from brain_pipeline.corpus.store import STORE_FILENAME
    from brain_pipeline.corpus.store_reader import cache_layout, open_store_view
    from brain_pipeline.embedding.store_file import read_embeddings
    from brain_pipeline.evaluation import record as eval_record
    from brain_pipeline.evaluation.fixture import FixtureError, parse_fixture
    from brain_pipeline.evaluation.runner import (
        EvaluationReport,
        ThresholdRow,
        check_thresholds,
        run_evaluation,
        threshold_rows,
    )
    from brain_pipeline.retrieval.view_source import ViewSource

    store_file = store_dir / STORE_FILENAME
    if not store_file.exists():
        return EvaluationOutcome(
            failures=[f"no store at {store_file}: materialise knowledge_store first"]
        )
    # The build directory remembers evaluations (and caches indexes) in its state/; a
    # store elsewhere is evaluated from scratch unless it has a state/ of its own.
    layout = cache_layout(store_dir, cfg.build_dir)
    fixture_path = Path(fixture or cfg.evaluation.fixture)
    try:
        # Read once: the digest in the record is of exactly the bytes evaluated.
        fixture_bytes = fixture_path.read_bytes()
        loaded = parse_fixture(fixture_bytes, source=str(fixture_path))
    except FileNotFoundError:
        return EvaluationOutcome(
            failures=[f"fixture unusable: {fixture_path}: fixture file not found"]
        )
    except OSError as exc:
        return EvaluationOutcome(
            failures=[f"fixture unusable: {fixture_path}: cannot read fixture: {exc.strerror}"]
        )
    except FixtureError as exc:
        return EvaluationOutcome(failures=[f"fixture unusable: {exc}"])
    view = open_store_view(store_file, layout)
    embeddings_file = store_dir / EMBEDDINGS_FILENAME
    thresholds = _applied_thresholds(cfg)
    inputs = _inputs(cfg, view.sha256, layout, embeddings_file, fixture_bytes)
    key = inputs.key()
    if reuse and layout is not None:
        record = eval_record.lookup(layout, key)
        if record is not None and isinstance(record.get("report"), dict):
            try:
                return EvaluationOutcome(
                    failures=list(record["failures"]),
                    stale_ids=list(record["stale_ids"]),
                    flat_metrics=dict(record["figures"]),
                    markdown=str(record["markdown"]),
                    report=EvaluationReport.from_dict(record["report"]),
                    thresholds=[ThresholdRow(**row) for row in record["thresholds"]],
                    reused=True,
                    evaluated_at=record.get("when"),
                    record_key=key,
                    inputs=dict(record["inputs"]),
                )
            except (KeyError, TypeError, ValueError):
                pass  # a record from another version: evaluate again (and overwrite it)

    embeddings = read_embeddings(embeddings_file, warn, mapped=True)
    choice = choose_query_embedder(cfg, embeddings)
    report, failures = run_evaluation(
        ViewSource(view, layout),
        loaded,
        thresholds,
        embeddings=embeddings,
        query_embedder=choice.embed,
        query_model=choice.model,
        progress=progress,
    )
    if report.stale_ids:
        # Name the file each stale label's text was in (from the chunk history), so the
        # message says where to look, not only which id.
        report.stale_sources = _stale_sources(cfg, report.stale_ids)
        failures = check_thresholds(report, thresholds)
    if choice.note:
        report.notes.append(f"hybrid runs without query vectors: {choice.note}")
    if "hybrid" in cfg.evaluation.thresholds and "hybrid" not in thresholds:
        report.notes.append("hybrid thresholds not applied: embedding.provider is 'none'")
    outcome = EvaluationOutcome(
        failures=list(failures),
        stale_ids=list(getattr(report, "stale_ids", []) or []),
        flat_metrics=report.flat_metrics(),
        markdown=report.to_markdown(),
        report=report,
        thresholds=threshold_rows(report, thresholds),
        record_key=key,
        inputs=asdict(inputs),
    )
    # A query that fell back because the provider failed (not by configuration) may
    # answer differently next time: such an outcome is not kept for reuse.
    transient = not choice.note and any(s.fallback_queries for s in report.retrievers)
    if not transient and layout is not None:
        stored = {
            "passed": not outcome.failures,
            "failures": outcome.failures,
            "stale_ids": outcome.stale_ids,
            "figures": outcome.flat_metrics,
            "markdown": outcome.markdown,
            "report": report.to_dict(),
            "thresholds": [asdict(row) for row in outcome.thresholds],
            "inputs": outcome.inputs,
            **({"run_id": run_id} if run_id else {}),
        }
        try:
            saved = eval_record.save(layout, key, stored, now=now or eval_record.utc_now)
        except OSError:
            pass  # a read-only store directory: evaluated, just not remembered
        else:
            outcome.evaluated_at = str(saved["when"])
    return outcome


def _applied_thresholds(cfg: BrainConfig) -> dict[Any, Any]:
    """The configured bounds that are judged (hybrid's are not without vectors)."""
    thresholds: dict[Any, Any] = dict(cfg.evaluation.thresholds)
    if cfg.effective_provider() == "none":
        # No vectors by choice: hybrid *is* BM25, so only BM25's floors can be judged.
        thresholds.pop("hybrid", None)
    return thresholds


def _inputs(
    cfg: BrainConfig,
    store_sha256: str,
    layout: StateLayout | None,
    embeddings_file: Path,
    fixture_bytes: bytes,
) -> EvalInputs:
    from brain_pipeline.evaluation import record as eval_record

    provider = cfg.effective_provider()
    return eval_record.EvalInputs(
        store_sha256=store_sha256,
        embeddings_sha256=eval_record.known_sha256(layout, embeddings_file),
        fixture_sha256=sha256_hex(fixture_bytes),
        thresholds={n: _plain(b) for n, b in sorted(_applied_thresholds(cfg).items())},
        provider=provider,
        model=cfg.effective_model() or None,
        query_embedder=f"{provider}; gemini key set: {bool(cfg.gemini_api_key())}",
    )


def evaluation_inputs(
    cfg: BrainConfig, store_dir: Path, fixture: Path | None = None
) -> EvalInputs | None:
    """The inputs (and so `.key()`) an evaluation of `store_dir` would be recorded under.

    For a publish gate: `eval_record.lookup(layout, inputs.key())` is the outcome for
    exactly the bytes about to be published. None when the store or fixture is missing.
    Cheap when nothing changed: the store's sha256 comes from its sidecar index and the
    embeddings' from the record's stat-keyed memo.
    """
    from brain_pipeline.corpus.store import STORE_FILENAME
    from brain_pipeline.corpus.store_reader import cache_layout, open_store_view

    store_file = store_dir / STORE_FILENAME
    try:
        fixture_bytes = Path(fixture or cfg.evaluation.fixture).read_bytes()
        layout = cache_layout(store_dir, cfg.build_dir)
        view = open_store_view(store_file, layout)
    except OSError:
        return None
    return _inputs(cfg, view.sha256, layout, store_dir / EMBEDDINGS_FILENAME, fixture_bytes)


def _plain(bounds: Any) -> Any:
    """A threshold entry as plain JSON (pydantic model or mapping)."""
    if hasattr(bounds, "model_dump"):
        return bounds.model_dump()
    return dict(bounds) if isinstance(bounds, dict) else bounds


def _stale_sources(cfg: BrainConfig, ids: list[str]) -> dict[str, str]:
    """id -> the source file the chunk history last saw it in (unknown ids left out)."""
    from brain_pipeline.corpus.history import HistoryError, lookup_many
    from brain_pipeline.state.layout import StateLayout

    try:
        found = lookup_many(StateLayout.of(cfg.build_dir), ids)
    except (HistoryError, OSError):
        return {}
    return {chunk: entry.source for chunk, entry in found.items()}


def evaluate_build(cfg: BrainConfig, run_id: str | None = None) -> EvaluationOutcome:
    """Evaluate the build directory's store and vectors (for the blocking check)."""
    return evaluate_store_dir(cfg, cfg.build_dir, run_id=run_id)
