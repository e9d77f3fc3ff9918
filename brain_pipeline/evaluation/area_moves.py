"""Queries whose area moved: an area folder renamed, so the labels live under a new name.

Chunk ids hash text only, so after `english-exams/` becomes `exams/` every label is
still live, in another area. Remapping ids cannot fix that (the ids are right); the
query's `area` is what changed. A query *follows its chunks* when none of its labels is
live in its own area and every label that is live anywhere is live in one same other
area. The move is applied by `fixture repair --write` when the query's area no longer
exists in the store (a rename: nobody can ask there any more); when the old area still
exists (one file moved out of it) the person is offered exactly that change
(`--follow-moves`), since the learner may still ask that question in the old area.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from brain_pipeline.corpus.store import Chunk
from brain_pipeline.evaluation.fixture import Fixture

FOLLOW_MOVES_FLAG = "--follow-moves"


@dataclass(frozen=True)
class AreaMove:
    """One query whose labels live in `new_area`; `applies` says whether --write moves it."""

    query: str
    old_area: str
    new_area: str
    ids: tuple[str, ...]
    """The query's labels live in `new_area` (the move makes them live again)."""
    applies: bool
    reason: str
    conflict: bool = False
    """The fixture already asks the same query in `new_area`: a person merges them."""


def areas_by_id(chunks: Iterable[Chunk]) -> dict[str, set[str]]:
    """Every live id with the areas it is live in."""
    found: dict[str, set[str]] = {}
    for chunk in chunks:
        found.setdefault(chunk.id, set()).add(chunk.area)
    return found


def propose_area_moves(
    fixture: Fixture, areas_of: Mapping[str, set[str]], *, follow_moves: bool = False
) -> list[AreaMove]:
    """The queries that follow their chunks to another area (see the module doc)."""
    live_areas = set().union(*areas_of.values()) if areas_of else set()
    asked = {(q.query, q.area) for q in fixture.queries}
    moves: list[AreaMove] = []
    for q in fixture.queries:
        homes = [areas_of.get(label, set()) for label in q.relevant]
        if any(q.area in home for home in homes):
            continue  # some label still answers here: per-label repairs, not a move
        live_homes = [home for home in homes if home]
        if not live_homes:
            continue
        common = set.intersection(*live_homes)
        if len(common) != 1:
            continue
        (new_area,) = common
        ids = tuple(label for label, home in zip(q.relevant, homes, strict=True) if home)
        gone = q.area not in live_areas
        if (q.query, new_area) in asked:
            moves.append(
                AreaMove(
                    q.query,
                    q.area,
                    new_area,
                    ids,
                    False,
                    f"its labels are live in area {new_area}, where the fixture already asks "
                    "this query: keep one of the two (fixture label --remove)",
                    conflict=True,
                )
            )
        elif gone:
            moves.append(
                AreaMove(
                    q.query,
                    q.area,
                    new_area,
                    ids,
                    True,
                    f"area {q.area} no longer exists and its labels are live in area "
                    f"{new_area} (renamed?): the query moves there",
                )
            )
        else:
            moves.append(
                AreaMove(
                    q.query,
                    q.area,
                    new_area,
                    ids,
                    follow_moves,
                    f"its labels are live in area {new_area}, not in {q.area}"
                    + (
                        ": the query moves there"
                        if follow_moves
                        else f" (files moved?): {FOLLOW_MOVES_FLAG} moves the query there"
                    ),
                )
            )
    return moves
