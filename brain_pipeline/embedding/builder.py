"""Incremental, resumable build of embeddings.bin.

A chunk's id is the hash of its content and only the content is embedded, so a vector
stays valid for as long as its id exists and the model and dimension are unchanged.
The build therefore reuses vectors by id from the vector packs every worker shares
(`packs`: the ledger and the blobs), embeds only what is missing, drops the vectors of
chunks that are gone, and writes one vector per live chunk in store order.

Every text is sent whole: what the agent's own ingest stores for a text is the
service's vector of the whole text, and only the service knows whether a text is over
its input limit (see `limits`). A text it refuses as too long is cut in proportion to
its own count and sent again (`truncate`), or gets no vector (`skip`).

One bad text or one bad answer never stops the build: a text the service refuses is
taken out of its batch (directly when the error names it, by splitting the batch in
halves when it does not), an invalid vector is asked for once more and then refused,
and everything else is embedded and packed in the same run. Refusals are
remembered (`gaps`) and not sent again until the text, model, dimension or policy
changes. Errors that are not about the texts (key, model, quota, 5xx, network) stop
the build as before and are never split.
"""

from __future__ import annotations

import contextlib
import re
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from brain_pipeline.corpus.store import Chunk, heading_text
from brain_pipeline.embedding.gaps import Gap, GapKind, read_gaps, write_gaps
from brain_pipeline.embedding.limits import TooLongPolicy
from brain_pipeline.embedding.packs import REBASE_AFTER_PACKS, VectorPacks
from brain_pipeline.embedding.protocol import (
    Embedder,
    EmbeddingError,
    EmbeddingInputRefused,
    EmbeddingRejected,
    EmbeddingUnavailable,
    ReportsStats,
)
from brain_pipeline.embedding.store_file import read_embeddings
from brain_pipeline.embedding.validate import (
    InvalidAnswer,
    answer_matrix,
    row_problems,
    zero_rows,
)
from brain_pipeline.retrieval.vectors import EmbeddingStore, encode_embeddings, quantize
from brain_pipeline.state.blobs import LocalBlobs
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.ledger import Ledger, sqlite_url
from brain_pipeline.state.memory import Memory
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
    resumed: int = 0  # of `reused`, how many came from packs not yet in a base (resumed)
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
    refused: int = 0  # live chunks without a vector for a remembered reason (gaps)
    refused_now: int = 0  # of `refused`, found in this run (the others were remembered)
    truncated: int = 0  # live chunks whose vector is of their head only
    healed: int = 0  # stored zero rows dropped to be embedded again
    policy: str = "truncate"
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
    """Ctrl-C during a build: still an interrupt, carrying what the packs hold.

    `saved` counts the new vectors in packs (this run's and an earlier interrupted
    run's), which the next run (on any worker) resumes from.
    """

    def __init__(self, saved: int) -> None:
        super().__init__(f"interrupted; {saved} texts saved, the next run resumes from there")
        self.saved = saved


class EmbeddingBuildInterrupted(EmbeddingError):
    """The provider failed mid-build. Progress is in the packs; `report` says how far."""

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


def _previous_file(out_path: Path, report: EmbeddingReport, log: Log) -> dict[str, Int8Row]:
    """Vectors of a file made before the ledger, when readable as a PATBEMB1 store made by
    the same model at the same dimension (otherwise the reason, in the report)."""

    def unreadable(warning: str) -> None:
        report.warnings.append(warning)
        report.rebuilt_because = f"previous file unreadable ({warning})"
        log(f"warning: {warning}")

    previous = read_embeddings(out_path, warn=unreadable)
    if previous is None:
        return {}
    if previous.model != report.model:
        report.rebuilt_because = f"model changed from {previous.model!r} to {report.model!r}"
    elif previous.dim != report.dimension:
        report.rebuilt_because = f"dimension changed from {previous.dim} to {report.dimension}"
    if report.rebuilt_because:
        log(f"rebuilding all vectors: {report.rebuilt_because}")
        return {}
    return _by_id(previous)


def _by_id(store: EmbeddingStore) -> dict[str, Int8Row]:
    """A file's vectors by chunk id (the first row of an id that repeats)."""
    vectors: dict[str, Int8Row] = {}
    for row, chunk_id in enumerate(store.ids):
        vectors.setdefault(chunk_id, store.vectors[row])
    return vectors


