"""Configuration -> core wiring shared by the Dagster layer and the CLI (no Dagster import).

Each function here is the one code path for a behaviour that both the assets and the
command line need: which embedder the configuration asks for, and how a build directory
is evaluated against the fixture.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain_pipeline.config import BrainConfig
from brain_pipeline.embedding.store_file import read_embeddings
from brain_pipeline.retrieval.vectors import EMBEDDINGS_FILENAME

if TYPE_CHECKING:
    from brain_pipeline.embedding.providers import Embedder
    from brain_pipeline.evaluation.runner import EvaluationProgress
    from brain_pipeline.retrieval.vectors import EmbeddingStore


def embedder_for(cfg: BrainConfig) -> Embedder | None:
    """The embedder the configuration selects (`auto` resolved), or None for `none`."""
    from brain_pipeline.embedding.providers import make_embedder

    emb = cfg.embedding
    return make_embedder(
        cfg.effective_provider(),
        model=emb.model,
        dimension=emb.dimension,
        api_key=cfg.gemini_api_key(),
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
    from brain_pipeline.embedding.providers import EmbeddingError

    try:
        embedder = embedder_for(cfg)
    except (EmbeddingError, ValueError) as exc:
        return QueryEmbedding(None, None, f"cannot embed queries with {provider}: {exc}")
    if embedder is None:
        return QueryEmbedding(None, None, "the embedding provider is 'none'")
    return QueryEmbedding(embedder.embed_query, embedder.name)


def evaluate_store_dir(
    cfg: BrainConfig,
    store_dir: Path,
    fixture: Path | None = None,
    warn: Any = None,
    progress: EvaluationProgress | None = None,
) -> EvaluationOutcome:
    """Evaluate the store (and vectors) in `store_dir` against the fixture and thresholds.

    The single code path behind the blocking `retrieval_eval` check and `brain-pipeline
    eval`: an empty store, a stale fixture or a missed threshold are failures.
    `progress` hears about every query of every retriever (the CLI prints on a clock).
    """
    from brain_pipeline.corpus.store import STORE_FILENAME, load_store
    from brain_pipeline.evaluation.fixture import FixtureError
    from brain_pipeline.evaluation.runner import check_thresholds, run_evaluation, threshold_rows

    store_file = store_dir / STORE_FILENAME
    if not store_file.exists():
        return EvaluationOutcome(
            failures=[f"no store at {store_file}: materialise knowledge_store first"]
        )
    chunks = load_store(store_file)
    embeddings = read_embeddings(store_dir / EMBEDDINGS_FILENAME, warn=warn)
    choice = choose_query_embedder(cfg, embeddings)
    thresholds = dict(cfg.evaluation.thresholds)
    if cfg.effective_provider() == "none":
        # No vectors by choice: hybrid *is* BM25, so only BM25's floors can be judged.
        thresholds.pop("hybrid", None)
    try:
        report, failures = run_evaluation(
            chunks,
            fixture or cfg.evaluation.fixture,
            thresholds,
            embeddings=embeddings,
            query_embedder=choice.embed,
            query_model=choice.model,
            progress=progress,
        )
    except (FixtureError, FileNotFoundError) as exc:
        return EvaluationOutcome(failures=[f"fixture unusable: {exc}"])
    if report.stale_ids:
        # Name the file each stale label's text was in (from the chunk history), so the
        # message says where to look, not only which id.
        report.stale_sources = _stale_sources(cfg, report.stale_ids)
        failures = check_thresholds(report, thresholds)
    if choice.note:
        report.notes.append(f"hybrid runs without query vectors: {choice.note}")
    if "hybrid" in cfg.evaluation.thresholds and "hybrid" not in thresholds:
        report.notes.append("hybrid thresholds not applied: embedding.provider is 'none'")
    return EvaluationOutcome(
        failures=list(failures),
        stale_ids=list(getattr(report, "stale_ids", []) or []),
        flat_metrics=report.flat_metrics(),
        markdown=report.to_markdown(),
        report=report,
        thresholds=threshold_rows(report, thresholds),
    )


def _stale_sources(cfg: BrainConfig, ids: list[str]) -> dict[str, str]:
    """id -> the source file the chunk history last saw it in (unknown ids left out)."""
    from brain_pipeline.state.history import HistoryError, lookup_many
    from brain_pipeline.state.layout import StateLayout

    try:
        found = lookup_many(StateLayout.of(cfg.build_dir), ids)
    except (HistoryError, OSError):
        return {}
    return {chunk: entry.source for chunk, entry in found.items()}


def evaluate_build(cfg: BrainConfig, warn: Any = None) -> EvaluationOutcome:
    """Evaluate the build directory's store and vectors."""
    return evaluate_store_dir(cfg, cfg.build_dir, warn=warn)
