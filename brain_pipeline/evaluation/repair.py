"""Stale fixture labels: explain them, and propose (never guess) replacements.

Which labels are stale and what their ids were is `evaluation.stale`; the score is
`evaluation.similarity`. The replacement candidates for an old id are the live chunks
of its source file in the query's area, widened to the whole area (BM25 over the old
text picks the candidates) when the file has moved or no chunk of it is close enough.

A replacement is applied only when all of these hold:
- the best candidate's coverage is at least `min_similarity` (default 0.8);
- it is ahead of the second best by at least `margin` (default 0.15);
- no pair of candidates covers the old text together while each adds at least
  `split_gain` (default 0.1) the other lacks: that is a split paragraph, for a human;
- the remap keeps every query's `relevant` free of duplicates, and an id used in several
  areas gets the same replacement everywhere.
Everything else is listed with its top three candidates and left for a person.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain_pipeline.corpus.store import Chunk, heading_text
from brain_pipeline.evaluation.area_moves import (
    FOLLOW_MOVES_FLAG,
    AreaMove,
    areas_by_id,
    propose_area_moves,
)
from brain_pipeline.evaluation.fixture import Fixture
from brain_pipeline.evaluation.similarity import covered, excerpt, kept_runs, normalise
from brain_pipeline.evaluation.stale import (
    OldChunk,
    StaleLabel,
    find_stale,
    old_chunk_of,
    old_chunks_for,
)

if TYPE_CHECKING:
    from brain_pipeline.state.layout import StateLayout

MIN_SIMILARITY = 0.8
MARGIN = 0.15
SPLIT_GAIN = 0.1
AREA_CANDIDATES = 20
"""How many chunks of the area BM25 proposes when the source file is not enough."""

APPLY = "apply"
SPLIT = "split"
AMBIGUOUS = "ambiguous"
NO_MATCH = "no match"
UNKNOWN = "unknown"
CONFLICT = "conflict"
AREA = "area"
"""The label is right; its query's area follows it (an area folder renamed)."""
MOVED = "moved"
"""The label is live in another area; moving its query there is offered, not applied."""
FOREIGN_SHARE = 0.5
"""More than this share of a fixture's ids never seen here: it was labelled elsewhere."""

REPAIR_COMMAND = "brain-pipeline fixture repair --write"


@dataclass(frozen=True)
class Candidate:
    """A live chunk proposed for an old id, with its coverage of the old text."""

    id: str
    similarity: float
    source: str
    heading: str
    excerpt: str


@dataclass
class RepairRow:
    """One stale label and what to do about it."""

    query: str
    area: str
    old_id: str
    proposed_id: str | None
    similarity: float | None
    verdict: str
    reason: str
    old_source: str | None = None
    old_excerpt: str = ""
    new_excerpt: str = ""
    candidates: list[Candidate] = field(default_factory=list)
    area_after: str | None = None
    """The area the query is in once `--write` has moved it (None: it stays)."""

    @property
    def applies(self) -> bool:
        return self.verdict == APPLY

    @property
    def resolved(self) -> bool:
        """--write fixes it: its id is remapped, or its query follows it to its area."""
        return self.verdict in (APPLY, AREA)

    def fix_command(self) -> str:
        """The one command a person runs to settle this label by hand."""
        base = (
            f"brain-pipeline fixture label {shlex.quote(self.query)} --area "
            f"{shlex.quote(self.area_after or self.area)} --remove {self.old_id}"
        )
        if self.verdict == SPLIT and len(self.candidates) >= 2:
            return f"{base} --add {self.candidates[0].id} {self.candidates[1].id}"
        if self.candidates:
            return f"{base} --add ID...   (read one: brain-pipeline fixture show ID)"
        return f"{base}   (then label its new answer with --add ID)"


@dataclass(frozen=True)
class ForeignFixture:
    """Most of the fixture's ids were never in this build directory's stores."""

    unknown: int
    total: int

    def lines(self, fixture: str) -> list[str]:
        return [
            f"{fixture}: {self.unknown} of its {self.total} labelled ids were never in this "
            "build directory's store (not in its chunk history): it was labelled on another "
            "corpus, and repairing it is not possible.",
            "Start your own: point evaluation.fixture (or BRAIN_EVAL_FIXTURE) at a new file, "
            'then run `brain-pipeline fixture label "QUESTION" --area AREA`.',
        ]


