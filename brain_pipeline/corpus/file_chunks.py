"""Reading and chunking corpus files: one file's manifest line and chunks, or the whole corpus.

`ingest_file` screens, hashes and chunks one file; the Dagster asset calls it through the
per-file chunk cache (`corpus.chunk_cache`), for changed files only. `ingest_corpus`
chunks and de-duplicates a whole corpus in memory, with no cache (`brain-pipeline chunk`);
the cached path must stay byte-identical to it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from brain_pipeline.corpus.chunking import chunk_roadmap, chunk_text, decode_text
from brain_pipeline.corpus.discovery import (
    STATUS_ROADMAP,
    STATUS_SKIPPED,
    CorpusFile,
    ManifestEntry,
    file_entry,
    screen_file,
    walk_corpus,
)
from brain_pipeline.corpus.junk import (
    DEFAULT_LIMITS,
    OUTPUT_BOUND,
    REASON_LONG_PARAGRAPH,
    REASON_OUTPUT_TOO_LARGE,
    IngestLimits,
    long_paragraphs,
)
from brain_pipeline.corpus.store import Chunk, deduplicate, serialize_store, store_size
from brain_pipeline.utils.digest import sha256_hex

EMPTY_CORPUS_WARNING = "no chunks: the corpus holds no usable text or roadmap files"


@dataclass
class IngestResult:
    """Everything one ingest learned: the store content and the report around it.

    `files_seen` counts text and roadmap files found (read or not); `problems` lists
    (source, reason) for what is malformed, unreadable or refused, plus a warning
    (source ".") when the corpus produced no chunks at all.
    """

    root: Path
    manifest: list[ManifestEntry]
    chunks: list[Chunk]
    duplicates_collapsed: int
    problems: list[tuple[str, str]]
    skipped_by_reason: dict[str, int]
    chunks_per_area: dict[str, int]
    files_seen: int
    areas: list[str] = field(default_factory=list)

    def store_bytes(self) -> bytes:
        """knowledge-store.json exactly as the original script would have written it."""
        return serialize_store(self.chunks)


@dataclass
class FileOutcome:
    """What one corpus file contributed: its manifest line and its chunks."""

    entry: ManifestEntry
    chunks: list[Chunk]


def ingest_file(found: CorpusFile, limits: IngestLimits = DEFAULT_LIMITS) -> FileOutcome:
    """Read, hash and chunk one file; an OSError is reported in the entry, never raised.

    `limits` (from `corpus.max_file_bytes` / `corpus.max_paragraph_chars`) decides what
    is junk: a file over the size limit is skipped without being read, a binary file
    is skipped, and a paragraph over the length limit is kept but reported on the
    file's entry (problem=True). Callers pass the configured limits explicitly.
    """
    data = screen_file(found, limits)
    if isinstance(data, ManifestEntry):
        return FileOutcome(data, [])
    entry = file_entry(found, sha256_hex(data))
    text = decode_text(data)
    if found.kind != STATUS_ROADMAP:
        chunks = chunk_text(text, found.area, found.source)
        excess = _text_over_budget(chunks, len(data))
        if excess is not None:
            return FileOutcome(
                entry.with_outcome(STATUS_SKIPPED, REASON_OUTPUT_TOO_LARGE, excess, True), []
            )
        long_detail = long_paragraphs(chunks, limits)
        if long_detail is not None:
            entry = entry.with_outcome(entry.status, REASON_LONG_PARAGRAPH, long_detail, True)
        return FileOutcome(entry, chunks)
    outcome = chunk_roadmap(text, found.area, found.source, len(data))
    reason, detail, problem = outcome.reason, outcome.detail, outcome.problem
    long_detail = long_paragraphs(outcome.chunks, limits)
    if long_detail is not None:
        if reason is None:
            reason, detail = REASON_LONG_PARAGRAPH, long_detail
        else:
            detail = f"{detail}; also {REASON_LONG_PARAGRAPH}: {long_detail}"
        problem = True
    if reason is not None:  # an entry without a reason to tell stays as read
        status = STATUS_SKIPPED if not outcome.chunks else entry.status
        entry = entry.with_outcome(status, reason, detail, problem)
    return FileOutcome(entry, outcome.chunks)


def _text_over_budget(chunks: list[Chunk], input_bytes: int) -> str | None:
    """Why a text file's chunks break the output bound, or None.

    A heading is repeated on every chunk below it, so one long heading line over many
    short paragraphs multiplies. Text chunks share their heading objects, so memory is
    still the file's size here; only the store would pay. A quoted character takes at
    most 6 bytes, so a generous upper bound, cheap to sum, spares ordinary files the
    exact count.
    """
    budget = OUTPUT_BOUND.budget(input_bytes)
    rough = 0
    last_heading: object = None
    heading_chars = 0
    for c in chunks:
        if c.heading is not last_heading:
            last_heading = c.heading
            heading_chars = len(c.heading) if isinstance(c.heading, str) else 0
        rough += 6 * (len(c.content) + heading_chars + len(c.area) + len(c.source)) + 128
    if rough <= budget:
        return None
    return OUTPUT_BOUND.refusal(store_size(chunks), input_bytes)


def describe_entry(entry: ManifestEntry) -> str:
    return f"{entry.reason}: {entry.detail}" if entry.detail else str(entry.reason)


#: Said after the problem of an unreadable file whose last cached chunks still count.
KEPT_NOTE = " (its last cached chunks are kept)"


def corpus_figures(
    manifest: Sequence[ManifestEntry],
    areas: Sequence[str],
    chunks_per_area: Counter[str],
    kept: Collection[str] = (),
) -> tuple[list[tuple[str, str]], dict[str, int], dict[str, int]]:
    """(problems, skipped_by_reason, chunks_per_area) of a chunked corpus.

    One rule for the in-memory ingest and the cached path, which must report alike:
    every problem entry (`kept`: unreadable files still contributing their last cached
    chunks), a warning when nothing was chunked, every area (empty ones as 0).
    """
    problems = [
        (e.source, describe_entry(e) + (KEPT_NOTE if e.source in kept else ""))
        for e in manifest
        if e.problem
    ]
    if not sum(chunks_per_area.values()):
        problems.append((".", EMPTY_CORPUS_WARNING))
    skipped = Counter(str(e.reason) for e in manifest if e.status == STATUS_SKIPPED)
    per_area = dict.fromkeys(areas, 0)
    per_area.update(chunks_per_area)
    return problems, dict(skipped), per_area


def ingest_corpus(root: Path | str, limits: IngestLimits = DEFAULT_LIMITS) -> IngestResult:
    """Walk the corpus at `root`, chunk every text and roadmap file and de-duplicate by id
    across the corpus, first occurrence in discovery order winning.

    Raises CorpusNotFoundError (a FileNotFoundError) when `root` is not a directory;
    everything wrong inside the corpus is reported in the manifest instead.
    """
    walk = walk_corpus(root)
    manifest: list[ManifestEntry] = []
    occurrences: list[Chunk] = []
    files_seen = 0
    for item in walk:
        if isinstance(item, ManifestEntry):
            manifest.append(item)
            continue
        files_seen += 1
        outcome = ingest_file(item, limits)
        manifest.append(outcome.entry)
        occurrences.extend(outcome.chunks)
    chunks, collapsed = deduplicate(occurrences)
    problems, skipped, per_area = corpus_figures(
        manifest, walk.areas, Counter(c.area for c in chunks)
    )
    return IngestResult(
        root=Path(root),
        manifest=manifest,
        chunks=chunks,
        duplicates_collapsed=collapsed,
        problems=problems,
        skipped_by_reason=skipped,
        chunks_per_area=per_area,
        files_seen=files_seen,
        areas=list(walk.areas),
    )
