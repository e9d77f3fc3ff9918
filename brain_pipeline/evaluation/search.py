"""Searching a built store by hand or in bulk: provenance rendering and batch query files.

Batch files let any outside tool evaluate our retrieval: one `{"qid", "query", "area"}`
object per line in, one `{"qid", "ids", "scores"}` object per line out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from brain_pipeline.corpus.store import Chunk
from brain_pipeline.retrieval.hybrid import Hit, Retriever


class BatchFormatError(ValueError):
    """A batch query line is unusable; the message names the line."""


def _js_truthy(value: Any) -> bool:
    """JavaScript truthiness for JSON values: "", 0, NaN, null and false are falsy."""
    if value is None or value is False:
        return False
    if isinstance(value, int | float):
        return value != 0 and not (isinstance(value, float) and math.isnan(value))
    return not (isinstance(value, str) and value == "")


def _heading_text(heading: Any) -> str:
    """A heading as the agent would interpolate it (numbers like JavaScript prints them)."""
    if isinstance(heading, str):
        return heading
    if isinstance(heading, bool):
        return "true" if heading else "false"
    if isinstance(heading, float) and heading.is_integer() and abs(heading) < 1e21:
        return str(int(heading))
    if isinstance(heading, int | float):
        return repr(heading)
    return json.dumps(heading, ensure_ascii=False)


def provenance(chunk: Chunk, position: int) -> str:
    """`--- passage N — source § heading ---`, without ` § heading` when there is none."""
    label = chunk.source
    if chunk.has_heading and _js_truthy(chunk.heading):
        label += f" § {_heading_text(chunk.heading)}"
    return f"--- passage {position} — {label} ---"


def render_passages(hits: Iterable[Hit]) -> str:
    """Each passage under its provenance line, separated by blank lines."""
    blocks = [f"{provenance(hit.chunk, i)}\n{hit.chunk.content}" for i, hit in enumerate(hits, 1)]
    return "\n\n".join(blocks)


def hits_as_json(hits: Iterable[Hit]) -> list[dict[str, Any]]:
    """Hits as plain JSON objects (heading omitted when the chunk has none)."""
    rows = []
    for hit in hits:
        row: dict[str, Any] = {"id": hit.chunk.id, "score": hit.score, "source": hit.chunk.source}
        if hit.chunk.has_heading:
            row["heading"] = hit.chunk.heading
        row["content"] = hit.chunk.content
        rows.append(row)
    return rows


@dataclass(frozen=True)
class BatchQuery:
    qid: str
    query: str
    area: str


def parse_batch(lines: Iterable[str], source: str, default_area: str | None) -> list[BatchQuery]:
    """Read `{"qid", "query", "area"}` lines (area may default); blank lines are skipped."""
    queries: list[BatchQuery] = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source}:{lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BatchFormatError(f"{where}: not valid JSON: {exc.msg}") from exc
        if not isinstance(row, dict):
            raise BatchFormatError(f"{where}: expected an object")
        area = row.get("area", default_area)
        if not isinstance(row.get("query"), str):
            raise BatchFormatError(f"{where}: 'query' must be a string")
        if not isinstance(area, str) or not area:
            raise BatchFormatError(f"{where}: 'area' must be a non-empty string (or pass --area)")
        qid = row.get("qid", str(lineno))
        queries.append(BatchQuery(str(qid), row["query"], area))
    return queries


def run_batch(
    retriever: Retriever, queries: Iterable[BatchQuery], mode: str, limit: int
) -> Iterator[tuple[dict[str, Any], str | None]]:
    """Yield each answer line `{"qid", "ids", "scores"}` and the query's fallback reason."""
    for q in queries:
        result = retriever.search(q.query, q.area, limit=limit, mode=mode)
        line = {
            "qid": q.qid,
            "ids": [hit.chunk.id for hit in result.hits],
            "scores": [hit.score for hit in result.hits],
        }
        yield line, result.fallback
