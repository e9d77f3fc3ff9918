"""Where the known-item check keeps what outlives one evaluation (state/known-items/).

- `queries.json`: chunk id -> its learner query (or null: nothing distinctive), for the
  ids of the current store, so an unchanged chunk keeps its query across builds and is
  never read or tokenised again (the digest of the query code keys it).
- `answers.json`: per area, the agent's top 10 for each known-item query, under a key of
  the area's ids (and its vectors, in hybrid mode): an area a build did not touch is not
  searched again, which is what keeps a one-edit run cheap.

What every worker must see is in the ledger and the blobs (`evaluation.judgements`):

- the candidate of an evaluated store (its known items with ranks and its chunk count
  per area), a blob named by the pointer `judgements.CANDIDATE + <key>`, keyed by the
  store's and the vectors' digests;
- the known-item baseline: the candidate of the store last published (or accepted),
  with how it became the baseline, a blob named by the pointer `judgements.KNOWN_ITEMS`,
  moved by compare-and-set in `record_baseline`: what the next build is asked against.

The query and answer caches stay local (a fresh worker tokenises and searches again);
the query vectors are also shared, under the pointer `judgements.QUERY_VECTORS + model`,
updated when a run embedded new queries, so no worker pays for a query embedded before.
Every write is atomic; a cache file that cannot be read is set aside once and counts as
absent. No Dagster.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from brain_pipeline.evaluation import judgements
from brain_pipeline.evaluation.known_item_gate import KnownItemBaseline
from brain_pipeline.evaluation.known_items import KnownItem
from brain_pipeline.state.blobs import BlobError
from brain_pipeline.state.code_digest import code_digest
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.memory import Memory
from brain_pipeline.utils.atomic import atomic_write_bytes
from brain_pipeline.utils.damage import healed
from brain_pipeline.utils.digest import value_digest

NO_BASELINE = (
    "no known-item baseline yet (nothing published since the known-item check began): "
    "the check passes; the next publication records one"
)


def directory(layout: StateLayout) -> Path:
    return layout.state_dir / "known-items"


def _read_json(path: Path, what: str) -> Any:
    """The cache file's JSON, or None when it is absent or cannot be read (a cache miss
    costs a search, never the evaluation)."""

    def load() -> Any:
        try:
            return json.loads(path.read_bytes())
        except OSError:
            return None

    return healed(path, load, what=what, consequence="rebuilt (a cache miss)")


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    atomic_write_bytes(path, payload.encode("utf-8"))


def _query_code() -> str:
    return code_digest("brain_pipeline.evaluation.known_items")


def load_queries(layout: StateLayout) -> dict[str, str | None]:
    data = _read_json(directory(layout) / "queries.json", "known-item query cache")
    if not isinstance(data, dict) or data.get("version") != _query_code():
        return {}
    queries = data.get("queries")
    return dict(queries) if isinstance(queries, dict) else {}


def save_queries(layout: StateLayout, queries: Mapping[str, str | None], live: set[str]) -> None:
    """Keep the queries of live ids only (the file stays the size of the store)."""
    kept = {i: q for i, q in queries.items() if i in live}
    _write_json(directory(layout) / "queries.json", {"version": _query_code(), "queries": kept})


def load_answers(layout: StateLayout) -> dict[str, Any]:
    data = _read_json(directory(layout) / "answers.json", "known-item answer cache")
    return data if isinstance(data, dict) else {}


def save_answers(layout: StateLayout, answers: Mapping[str, Any]) -> None:
    _write_json(directory(layout) / "answers.json", dict(answers))


def candidate_key(store_sha256: str | None, embeddings_sha256: str | None) -> str:
    return value_digest({"store": store_sha256, "embeddings": embeddings_sha256})[:24]


def save_candidate(
    memory: Memory,
    key: str,
    items: Sequence[KnownItem],
    area_chunks: Mapping[str, int],
    notes: Sequence[str],
) -> None:
    data = {
        "items": [item.to_dict() for item in items],
        "area_chunks": dict(area_chunks),
        "notes": list(notes),
    }
    judgements.move(memory, judgements.CANDIDATE + key, judgements.put_json(memory, data))


def _parse(data: Any) -> tuple[list[KnownItem], dict[str, int]]:
    """A stored candidate's or baseline's items and chunks per area; KeyError, TypeError or
    ValueError for a shape this code does not read, checked by the fields themselves (no
    format number to bump; the `"format": 1` of an older release's file is ignored)."""
    if not isinstance(data, dict):
        raise ValueError("not a known-item file")
    items = [KnownItem.from_dict(i) for i in data["items"]]
    chunks = {str(a): int(n) for a, n in dict(data["area_chunks"]).items()}
    return items, chunks


def record_baseline(
    memory: Memory,
    key: str,
    *,
    kind: str,
    note: str | None = None,
    now: Callable[[], datetime] | None = None,
) -> str:
    """Make candidate `key` the known-item baseline; the one line saying what happened."""
    data = judgements.pointed(memory, judgements.CANDIDATE + key)
    if data is None:
        return clear_baseline(memory, "no known items were kept for this store")
    _parse(data)  # refuse to copy what could not be read back
    when = (now or (lambda: datetime.now(UTC)))().isoformat(timespec="seconds")
    entry = {**data, "kind": kind, "note": note, "when": when, "candidate": key}
    judgements.move(memory, judgements.KNOWN_ITEMS, judgements.put_json(memory, entry))
    return f"known items: {len(data['items'])} known items recorded as the baseline ({kind})"


def clear_baseline(memory: Memory, why: str) -> str:
    """No known-item baseline (the published store has no known items): asking the next
    build about another store's passages would blame it for the difference."""
    judgements.move(memory, judgements.KNOWN_ITEMS, judgements.CLEARED)
    return (
        f"known items: {why}; the known-item baseline is cleared (the check passes until "
        "the next publication records one)"
    )


def load_baseline(memory: Memory) -> KnownItemBaseline | str:
    """The known-item baseline, or the one line saying why there is none."""
    try:
        data = judgements.pointed(memory, judgements.KNOWN_ITEMS)
    except (BlobError, ValueError) as exc:
        return f"no known-item baseline: its blob is unreadable ({exc}): the check passes"
    if data is None:
        return NO_BASELINE
    try:
        items, chunks = _parse(data)
    except (KeyError, TypeError, ValueError):
        return (
            "no known-item baseline: it is of another format: the check passes; "
            "the next publication records one"
        )
    how = "accepted" if data.get("kind") == "accepted" else "published"
    note = f" ({data['note']})" if data.get("note") else ""
    describe = f"known items of the store {how} {data.get('when', '?')}{note}"
    candidate = data.get("candidate")
    return KnownItemBaseline(
        tuple(items),
        chunks,
        describe,
        candidate=candidate if isinstance(candidate, str) else None,
        digest=value_digest({"items": data["items"], "area_chunks": data["area_chunks"]}),
    )


def load_query_vectors(
    layout: StateLayout, model: str, memory: Memory | None = None
) -> dict[str, list[float]]:
    """Known-item query vectors made by `model`: a query is embedded once, ever (by any
    worker: without the local copy, the shared one under `judgements.QUERY_VECTORS`)."""
    data = _read_json(directory(layout) / "query-vectors.json", "known-item query vectors")
    if (not isinstance(data, dict) or data.get("model") != model) and memory is not None:
        with contextlib.suppress(BlobError, ValueError):
            data = judgements.pointed(memory, judgements.QUERY_VECTORS + model)
    if not isinstance(data, dict) or data.get("model") != model:
        return {}
    vectors = data.get("vectors")
    return dict(vectors) if isinstance(vectors, dict) else {}


def save_query_vectors(
    layout: StateLayout,
    model: str,
    vectors: Mapping[str, list[float]],
    keep: set[str],
    share: Memory | None = None,
) -> None:
    """Keep the vectors of the queries still asked (the baseline's and the candidate's);
    `share`: also for every worker (when new queries were embedded)."""
    data = {"model": model, "vectors": {q: v for q, v in vectors.items() if q in keep}}
    _write_json(directory(layout) / "query-vectors.json", data)
    if share is not None:
        digest = judgements.put_json(share, data)
        judgements.move(share, judgements.QUERY_VECTORS + model, digest)
