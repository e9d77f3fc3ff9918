"""Compare an evaluation with the baseline (the evaluation of the last published store).

Floors on mean figures miss what a corpus edit typically does: push one labelled answer
out of one query's top 10 while every label stays live and every floor still holds. This
module looks at queries, not means. For every query the two evaluations share (same text,
area and labelled ids: a relabelled query is a different question) and every retriever,
it reports the queries that

- became a miss (a hit at the baseline, nothing relevant in the top 10 now),
- became a hit,
- lost or gained relevant hits while staying a hit, or
- whose first relevant hit moved by more than `RANK_SHIFT` ranks,

and for each, the chunks that entered its top 10 since the baseline and where they come
from (`ChunkOrigin`, from the chunk history: file, heading, first seen, new since the
baseline), so a person sees which edit displaced which answer. The mean differences on the
shared queries come with paired bootstrap intervals.

Pure: no files, no Dagster. The caller supplies the origins of entered chunks through a
callable, so the history is consulted only for the few ids that matter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from brain_pipeline.evaluation.bootstrap import METRICS, Interval, paired_difference, scale

if TYPE_CHECKING:
    from brain_pipeline.evaluation.runner import QueryResult

RANK_SHIFT = 3
"""A first relevant hit moving by more than this many ranks is reported."""

BECAME_MISS = "became a miss"
BECAME_HIT = "became a hit"
LOST_HITS = "lost relevant hits"
GAINED_HITS = "gained relevant hits"
MOVED_DOWN = "moved down"
MOVED_UP = "moved up"
REGRESSIONS = frozenset({BECAME_MISS, LOST_HITS, MOVED_DOWN})


@dataclass(frozen=True)
class ChunkOrigin:
    """Where a chunk that entered a top 10 comes from (None: the history does not know)."""

    chunk_id: str
    source: str | None = None
    heading: str | None = None
    first_seen: str | None = None
    new_since_baseline: bool | None = None

    def describe(self) -> str:
        """E.g. "ab12cd34ef56 (new, aws/vpc.md § Security groups)"."""
        where = self.source or "source unknown"
        if self.heading:
            where += f" § {self.heading}"
        if self.new_since_baseline is None:
            return f"{self.chunk_id} ({where})"
        age = "new since the baseline" if self.new_since_baseline else "older"
        return f"{self.chunk_id} ({age}, {where})"


OriginLookup = Callable[[Sequence[str]], Mapping[str, ChunkOrigin]]


@dataclass(frozen=True)
class QueryChange:
    """One query's change for one retriever between the baseline and now."""

    retriever: str
    query: str
    area: str
    kind: str
    rank_before: int | None
    rank_after: int | None
    lost: tuple[str, ...]
    """Relevant ids in the top 10 at the baseline and not now."""
    gained: tuple[str, ...]
    entered: tuple[ChunkOrigin, ...]
    """Chunks in the top 10 now and not at the baseline, best rank first."""

    @property
    def regression(self) -> bool:
        return self.kind in REGRESSIONS

    def describe(self, *, limit: int = 3) -> str:
        """One line: the query, what happened, and what displaced its answer."""
        ranks = f"rank {_rank(self.rank_before)} → {_rank(self.rank_after)}"
        text = f"{self.retriever}: {self.query!r} ({self.area}) {self.kind}, {ranks}"
        if self.lost:
            text += f"; lost {', '.join(self.lost)}"
        if self.entered and self.regression:
            shown = "; ".join(origin.describe() for origin in self.entered[:limit])
            more = len(self.entered) - limit
            text += f"; displaced by {shown}" + (f" and {more} more" if more > 0 else "")
        return text


def _rank(rank: int | None) -> str:
    return "miss" if rank is None else str(rank)


@dataclass(frozen=True)
class Comparison:
    """The outcome of `compare`: changed queries, shared counts, paired differences."""

    shared: int
    """Queries (text, area, labels) both evaluations hold."""
    only_now: int
    only_baseline: int
    changes: tuple[QueryChange, ...]
    differences: Mapping[str, Interval]
    """{"bm25.ndcg_at_10": now - baseline on the shared queries, paired bootstrap}."""
    notes: tuple[str, ...] = field(default=())

    def new_misses(self, retriever: str) -> list[QueryChange]:
        """Queries that were a hit for `retriever` at the baseline and are a miss now."""
        return [c for c in self.changes if c.kind == BECAME_MISS and c.retriever == retriever]