def _without_zero_rows(vectors: dict[str, Int8Row]) -> tuple[dict[str, Int8Row], set[str]]:
    """Drop stored zero rows (an older version stored bad answers as such): their chunks
    are embedded again. Returns the kept vectors and the dropped ids."""
    if not vectors:
        return vectors, set()
    ids = list(vectors)
    zero = zero_rows(np.stack([vectors[i] for i in ids]))
    dropped = {chunk_id for chunk_id, bad in zip(ids, zero.tolist(), strict=True) if bad}
    return {i: v for i, v in vectors.items() if i not in dropped}, dropped


def _provider_figures(embedder: Embedder) -> tuple[int, int, int, float]:
    if isinstance(embedder, ReportsStats):
        s = embedder.stats
        return s.requests, s.rate_limited, s.retries, s.waited_seconds
    return 0, 0, 0, 0.0


@dataclass
class _Run:
    """What one build's embedding loop needs and collects."""

    embedder: Embedder
    packs: VectorPacks
    known: dict[str, Int8Row]
    report: EmbeddingReport
    progress: Progress | None
    total: int
    gap_of: Callable[[Chunk, GapKind, str, int | None], Gap]
    policy: TooLongPolicy = "truncate"
    truncations: dict[str, Gap] = field(default_factory=dict)
    """Chunks sent as a head only, cut after the service counted them over its limit."""
    cuts: dict[str, int] = field(default_factory=dict)
    """How many times each chunk was cut in this run (almost always once)."""
    gaps: dict[str, Gap] = field(default_factory=dict)
    log: Log = field(default=lambda _message: None)


def _embed_missing(todo: list[tuple[Chunk, str]], run: _Run) -> None:
    """Embed `todo` ((chunk, text to send) pairs) batch by batch, making each batch
    durable before the next request.

    Progress counts packed texts only: a figure a person reads before pressing
    Ctrl-C is what the next run finds in the packs (counting the sub-batches of a
    call in flight claimed texts that an interrupt then threw away).
    """
    step = max(1, run.embedder.max_batch)
    if run.progress:
        run.progress(0, run.total)
    with _stop_between_batches() as stop_requested:
        for start in range(0, len(todo), step):
            if stop_requested():
                raise KeyboardInterrupt
            batch = todo[start : start + step]
            before = len(run.gaps)
            _embed_isolating(batch, run, retried=False)
            _refuse_a_wrong_request(batch, run, before)


def _refuse_a_wrong_request(batch: list[tuple[Chunk, str]], run: _Run, before: int) -> None:
    """Stop when every text of a batch of several was refused: then the request itself
    is wrong (a setting the service rejects), not one of its texts."""
    refused = [g for g in list(run.gaps.values())[before:] if g.kind == "refused"]
    if len(batch) > 1 and len(refused) == len(batch):
        raise EmbeddingRejected(
            f"every text of a batch of {len(batch)} was refused, so the request itself is "
            f"wrong: {refused[-1].reason}"
        )


def _embed_isolating(batch: list[tuple[Chunk, str]], run: _Run, *, retried: bool) -> None:
    """Embed `batch`, taking out what the service refuses or answers badly.

    A refusal naming its text removes that text and sends the rest again; one naming
    none splits the batch in halves until single texts are left. A wrong count or
    dimension is asked for once more, then split. Rows that are not finite or are
    (near) zero are asked for once more as a group, then refused one by one. Valid
    rows are packed at once, so they survive whatever happens to the rest.
    """
    texts = [text for _, text in batch]
    try:
        matrix = answer_matrix(
            run.embedder.embed_documents(texts), len(batch), run.embedder.dimension
        )
    except EmbeddingInputRefused as exc:
        named = 0 if len(batch) == 1 else exc.index
        if named is None:
            _bisect(batch, run, retried=retried)
            return
        rest = batch[:named] + batch[named + 1 :]
        shorter = _after_refusal(batch[named], str(exc), run)
        if shorter is not None:
            rest.insert(named, shorter)  # goes again with the rest: no extra request
        if rest:
            _embed_isolating(rest, run, retried=retried)
        return
    except InvalidAnswer as exc:
        if not retried:
            _embed_isolating(batch, run, retried=True)
        elif len(batch) == 1:
            _refuse(batch[0][0], "invalid", str(exc), run)
        else:
            _bisect(batch, run, retried=True)
        return
    problems = row_problems(matrix)
    good = [i for i, problem in enumerate(problems) if problem is None]
    if good:
        _accept([batch[i][0] for i in good], matrix[good], run)
    bad = [i for i, problem in enumerate(problems) if problem is not None]
    if bad and not retried:
        _embed_isolating([batch[i] for i in bad], run, retried=True)
    else:
        for i in bad:
            _refuse(batch[i][0], "invalid", str(problems[i]).removeprefix("invalid answer: "),
                    run)