@dataclass
class RepairProposal:
    """Every stale label with its verdict; `remaps` is what `--write` would apply.

    Rendered (rows, metadata, JSON, markdown, text) by `evaluation.repair_render`.
    """

    fixture: str
    rows: list[RepairRow]
    min_similarity: float = MIN_SIMILARITY
    margin: float = MARGIN
    split_gain: float = SPLIT_GAIN
    command: str = REPAIR_COMMAND
    moves: list[AreaMove] = field(default_factory=list)
    foreign: ForeignFixture | None = None

    @property
    def remaps(self) -> dict[str, str]:
        """old id -> new id for every applicable row (one replacement per old id)."""
        return {r.old_id: r.proposed_id for r in self.rows if r.applies and r.proposed_id}

    @property
    def area_moves(self) -> dict[tuple[str, str], str]:
        """(query, old area) -> new area for every move `--write` applies."""
        return {(m.query, m.old_area): m.new_area for m in self.moves if m.applies}

    @property
    def writable(self) -> bool:
        """True when `--write` would change the fixture."""
        return bool(self.remaps or self.area_moves)

    @property
    def for_human(self) -> list[RepairRow]:
        return [r for r in self.rows if not r.resolved]

    @property
    def offered_moves(self) -> list[AreaMove]:
        """Moves a person may accept with --follow-moves (the old area still exists and
        no remap in it was found for the query's labels)."""
        asked = {(r.query, r.area) for r in self.rows if r.verdict == MOVED}
        return [m for m in self.moves if (m.query, m.old_area) in asked]

    def summary(self) -> str:
        n_apply = sum(1 for r in self.rows if r.resolved)
        return (
            f"{len(self.rows)} stale label(s): {n_apply} can be repaired automatically, "
            f"{len(self.rows) - n_apply} need a person"
        )

    def next_steps(self) -> list[str]:
        """What to run next, each step a command that ends somewhere: `--write` fixes
        what it can, `--follow-moves` accepts offered area moves, and every other label
        gets its own `fixture label` command (never a pointer back to check or repair)."""
        if self.foreign is not None:
            return self.foreign.lines(self.fixture)
        steps = []
        if self.writable:
            steps.append(f"apply the automatic repairs: {self.command}")
        then = "then " if steps else ""
        if self.offered_moves:
            steps.append(
                f"move {len(self.offered_moves)} query(ies) to the area their labels live "
                f"in: {REPAIR_COMMAND} {FOLLOW_MOVES_FLAG}"
            )
        offered = {(m.query, m.old_area) for m in self.offered_moves}
        for r in self.for_human:
            if r.verdict == MOVED and (r.query, r.area) in offered:
                continue
            steps.append(f"{then}{r.old_id} ({r.verdict}): {r.fix_command()}")
        return steps


@dataclass
class _Scored:
    chunk: Chunk
    score: float
    runs: list[tuple[int, int]]


@dataclass
class _Decision:
    proposed: str | None
    score: float | None
    verdict: str
    reason: str
    candidates: list[_Scored]


AreaSearch = Callable[[str, str, int], list[Chunk]]
"""(text, area, limit) -> chunks of the area lexically closest to the text."""


def _score_pool(old: str, pool: Sequence[Chunk]) -> list[_Scored]:
    """Coverage of every pooled chunk, best first (ties by id, for stable output)."""
    scored = []
    for chunk in pool:
        runs = kept_runs(old, normalise(chunk.content))
        scored.append(_Scored(chunk, covered(runs) / len(old) if old else 0.0, runs))
    scored.sort(key=lambda s: (-s.score, s.chunk.id))
    return scored


def _split_pair(
    scored: Sequence[_Scored], n_old: int, min_similarity: float, split_gain: float
) -> tuple[_Scored, _Scored] | None:
    """Two candidates that cover the old text together, each adding what the other lacks."""
    top = [s for s in scored[:5] if s.runs]
    for i, first in enumerate(top):
        for second in top[i + 1 :]:
            union = covered(first.runs + second.runs) / n_old
            gain_first = union - second.score
            gain_second = union - first.score
            if union >= min_similarity and min(gain_first, gain_second) >= split_gain:
                return first, second
    return None