_Key = tuple[str, str, frozenset[str]]
"""A question: its text, area and labelled ids (a relabelled query is another one)."""


def _key(row: QueryResult) -> _Key:
    return (row.query, row.area, frozenset(row.relevant_ranks))


def _index(rows: Iterable[QueryResult]) -> dict[str, dict[_Key, QueryResult]]:
    out: dict[str, dict[_Key, QueryResult]] = {}
    for row in rows:
        out.setdefault(row.retriever, {}).setdefault(_key(row), row)  # first one wins
    return out


def _found(row: QueryResult) -> set[str]:
    return {chunk for chunk, rank in row.relevant_ranks.items() if rank is not None}


def _classify(
    before: QueryResult, after: QueryResult
) -> tuple[str | None, tuple[str, ...], tuple[str, ...]]:
    found_before, found_after = _found(before), _found(after)
    lost = tuple(sorted(found_before - found_after))
    gained = tuple(sorted(found_after - found_before))
    if not before.miss and after.miss:
        return BECAME_MISS, lost, gained
    if before.miss and not after.miss:
        return BECAME_HIT, lost, gained
    if lost:
        return LOST_HITS, lost, gained
    if gained:
        return GAINED_HITS, lost, gained
    b, a = before.first_relevant_rank, after.first_relevant_rank
    if a is not None and b is not None and abs(a - b) > RANK_SHIFT:
        return (MOVED_DOWN if a > b else MOVED_UP), lost, gained
    return None, lost, gained


def compare(
    current: Iterable[QueryResult],
    baseline: Iterable[QueryResult],
    origins: OriginLookup | None = None,
) -> Comparison:
    """Per-query changes of `current` against `baseline` on the queries both hold.

    `origins` is called once with every id that entered a changed query's top 10; ids it
    does not know get a bare ChunkOrigin. Identical inputs give no change and zero
    differences.
    """
    now_by, then_by = _index(current), _index(baseline)
    pending: list[tuple[QueryResult, QueryResult, str, tuple[str, ...], tuple[str, ...]]] = []
    differences: dict[str, Interval] = {}
    notes: list[str] = []
    shared_keys: set[_Key] = set()
    now_keys = {k for rows in now_by.values() for k in rows}
    then_keys = {k for rows in then_by.values() for k in rows}
    for retriever, now_rows in now_by.items():
        then_rows = then_by.get(retriever)
        if not then_rows:
            continue
        keys = [k for k in now_rows if k in then_rows]  # current fixture order
        shared_keys.update(keys)
        for key in keys:
            kind, lost, gained = _classify(then_rows[key], now_rows[key])
            if kind is not None:
                pending.append((then_rows[key], now_rows[key], kind, lost, gained))
        if keys:
            for metric, attribute in METRICS:
                diff = paired_difference(
                    [float(getattr(now_rows[k], attribute)) for k in keys],
                    [float(getattr(then_rows[k], attribute)) for k in keys],
                )
                differences[f"{retriever}.{metric}"] = (
                    scale(diff, len(keys)) if metric == "misses" else diff
                )
            modes_now = sorted({now_rows[k].mode for k in keys})
            modes_then = sorted({then_rows[k].mode for k in keys})
            if modes_now != modes_then:
                notes.append(
                    f"{retriever} answered in mode {'/'.join(modes_now)} now but "
                    f"{'/'.join(modes_then)} at the baseline: its changes include that"
                )
    entered_ids = {
        id(after): [c for c in after.top_ids if c not in set(before.top_ids)]
        for before, after, *_ in pending
    }
    wanted = list(dict.fromkeys(c for ids in entered_ids.values() for c in ids))
    known = dict(origins(wanted)) if origins is not None and wanted else {}
    changes = tuple(
        QueryChange(
            retriever=after.retriever,
            query=after.query,
            area=after.area,
            kind=kind,
            rank_before=before.first_relevant_rank,
            rank_after=after.first_relevant_rank,
            lost=lost,
            gained=gained,
            entered=tuple(known.get(c, ChunkOrigin(c)) for c in entered_ids[id(after)]),
        )
        for before, after, kind, lost, gained in pending
    )
    return Comparison(
        shared=len(shared_keys),
        only_now=len(now_keys - then_keys),
        only_baseline=len(then_keys - now_keys),
        changes=changes,
        differences=differences,
        notes=tuple(notes),
    )