_SERVICE_COUNT = re.compile(
    r"input token count \((\d+)\) exceeds the maximum number of tokens allowed \((\d+)\)",
    re.IGNORECASE,
)
SERVICE_CUT_MARGIN = 0.9
"""A head cut after the service's own count keeps this share of `allowed / counted`."""
MAX_SERVICE_CUTS = 3
"""Cuts of one text before its refusal stands. One is the rule: a head of 90 % of the
allowed share fits unless the text's tokens crowd at its start (a digit table above
prose); each further cut is again in proportion to the service's count of the head."""


def _after_refusal(item: tuple[Chunk, str], message: str, run: _Run) -> tuple[Chunk, str] | None:
    """What becomes of a text the service refused (any gap is recorded here).

    A refusal that gives the service's token count (`the input token count (N) exceeds
    the maximum number of tokens allowed (M)`) is the service's verdict that the text
    is too long: under `skip` the chunk gets no vector (`too_long`); under `truncate`
    the text is cut to `M / N` of its length (less a margin) and returned, to go again
    with the rest of its batch. Any other refusal, or a text cut `MAX_SERVICE_CUTS`
    times and still refused, is refused.
    """
    chunk, text = item
    match = _SERVICE_COUNT.search(message)
    counted, allowed = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
    cuts = run.cuts.get(chunk.id, 0)
    if match is not None and run.policy == "skip":
        _refuse(chunk, "too_long", f"the service counts {counted} tokens, over its limit "
                f"of {allowed}", run, tokens=counted)
        return None
    keep = int(len(text) * allowed / counted * SERVICE_CUT_MARGIN) if counted > allowed else 0
    if keep <= 0 or cuts >= MAX_SERVICE_CUTS:
        run.truncations.pop(chunk.id, None)
        _refuse(chunk, "refused", f"still refused after {cuts} cut(s): {message}" if cuts
                else message, run)
        return None
    first = run.truncations.get(chunk.id)
    whole = counted if first is None or first.tokens is None else first.tokens
    run.cuts[chunk.id] = cuts + 1
    run.truncations[chunk.id] = run.gap_of(
        chunk, "truncated", f"cut to about {allowed} tokens of the service's count of "
        f"{whole}", whole)
    run.log(f"warning: chunk {chunk.id} ({chunk.source}) is over the service's limit "
            f"({counted} > {allowed} tokens); sending its first {keep} of "
            f"{len(chunk.content)} characters")
    return chunk, text[:keep]


def _bisect(batch: list[tuple[Chunk, str]], run: _Run, *, retried: bool) -> None:
    middle = (len(batch) + 1) // 2
    _embed_isolating(batch[:middle], run, retried=retried)
    _embed_isolating(batch[middle:], run, retried=retried)


def _accept(chunks: list[Chunk], rows: npt.NDArray[np.float64], run: _Run) -> None:
    vectors = quantize(rows)
    ids = [c.id for c in chunks]
    run.packs.add(ids, vectors)
    run.known.update(zip(ids, vectors, strict=True))
    run.report.embedded += len(chunks)
    if run.progress:
        run.progress(run.report.embedded, run.total)


def _refuse(chunk: Chunk, kind: GapKind, reason: str, run: _Run, *,
            tokens: int | None = None) -> None:
    gap = run.gap_of(chunk, kind, reason, tokens)
    run.gaps[chunk.id] = gap
    run.log(f"warning: chunk {chunk.id} ({chunk.source}) gets no vector: {gap.describe()}")


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