def _decide(
    old: OldChunk,
    area: str,
    live_in: tuple[str, ...],
    by_source: Mapping[tuple[str, str], list[Chunk]],
    area_search: AreaSearch,
    min_similarity: float,
    margin: float,
    split_gain: float,
) -> _Decision:
    text = normalise(old.text)
    pool = list(by_source.get((area, old.source), []))
    scope = "its source file"
    scored = _score_pool(text, pool)
    if not scored or scored[0].score < min_similarity:
        seen = {c.id for c in pool}
        widened = pool + [
            c for c in area_search(old.text, area, AREA_CANDIDATES) if c.id not in seen
        ]
        if len(widened) > len(pool):
            scope = "the area" if pool else "the area (no live chunk of its source file)"
            scored = _score_pool(text, widened)
    moved = f"; the id is still live in area {', '.join(live_in)}" if live_in else ""
    tops = scored[:3]
    if not scored:
        return _Decision(None, None, NO_MATCH, f"no live chunk in {scope}{moved}", [])
    best = scored[0]
    pair = _split_pair(scored, len(text), min_similarity, split_gain)
    if pair is not None:
        a, b = pair
        return _Decision(
            None,
            best.score,
            SPLIT,
            f"{a.chunk.id} and {b.chunk.id} together cover the old text (split paragraph?)" + moved,
            tops,
        )
    if best.score < min_similarity:
        return _Decision(
            None,
            best.score,
            NO_MATCH,
            f"best coverage {best.score:.2f} < {min_similarity:.2f} in {scope} "
            f"(deleted or rewritten?){moved}",
            tops,
        )
    second = scored[1].score if len(scored) > 1 else 0.0
    if best.score - second < margin:
        return _Decision(
            None,
            best.score,
            AMBIGUOUS,
            f"best {best.score:.2f} is not ahead of the next ({second:.2f}) by {margin:.2f}{moved}",
            tops,
        )
    return _Decision(
        best.chunk.id,
        best.score,
        APPLY,
        f"coverage {best.score:.2f} in {scope}, next best {second:.2f}",
        tops,
    )


def _candidate(s: _Scored) -> Candidate:
    c = s.chunk
    return Candidate(c.id, round(s.score, 4), c.source, heading_text(c.heading), excerpt(c.content))


def propose_repair(
    fixture: Fixture,
    chunks: Sequence[Chunk],
    old_chunks: Mapping[str, Any],
    *,
    min_similarity: float = MIN_SIMILARITY,
    margin: float = MARGIN,
    split_gain: float = SPLIT_GAIN,
    area_search: AreaSearch | None = None,
    follow_moves: bool = False,
) -> RepairProposal:
    """A verdict for every stale label of `fixture` against the live `chunks`.

    `old_chunks` maps old ids to what they were: history entries (corpus.chunk_history
    `lookup_many`), chunks of an older store, or OldChunk. `area_search` finds
    candidates across an area; by default BM25 over the live chunks (lexical Retriever).
    A query whose labels all live in one other area follows them (`area_moves`); its
    labels that are not live anywhere are then repaired within that area.
    `follow_moves` also moves queries whose old area still exists.
    """
    stale = find_stale(fixture, chunks)
    moves = propose_area_moves(fixture, areas_by_id(chunks), follow_moves=follow_moves)
    move_of = {(m.query, m.old_area): m for m in moves}
    foreign = _foreign(fixture, stale, old_chunks)
    if foreign is not None:
        return RepairProposal(
            fixture=fixture.source,
            rows=[],
            min_similarity=min_similarity,
            margin=margin,
            split_gain=split_gain,
            foreign=foreign,
        )
    if area_search is None:
        area_search = _bm25_area_search(chunks)
    by_source: dict[tuple[str, str], list[Chunk]] = {}
    for chunk in chunks:
        by_source.setdefault((chunk.area, chunk.source), []).append(chunk)
    decisions: dict[tuple[str, str], _Decision] = {}
    rows: list[RepairRow] = []
    moved_ids = {s.id for s in stale if s.live_in}
    live_elsewhere = {c.id: c for c in chunks if c.id in moved_ids}
    for label in stale:
        # An id still live in another area is its own old text (same content, same hash).
        raw = old_chunks.get(label.id) or live_elsewhere.get(label.id)
        old = old_chunk_of(raw) if raw is not None else None
        move = move_of.get((label.query, label.area))
        if move is not None and label.id in move.ids and move.applies:
            rows.append(
                RepairRow(
                    label.query,
                    label.area,
                    label.id,
                    None,
                    None,
                    AREA,
                    move.reason,
                    old_source=old.source if old else None,
                    old_excerpt=excerpt(old.text) if old else "",
                )
            )
            continue
        # A query that follows its chunks has its other labels repaired where it goes.
        area = move.new_area if move is not None and move.applies else label.area
        if old is None:
            moved = f"; still live in area {', '.join(label.live_in)}" if label.live_in else ""
            rows.append(
                RepairRow(
                    label.query,
                    label.area,
                    label.id,
                    None,
                    None,
                    UNKNOWN,
                    "not in the chunk history: its old text is unknown" + moved,
                    area_after=area if area != label.area else None,
                )
            )
            continue
        key = (label.id, area)
        if key not in decisions:
            decisions[key] = _decide(
                old,
                area,
                label.live_in,
                by_source,
                area_search,
                min_similarity,
                margin,
                split_gain,
            )
        d = decisions[key]
        best = d.candidates[0].chunk if d.proposed and d.candidates else None
        rows.append(
            RepairRow(
                query=label.query,
                area=label.area,
                old_id=label.id,
                proposed_id=d.proposed,
                similarity=round(d.score, 4) if d.score is not None else None,
                verdict=d.verdict,
                reason=d.reason,
                old_source=old.source,
                old_excerpt=excerpt(old.text),
                new_excerpt=excerpt(best.content) if best else "",
                candidates=[_candidate(s) for s in d.candidates],
                area_after=area if area != label.area else None,
            )
        )
        if move is not None and label.id in move.ids and not rows[-1].applies:
            # The old area still exists: an id live elsewhere may be a duplicate paragraph
            # whose copy here was edited, so a remap found here wins; else offer the move.
            rows[-1].verdict = CONFLICT if move.conflict else MOVED
            rows[-1].reason = move.reason
    _veto_conflicts(fixture, rows)
    return RepairProposal(
        fixture=fixture.source,
        rows=rows,
        min_similarity=min_similarity,
        margin=margin,
        split_gain=split_gain,
        command=REPAIR_COMMAND + (f" {FOLLOW_MOVES_FLAG}" if follow_moves else ""),
        moves=moves,
    )


