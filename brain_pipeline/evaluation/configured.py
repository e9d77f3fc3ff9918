"""The evaluation wired to a store directory and the configuration (still no Dagster).

A store directory holds knowledge-store.json and, optionally, embeddings.bin. Queries
are embedded with the configured provider only when that provider made the store's
vectors; every other case searches lexically and says why, as the agent would.
`brain-pipeline eval`, `brain-pipeline search` and the `retrieval_eval` asset check all
go through here, so they agree on what "hybrid" means for a given build.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain_pipeline.corpus.store import STORE_FILENAME, Chunk, load_store
from brain_pipeline.evaluation.fixture import Fixture
from brain_pipeline.evaluation.runner import RETRIEVERS, EvaluationReport, run_evaluation
from brain_pipeline.retrieval.vectors import EmbeddingStore, NotAnEmbeddingStore, decode_embeddings

if TYPE_CHECKING:
    from brain_pipeline.config import BrainConfig

EMBEDDINGS_FILENAME = "embeddings.bin"


class StoreNotFoundError(FileNotFoundError):
    """No knowledge-store.json where the store was expected."""


@dataclass
class OpenedStore:
    """A store directory's chunks, its vectors when readable, and what was wrong."""

    directory: Path
    chunks: list[Chunk]
    embeddings: EmbeddingStore | None
    warnings: list[str] = field(default_factory=list)


def open_store(path: Path | str) -> OpenedStore:
    """Read a store directory (or a knowledge-store.json path and its neighbour).

    An embeddings.bin that is not PATBEMB1 is ignored with a warning, never misread.
    """
    target = Path(path)
    store_file = target / STORE_FILENAME if target.is_dir() else target
    if not store_file.is_file():
        raise StoreNotFoundError(
            f"no {STORE_FILENAME} at {store_file}; build it first (brain-pipeline materialize) "
            "or pass --store DIR"
        )
    chunks = load_store(store_file)
    directory = store_file.parent
    warnings: list[str] = []
    embeddings: EmbeddingStore | None = None
    vectors_file = directory / EMBEDDINGS_FILENAME
    if vectors_file.is_file():
        try:
            embeddings = decode_embeddings(vectors_file.read_bytes())
        except NotAnEmbeddingStore as exc:
            warnings.append(f"ignoring {vectors_file}: {exc}; searching lexically")
    return OpenedStore(directory, chunks, embeddings, warnings)


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
    from brain_pipeline.embedding.providers import EmbeddingError, make_embedder

    try:
        embedder = make_embedder(
            provider,
            model=cfg.embedding.model,
            dimension=embeddings.dim,
            api_key=cfg.gemini_api_key(),
            texts_per_minute=cfg.embedding.texts_per_minute,
            requests_per_minute=cfg.embedding.requests_per_minute,
            max_attempts=cfg.embedding.max_attempts,
            batch_size=cfg.embedding.batch_size,
            local_model=cfg.embedding.local_model,
        )
    except (EmbeddingError, ValueError) as exc:
        return QueryEmbedding(None, None, f"cannot embed queries with {provider}: {exc}")
    if embedder is None:
        return QueryEmbedding(None, None, "the embedding provider is 'none'")
    return QueryEmbedding(embedder.embed_query, embedder.name)


def evaluate_store(
    cfg: BrainConfig,
    store: Path | str | None = None,
    fixture: Fixture | Path | str | None = None,
    *,
    retrievers: Sequence[str] = RETRIEVERS,
) -> tuple[EvaluationReport, list[str]]:
    """Evaluate a built store with the configured fixture, thresholds and query embedder.

    `store` defaults to cfg.build_dir, `fixture` to cfg.evaluation.fixture. Returns
    `(report, failures)`; warnings (unreadable vectors, why hybrid is lexical) become
    report notes. Raises StoreNotFoundError / FixtureError when inputs are unusable.
    """
    opened = open_store(store if store is not None else cfg.build_dir)
    choice = choose_query_embedder(cfg, opened.embeddings)
    report, failures = run_evaluation(
        opened.chunks,
        fixture if fixture is not None else cfg.evaluation.fixture,
        cfg.evaluation.thresholds,
        embeddings=opened.embeddings,
        query_embedder=choice.embed,
        query_model=choice.model,
        retrievers=retrievers,
    )
    report.notes.extend(opened.warnings)
    if choice.note and any(name in ("hybrid", "dense") for name in retrievers):
        report.notes.append(f"queries were not embedded: {choice.note}")
    return report, failures