def build_embeddings(
    chunks: Sequence[Chunk],
    out_path: Path,
    embedder: Embedder,
    *,
    progress: Progress | None = None,
    log: Log | None = None,
    allow_partial: bool = False,
    too_long: TooLongPolicy = "truncate",
    retry_refused: bool = False,
    memory: Memory | None = None,
) -> EmbeddingReport:
    """Bring `out_path` (PATBEMB1) up to date with `chunks`, embedding only what is new.

    Raises EmbeddingBuildInterrupted when the provider fails (its message names the
    cause, never the key); the packs in `memory` keep every finished batch
    and the next call resumes from it. With `allow_partial`, a provider that is
    unavailable (quota exhausted, service down) instead yields a file covering the
    chunks embedded so far (`complete` False, `coverage` below 100).

    Every text is sent whole. One the service counts over its input limit is cut in
    proportion to the service's count and sent again, or skipped (`too_long`); refused,
    skipped and truncated chunks are remembered in the ledger (`gaps`) and refused or skipped
    ones not sent again unless `retry_refused`. `memory`: the ledger and blobs the packs
    live in (default: the SQLite ledger and blob folder of `out_path`'s folder).
    """
    if memory is None:
        memory = local_memory(out_path)
        with contextlib.closing(memory.ledger):
            return build_embeddings(
                chunks, out_path, embedder, progress=progress, log=log,
                allow_partial=allow_partial, too_long=too_long,
                retry_refused=retry_refused, memory=memory)
    say: Log = log or (lambda _message: None)
    out_path = Path(out_path)
    live = _live_chunks(chunks)
    report = EmbeddingReport(model=embedder.name, dimension=embedder.dimension, chunks=len(live),
                             policy=too_long)
    live_ids = {c.id for c in live}
    packs = VectorPacks(memory, embedder.name, embedder.dimension, log=say)
    stored, from_packs = packs.load()
    if not packs.has_base:
        # Upgrade: the vectors of a readable file made before the ledger by the same model
        # at the same dimension are reused, and the finished file becomes the base.
        stored = {**_previous_file(out_path, report, say), **stored}
    known, healed_ids = _without_zero_rows(stored)
    report.healed = len(healed_ids & live_ids)
    if report.healed:
        warning = (f"{report.healed} stored zero vector(s) (an earlier bad answer) are "
                   "embedded again")
        report.warnings.append(warning)
        say(f"warning: {warning}")

    def applies(gap: Gap) -> bool:
        return gap.applies_to(embedder.name, embedder.dimension, too_long)

    remembered = {i: g for i, g in read_gaps(memory).items() if i in live_ids}
    for chunk_id, gap in remembered.items():
        if gap.has_vector and not applies(gap):
            known.pop(chunk_id, None)  # truncated under another policy or model: redo
    refusals = {
        i: g for i, g in remembered.items()
        if not g.has_vector and applies(g) and i not in known and not retry_refused
    }
    notes = {i: g for i, g in remembered.items() if g.has_vector and applies(g) and i in known}

    report.pruned = sum(1 for chunk_id in known if chunk_id not in live_ids)
    report.reused = sum(1 for chunk_id in live_ids if chunk_id in known)
    report.resumed = len(live_ids & from_packs)
    todo = [c for c in live if c.id not in known and c.id not in refusals]
    say(
        f"embeddings: {len(live)} chunks, {report.reused} reused "
        f"({report.resumed} from packs), {len(todo)} to embed, {report.pruned} pruned"
        + (f", {len(refusals)} refused earlier (not sent again)" if refusals else "")
    )

    def gap_of(chunk: Chunk, kind: GapKind, reason: str, tokens: int | None = None) -> Gap:
        return Gap(chunk.id, kind, reason, embedder.name, embedder.dimension, too_long,
                   chunk.source, heading_text(chunk.heading), tokens)

    sending = [(chunk, chunk.content) for chunk in todo]  # whole: the service decides

    failure: EmbeddingError | None = None
    run: _Run | None = None
    if sending:
        before = _provider_figures(embedder)
        started = time.monotonic()
        run = _Run(embedder, packs, known, report, progress, len(sending), gap_of,
                   policy=too_long, log=say)
        try:
            _embed_missing(sending, run)
        except EmbeddingError as exc:
            failure = exc
        except BaseException as exc:
            # Ctrl-C arrives as KeyboardInterrupt, or as the orchestrator's own
            # BaseException for it; either way the packs hold every finished batch.
            if isinstance(exc, Exception | GeneratorExit | SystemExit):
                raise
            _remember(memory, refusals, notes, run, known)
            raise EmbeddingCancelled(report.resumed + report.embedded) from None
        finally:
            report.embed_seconds = time.monotonic() - started
            after = _provider_figures(embedder)
            report.requests = after[0] - before[0]
            report.rate_limited = after[1] - before[1]
            report.retries = after[2] - before[2]
            report.waited_seconds = after[3] - before[3]

    gaps = _remember(memory, refusals, notes, run, known)
    report.refused = sum(1 for g in gaps.values() if not g.has_vector)
    report.refused_now = report.refused - len(refusals)
    report.truncated = sum(1 for g in gaps.values() if g.has_vector)
    report.missing = sum(1 for c in live if c.id not in known)
    if failure is not None and not (allow_partial and isinstance(failure, EmbeddingUnavailable)):
        raise EmbeddingBuildInterrupted(
            f"embedding stopped after {report.embedded} of {len(todo)} new vectors "
            f"(packs kept; the next run resumes): {failure}",
            report,
        ) from failure
    if failure is not None:
        report.complete = False
        report.warnings.append(f"partial build: {failure}")
        say(f"warning: writing a partial file, {report.missing} chunks lack a vector: {failure}")
    if report.refused:
        say(f"warning: {report.refused} chunk(s) have no vector ({report.refused_now} refused "
            "in this run); they stay lexical (see the embedding_gaps check)")

    report.written = _write_ids(out_path, embedder.name, embedder.dimension, [c.id for c in live],
                                known)
    if report.complete and (not packs.has_base or packs.packs > REBASE_AFTER_PACKS):
        packs.rebase(out_path, len(live) - report.missing)
    return report