def _foreign(
    fixture: Fixture, stale: Sequence[StaleLabel], old_chunks: Mapping[str, Any]
) -> ForeignFixture | None:
    """A ForeignFixture when most of the fixture's ids were never live in this build
    directory: not live now and unknown to the chunk history (and older stores given)."""
    total = len({label for q in fixture.queries for label in q.relevant})
    unknown = len({s.id for s in stale if not s.live_in and s.id not in old_chunks})
    if total and unknown > FOREIGN_SHARE * total:
        return ForeignFixture(unknown, total)
    return None


def _veto(row: RepairRow, reason: str) -> None:
    row.verdict = CONFLICT
    row.reason = f"{reason} (was: {row.reason})"


def _veto_conflicts(fixture: Fixture, rows: list[RepairRow]) -> None:
    """Demote remaps that a textual replacement would get wrong to CONFLICT."""
    targets: dict[str, set[str | None]] = {}
    for r in rows:
        targets.setdefault(r.old_id, set()).add(r.proposed_id if r.applies else None)
    for r in rows:
        if r.applies and len(targets[r.old_id]) > 1:
            _veto(r, "the id is labelled in several areas and not remapped the same in all")
    remaps = {r.old_id: r.proposed_id for r in rows if r.applies and r.proposed_id}
    clashing: set[str] = set()
    for q in fixture.queries:
        after = [remaps.get(i, i) for i in q.relevant]
        duplicated = {i for i in after if after.count(i) > 1}
        clashing.update(old for old in q.relevant if remaps.get(old) in duplicated)
    for r in rows:
        if r.applies and r.old_id in clashing:
            _veto(r, "the new id would be labelled twice for a query (paragraphs merged?)")


def _bm25_area_search(chunks: Sequence[Chunk]) -> AreaSearch:
    """Area-wide candidates by BM25 over the old text (the same index search uses)."""
    from brain_pipeline.retrieval.hybrid import Retriever

    retriever: Retriever | None = None

    def search(text: str, area: str, limit: int) -> list[Chunk]:
        nonlocal retriever
        if retriever is None:
            retriever = Retriever(chunks)
        result = retriever.search(text, area, limit=limit, mode="lexical")
        return [hit.chunk for hit in result.hits]

    return search


def propose_for_build(
    layout: StateLayout,
    chunks: Sequence[Chunk],
    fixture: Fixture,
    *,
    fallback_stores: Sequence[Path | str] = (),
    min_similarity: float = MIN_SIMILARITY,
    margin: float = MARGIN,
    split_gain: float = SPLIT_GAIN,
    follow_moves: bool = False,
) -> RepairProposal:
    """`propose_repair` with the old texts taken from the build directory's history.

    The one call behind `brain-pipeline fixture check/repair` and the failing check's
    metadata; it reads history only for the stale ids.
    """
    stale = find_stale(fixture, chunks)
    old = old_chunks_for(layout, (s.id for s in stale), fallback_stores)
    return propose_repair(
        fixture,
        chunks,
        old,
        min_similarity=min_similarity,
        margin=margin,
        split_gain=split_gain,
        follow_moves=follow_moves,
    )
