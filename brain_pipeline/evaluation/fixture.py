"""The retrieval fixture: labelled queries in the agent's format, validated, and staleness.

Format (one JSON object):

    {"$comment": ["free text", ...],
     "queries": [{"query": "...", "area": "...", "relevant": ["<chunk id>", ...]}, ...]}

Keys other than these (a per-query "note", say) are allowed and ignored. Labels are
content-addressed chunk ids, so when a labelled passage is edited its id disappears from
the store: such *stale* ids make the evaluation fail rather than silently scoring a
query as unanswerable.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class FixtureError(ValueError):
    """The fixture cannot be used; the message names the file, the query and the problem."""


@dataclass(frozen=True)
class LabelledQuery:
    """One query, the area it is asked in, and the chunk ids that answer it."""

    query: str
    area: str
    relevant: tuple[str, ...]


@dataclass(frozen=True)
class Fixture:
    """Validated labelled queries; `source` names where they came from (for messages)."""

    queries: tuple[LabelledQuery, ...]
    source: str = "<fixture>"

    @property
    def areas(self) -> list[str]:
        """The areas the queries are asked in, sorted."""
        return sorted({q.area for q in self.queries})


def _non_empty_string(value: Any) -> bool:
    return isinstance(value, str) and value.strip() != ""


def _parse_query(raw: Any, index: int, source: str) -> LabelledQuery:
    where = f"{source}: queries[{index}]"
    if not isinstance(raw, dict):
        raise FixtureError(f"{where}: must be an object, got {type(raw).__name__}")
    for key in ("query", "area"):
        if key not in raw:
            raise FixtureError(f"{where}: missing {key!r}")
        if not _non_empty_string(raw[key]):
            raise FixtureError(f"{where}: {key!r} must be a non-empty string, got {raw[key]!r}")
    if "relevant" not in raw:
        raise FixtureError(f"{where}: missing 'relevant'")
    relevant = raw["relevant"]
    if not isinstance(relevant, list) or not relevant:
        raise FixtureError(f"{where}: 'relevant' must be a non-empty list of chunk ids")
    for position, chunk in enumerate(relevant):
        if not _non_empty_string(chunk):
            raise FixtureError(
                f"{where}: relevant[{position}] must be a non-empty string, got {chunk!r}"
            )
    duplicates = sorted({c for c in relevant if relevant.count(c) > 1})
    if duplicates:
        raise FixtureError(f"{where}: 'relevant' lists {', '.join(duplicates)} more than once")
    return LabelledQuery(query=raw["query"], area=raw["area"], relevant=tuple(relevant))


def parse_fixture(
    data: str | bytes, source: str = "<fixture>", *, allow_empty: bool = False
) -> Fixture:
    """Parse and validate fixture JSON text; raise FixtureError saying what is wrong.

    `allow_empty` accepts `"queries": []`: a fixture being started is not yet an
    evaluation, but labelling must be able to add its first query.
    """
    try:
        document = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FixtureError(f"{source}: not valid JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise FixtureError(
            f"{source}: the top level must be an object with 'queries', "
            f"got {type(document).__name__}"
        )
    if "queries" not in document:
        raise FixtureError(f"{source}: missing 'queries'")
    raw_queries = document["queries"]
    if isinstance(raw_queries, list) and not raw_queries and allow_empty:
        return Fixture(queries=(), source=source)
    if not isinstance(raw_queries, list) or not raw_queries:
        raise FixtureError(f"{source}: 'queries' must be a non-empty list")
    queries = tuple(_parse_query(raw, i, source) for i, raw in enumerate(raw_queries))
    return Fixture(queries=queries, source=source)


def load_fixture(path: Path | str, *, allow_empty: bool = False) -> Fixture:
    """Read and validate a fixture file (`allow_empty`: see `parse_fixture`)."""
    target = Path(path)
    try:
        data = target.read_bytes()
    except FileNotFoundError as exc:
        raise FixtureError(f"{target}: fixture file not found") from exc
    except OSError as exc:
        raise FixtureError(f"{target}: cannot read fixture: {exc.strerror}") from exc
    return parse_fixture(data, source=str(target), allow_empty=allow_empty)


def load_fixture_if_any(path: Path | str) -> Fixture:
    """The fixture being labelled: empty when the file does not exist yet or has no query.

    Labelling starts fixtures, so "no file" and `"queries": []` are where it begins, not
    errors; anything else wrong with the file is still a FixtureError.
    """
    target = Path(path)
    if not target.exists():
        return Fixture(queries=(), source=str(target))
    return load_fixture(target, allow_empty=True)


def unknown_areas(fixture: Fixture, store_areas: Iterable[str]) -> list[str]:
    """Areas queried by the fixture that the store does not contain, sorted."""
    present = set(store_areas)
    return [area for area in fixture.areas if area not in present]
