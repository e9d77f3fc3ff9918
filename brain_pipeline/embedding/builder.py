"""Incremental, resumable build of embeddings.bin.

A chunk's id is the hash of its content and only the content is embedded, so a vector
stays valid for as long as its id exists and the model and dimension are unchanged.
The build therefore reuses vectors by id from the previous embeddings.bin and from an
interrupted run's checkpoint, embeds only what is missing, drops the vectors of chunks
that are gone, and writes one vector per live chunk in store order.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from brain_pipeline.corpus.store import Chunk
from brain_pipeline.embedding.checkpoint import (
    CheckpointWriter,
    NotACheckpoint,
    checkpoint_path,
    read_checkpoint,
)
from brain_pipeline.embedding.protocol import (
    Embedder,
    EmbeddingError,
    EmbeddingUnavailable,
    ReportsStats,
    embed_with_progress,
)
from brain_pipeline.embedding.store_file import read_embeddings
from brain_pipeline.retrieval.vectors import (
    EmbeddingStore,
    encode_embeddings,
    quantize,
)
from brain_pipeline.utils.atomic import write_if_changed

Progress = Callable[[int, int], None]
Log = Callable[[str], None]
Int8Row = npt.NDArray[np.int8]


@dataclass
class EmbeddingReport:
    """Figures of one build, for Dagster metadata and the CLI."""

    model: str
    dimension: int
    chunks: int = 0
    reused: int = 0
    resumed: int = 0  # of `reused`, how many came from an interrupted run's checkpoint
    embedded: int = 0
    pruned: int = 0
    missing: int = 0
    rebuilt_because: str = ""
    requests: int = 0
    rate_limited: int = 0
    retries: int = 0
    waited_seconds: float = 0.0
    embed_seconds: float = 0.0
    written: bool = False
    complete: bool = True
    warnings: list[str] = field(default_factory=list)

    @property
    def coverage(self) -> float:
        """Percentage of live chunks that have a vector in the file."""
        return 100.0 if self.chunks == 0 else 100.0 * (self.chunks - self.missing) / self.chunks

    @property
    def texts_per_minute(self) -> float:
        """Texts embedded per minute of embedding wall time (waits included)."""
        return 0.0 if self.embed_seconds <= 0 else 60.0 * self.embedded / self.embed_seconds

    def as_metadata(self) -> dict[str, float | int | str]:
        out: dict[str, float | int | str] = {}
        for key, value in asdict(self).items():
            if key == "warnings":
                out[key] = "; ".join(value)
            elif isinstance(value, bool):
                out[key] = str(value).lower()
            elif isinstance(value, float):
                out[key] = round(value, 3)
            else:
                out[key] = value
        out["coverage"] = round(self.coverage, 2)
        out["texts_per_minute"] = round(self.texts_per_minute, 1)
        return out


class EmbeddingCancelled(KeyboardInterrupt):
    """Ctrl-C during a build: still an interrupt, carrying what the checkpoint holds.

    `saved` counts the new vectors in the checkpoint (this run's and an earlier
    interrupted run's), which the next run resumes from.
    """

    def __init__(self, saved: int) -> None:
        super().__init__(f"interrupted; {saved} texts saved, the next run resumes from there")
        self.saved = saved


class EmbeddingBuildInterrupted(EmbeddingError):
    """The provider failed mid-build. Progress is in the checkpoint; `report` says how far."""

    def __init__(self, message: str, report: EmbeddingReport) -> None:
        super().__init__(message)
        self.report = report


def _live_chunks(chunks: Sequence[Chunk]) -> list[Chunk]:
    """Store order, first occurrence of each id (the store is already de-duplicated)."""
    seen: set[str] = set()
    live = []
    for chunk in chunks:
        if chunk.id not in seen:
            seen.add(chunk.id)
            live.append(chunk)
    return live


def _read_previous(out_path: Path, report: EmbeddingReport, log: Log) -> EmbeddingStore | None:
    """The previous file, or None when it is absent or not a readable PATBEMB1 store."""

    def unreadable(warning: str) -> None:
        report.warnings.append(warning)
        report.rebuilt_because = f"previous file unreadable ({warning})"
        log(f"warning: {warning}")

    return read_embeddings(out_path, warn=unreadable)


def _reusable_previous(
    previous: EmbeddingStore | None, report: EmbeddingReport, log: Log
) -> dict[str, Int8Row]:
    """Vectors of the previous file when it was made by the same model at the same dim."""
    if previous is None:
        return {}
    if previous.model != report.model:
        report.rebuilt_because = f"model changed from {previous.model!r} to {report.model!r}"
    elif previous.dim != report.dimension:
        report.rebuilt_because = f"dimension changed from {previous.dim} to {report.dimension}"
    if report.rebuilt_because:
        log(f"rebuilding all vectors: {report.rebuilt_because}")
        return {}
    vectors: dict[str, Int8Row] = {}
    for row, chunk_id in enumerate(previous.ids):
        vectors.setdefault(chunk_id, previous.vectors[row])
    return vectors


def _read_checkpoint(
    path: Path, report: EmbeddingReport, log: Log
) -> tuple[dict[str, Int8Row], int | None]:
    """Vectors of an interrupted run, and the byte offset to resume appending at."""
    if not path.exists():
        return {}, None
    try:
        journal = read_checkpoint(path)
    except NotACheckpoint as exc:
        report.warnings.append(f"discarded checkpoint {path.name}: {exc}")
        log(f"warning: discarded checkpoint {path.name}: {exc}")
        return {}, None
    if journal.model != report.model or journal.dim != report.dimension:
        log(f"discarded checkpoint of {journal.model!r} at dimension {journal.dim}")
        return {}, None
    if journal.torn_bytes:
        log(f"checkpoint: dropped a torn tail of {journal.torn_bytes} bytes")
    return journal.vectors, journal.valid_length


def _provider_figures(embedder: Embedder) -> tuple[int, int, int, float]:
    if isinstance(embedder, ReportsStats):
        s = embedder.stats
        return s.requests, s.rate_limited, s.retries, s.waited_seconds
    return 0, 0, 0, 0.0


def _embed_missing(
    todo: list[Chunk],
    embedder: Embedder,
    journal: CheckpointWriter,
    known: dict[str, Int8Row],
    report: EmbeddingReport,
    progress: Progress | None,
) -> None:
    """Embed `todo` batch by batch, making each batch durable before the next request.

    Progress counts journaled texts only: a figure a person reads before pressing
    Ctrl-C is what the next run finds in the checkpoint (counting the sub-batches of a
    call in flight claimed texts that an interrupt then threw away).
    """
    step = max(1, embedder.max_batch)
    if progress:
        progress(0, len(todo))
    with _stop_between_batches() as stop_requested:
        for start in range(0, len(todo), step):
            if stop_requested():
                raise KeyboardInterrupt
            _embed_batch(todo[start : start + step], embedder, journal, known, report, progress,
                         len(todo))


@contextlib.contextmanager
def _stop_between_batches() -> Iterator[Callable[[], bool]]:
    """Ctrl-C stops the build at the next batch boundary, never inside one.

    An interrupt raised at an arbitrary point can land in a garbage-collection callback,
    where Python prints and drops it, and the build goes on; a flag checked between
    batches is never lost, and the batch in flight is saved. A second Ctrl-C interrupts
    at once. Only the main thread can handle signals; elsewhere nothing changes.
    """
    pressed: list[bool] = []

    def on_sigint(signum: int, frame: object) -> None:
        if pressed:
            raise KeyboardInterrupt
        pressed.append(True)

    try:
        previous = signal.signal(signal.SIGINT, on_sigint)
    except ValueError:  # not the main thread
        yield lambda: False
        return
    try:
        yield lambda: bool(pressed)
    finally:
        signal.signal(signal.SIGINT, previous)


def _embed_batch(
    batch: list[Chunk],
    embedder: Embedder,
    journal: CheckpointWriter,
    known: dict[str, Int8Row],
    report: EmbeddingReport,
    progress: Progress | None,
    total: int,
) -> None:
    """Embed one batch and journal it before anything else happens."""
    floats = embed_with_progress(embedder, [c.content for c in batch])
    if floats.shape != (len(batch), embedder.dimension):
        raise EmbeddingError(
            f"{embedder.name} returned shape {floats.shape} for {len(batch)} texts"
        )
    vectors = quantize(floats)
    ids = [c.id for c in batch]
    journal.append(ids, vectors)
    known.update(zip(ids, vectors, strict=True))
    report.embedded += len(batch)
    if progress:
        progress(report.embedded, total)


def build_embeddings(
    chunks: Sequence[Chunk],
    out_path: Path,
    embedder: Embedder,
    *,
    progress: Progress | None = None,
    log: Log | None = None,
    allow_partial: bool = False,
) -> EmbeddingReport:
    """Bring `out_path` (PATBEMB1) up to date with `chunks`, embedding only what is new.

    Raises EmbeddingBuildInterrupted when the provider fails (its message names the
    cause, never the key); the checkpoint beside `out_path` keeps every finished batch
    and the next call resumes from it. With `allow_partial`, a provider that is
    unavailable (quota exhausted, service down) instead yields a file covering the
    chunks embedded so far (`complete` False, `coverage` below 100).
    """
    say: Log = log or (lambda _message: None)
    out_path = Path(out_path)
    live = _live_chunks(chunks)
    report = EmbeddingReport(model=embedder.name, dimension=embedder.dimension, chunks=len(live))
    live_ids = {c.id for c in live}

    previous = _reusable_previous(_read_previous(out_path, report, say), report, say)
    journal_path = checkpoint_path(out_path)
    resumed, resume_at = _read_checkpoint(journal_path, report, say)
    known: dict[str, Int8Row] = {**previous, **resumed}
    report.pruned = sum(1 for chunk_id in known if chunk_id not in live_ids)
    report.reused = sum(1 for chunk_id in live_ids if chunk_id in known)
    report.resumed = sum(1 for c in live_ids if c in resumed and c not in previous)
    todo = [c for c in live if c.id not in known]
    say(
        f"embeddings: {len(live)} chunks, {report.reused} reused "
        f"({report.resumed} from checkpoint), {len(todo)} to embed, {report.pruned} pruned"
    )

    failure: EmbeddingError | None = None
    if todo:
        before = _provider_figures(embedder)
        started = time.monotonic()
        journal = CheckpointWriter(journal_path, embedder.name, embedder.dimension,
                                   resume_at=resume_at)
        try:
            _embed_missing(todo, embedder, journal, known, report, progress)
        except EmbeddingError as exc:
            failure = exc
        except BaseException as exc:
            # Ctrl-C arrives as KeyboardInterrupt, or as the orchestrator's own
            # BaseException for it; either way the journal holds every finished batch.
            if isinstance(exc, Exception | GeneratorExit | SystemExit):
                raise
            raise EmbeddingCancelled(report.resumed + report.embedded) from None
        finally:
            journal.close()
            report.embed_seconds = time.monotonic() - started
            after = _provider_figures(embedder)
            report.requests = after[0] - before[0]
            report.rate_limited = after[1] - before[1]
            report.retries = after[2] - before[2]
            report.waited_seconds = after[3] - before[3]

    report.missing = sum(1 for c in live if c.id not in known)
    if failure is not None and not (allow_partial and isinstance(failure, EmbeddingUnavailable)):
        raise EmbeddingBuildInterrupted(
            f"embedding stopped after {report.embedded} of {len(todo)} new vectors "
            f"(checkpoint kept; the next run resumes): {failure}",
            report,
        ) from failure
    if failure is not None:
        report.complete = False
        report.warnings.append(f"partial build: {failure}")
        say(f"warning: writing a partial file, {report.missing} chunks lack a vector: {failure}")

    report.written = _write_store(out_path, embedder.name, embedder.dimension, live, known)
    with contextlib.suppress(FileNotFoundError):
        journal_path.unlink()
    return report


def _write_store(
    out_path: Path, model: str, dim: int, live: list[Chunk], known: dict[str, Int8Row]
) -> bool:
    """Write the live chunks that have vectors, in store order; True when bytes changed."""
    return _write_ids(out_path, model, dim, [c.id for c in live], known)


def _write_ids(
    out_path: Path, model: str, dim: int, live: list[str], known: dict[str, Int8Row]
) -> bool:
    ids = [chunk_id for chunk_id in live if chunk_id in known]
    matrix = (
        np.stack([known[i] for i in ids]).astype(np.int8)
        if ids
        else np.zeros((0, dim), dtype=np.int8)
    )
    return write_if_changed(out_path, encode_embeddings(model, ids, matrix))


def prune_embeddings(
    chunks: Sequence[Chunk], out_path: Path, *, log: Log | None = None
) -> EmbeddingReport | None:
    """Without a provider: keep the existing vectors of live chunks, drop the others.

    Returns None (and touches nothing) when there is no readable file. The model and
    dimension stay those of the existing file; chunks without a vector are `missing`.
    """
    return prune_embedding_ids([c.id for c in chunks], out_path, log=log)


def prune_embedding_ids(
    ids: Sequence[str], out_path: Path, *, log: Log | None = None
) -> EmbeddingReport | None:
    """`prune_embeddings` from the live ids alone: pruning never needs a chunk's text, so
    a store of a million chunks is not decoded for it."""
    say: Log = log or (lambda _message: None)
    out_path = Path(out_path)
    live = list(dict.fromkeys(ids))  # store order, first occurrence
    previous = read_embeddings(out_path, warn=lambda warning: say(f"warning: {warning}"))
    if previous is None:
        return None
    report = EmbeddingReport(model=previous.model, dimension=previous.dim, chunks=len(live))
    known: dict[str, Int8Row] = {}
    for row, chunk_id in enumerate(previous.ids):
        known.setdefault(chunk_id, previous.vectors[row])
    live_ids = set(live)
    report.pruned = sum(1 for chunk_id in known if chunk_id not in live_ids)
    report.reused = sum(1 for chunk_id in live_ids if chunk_id in known)
    report.missing = len(live) - report.reused
    report.complete = report.missing == 0
    report.written = _write_ids(out_path, previous.model, previous.dim, live, known)
    say(f"embeddings (no provider): kept {report.reused}, pruned {report.pruned}, "
        f"{report.missing} chunks without a vector")
    return report