def local_memory(out_path: Path) -> Memory:
    """The default ledger and blobs of the build directory holding `out_path` (for a
    caller without a configuration: the BEIR evaluation, tests)."""
    layout = StateLayout.of(Path(out_path).parent)
    return Memory(Ledger(sqlite_url(layout.ledger)), LocalBlobs(layout.blobs_dir), layout)


def _remember(
    memory: Memory,
    refusals: dict[str, Gap],
    notes: dict[str, Gap],
    run: _Run | None,
    known: dict[str, Int8Row],
) -> dict[str, Gap]:
    """Write the gaps of the live chunks: earlier refusals still valid, this run's
    refusals, and truncation notes of the vectors that exist."""
    gaps = {**refusals, **notes}
    if run is not None:
        gaps.update((i, g) for i, g in run.truncations.items() if i in known)
        gaps.update(run.gaps)
    write_gaps(memory, gaps.values())
    return gaps


def _write_ids(
    out_path: Path, model: str, dim: int, live: list[str], known: dict[str, Int8Row]
) -> bool:
    """Write the live chunks that have vectors, in store order; True when bytes changed."""
    ids = [chunk_id for chunk_id in live if chunk_id in known]
    matrix = (
        np.stack([known[i] for i in ids]).astype(np.int8)
        if ids
        else np.zeros((0, dim), dtype=np.int8)
    )
    return write_if_changed(out_path, encode_embeddings(model, ids, matrix))


def prune_embedding_ids(
    ids: Sequence[str], out_path: Path, *, log: Log | None = None
) -> EmbeddingReport | None:
    """Without a provider: keep the existing vectors of live chunks, drop the others.

    Returns None (and touches nothing) when there is no readable file. The model and
    dimension stay those of the existing file; chunks without a vector are `missing`.
    Ids suffice: a store of a million chunks is not decoded for it."""
    say: Log = log or (lambda _message: None)
    out_path = Path(out_path)
    live = list(dict.fromkeys(ids))  # store order, first occurrence
    previous = read_embeddings(out_path, warn=lambda warning: say(f"warning: {warning}"))
    if previous is None:
        return None
    report = EmbeddingReport(model=previous.model, dimension=previous.dim, chunks=len(live))
    known = _by_id(previous)
    live_ids = set(live)
    report.pruned = sum(1 for chunk_id in known if chunk_id not in live_ids)
    report.reused = sum(1 for chunk_id in live_ids if chunk_id in known)
    report.missing = len(live) - report.reused
    report.complete = report.missing == 0
    report.written = _write_ids(out_path, previous.model, previous.dim, live, known)
    say(f"embeddings (no provider): kept {report.reused}, pruned {report.pruned}, "
        f"{report.missing} chunks without a vector")
    return report
