"""The ledger's memory of chunks without a vector, or with a truncated one.

Why remember: a text the service refused (or counted over its limit under `skip`, or
kept getting an invalid answer) would be refused again, so it is not sent again until
the text (its chunk id), the model, the dimension or the `too_long` policy changes; a
person retries them on purpose with `brain-pipeline materialize --retry-refused`. A
truncated chunk has a vector, but of its head only, so it is noted too: the WARN check
on `embeddings` lists both, with source file, heading and reason.

Schema 1 files were written by a version that decided length by a local estimate
before sending. Their length decisions (`too_long`, `truncated`) are read back marked
`by_estimate`: they still describe the vectors that exist, but no longer apply, so the
next build sends those texts whole and lets the service decide. Their refusals and
invalid answers were the service's own and stay as they are.

Stored as one JSON blob with ASCII escapes (any text the store can hold, lone surrogates
in a roadmap heading included, is written and read back losslessly), named by the
ledger's `embedding-gaps` pointer, so every worker remembers the same refusals. The
`state/embedding-gaps.json` of a build directory from before the ledger is imported once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from brain_pipeline.state.blobs import BlobError
from brain_pipeline.state.memory import Memory

GapKind = Literal["refused", "too_long", "invalid", "truncated"]
LENGTH_KINDS = ("too_long", "truncated")


@dataclass(frozen=True)
class Gap:
    """One chunk the agent gets no vector (or a vector of its head only) for, and why."""

    chunk_id: str
    kind: GapKind
    reason: str
    model: str
    dimension: int
    policy: str
    source: str = ""
    heading: str = ""
    tokens: int | None = None
    """For a length decision, the service's own count of the whole text."""
    by_estimate: bool = False
    """A length decision of a schema-1 file, made by a local estimate: it applies to no
    build (see the module docstring)."""

    @property
    def has_vector(self) -> bool:
        return self.kind == "truncated"

    def applies_to(self, model: str, dimension: int, policy: str) -> bool:
        """Still valid for a build of `model` at `dimension` under `policy`."""
        return not self.by_estimate and (
            (self.model, self.dimension, self.policy) == (model, dimension, policy))

    def describe(self) -> str:
        """The reason as a person reads it in the check and the CLI."""
        return {
            "refused": f"refused by the service: {self.reason}",
            "too_long": f"too long and skipped: {self.reason}",
            "invalid": f"invalid answer: {self.reason}",
            "truncated": f"truncated: {self.reason}",
        }[self.kind]


POINTER = "embedding-gaps"
"""The ledger pointer naming the blob of the current gaps (shared by every worker)."""


def _decode(data: bytes) -> dict[str, Gap]:
    """Gaps of a JSON document; an unreadable one remembers nothing (its texts are simply
    sent again). A row is checked against `Gap`'s own fields (no schema number to bump):
    one that does not fit is skipped. A schema-1 file (marked so by the release that
    wrote it) is converted; a later `"schema": 2` mark is ignored."""
    try:
        document = json.loads(data.decode("ascii"))
    except ValueError:
        return {}
    if not isinstance(document, dict):
        return {}
    schema_1 = document.get("schema") == 1
    gaps: dict[str, Gap] = {}
    for item in document.get("gaps") or []:
        try:
            gap = _from_schema_1(item) if schema_1 else Gap(**item)
        except (TypeError, AttributeError):
            continue
        gaps[gap.chunk_id] = gap
    return gaps


def _encode(gaps: Iterable[Gap]) -> bytes:
    items: list[dict[str, Any]] = [asdict(g) for g in sorted(gaps, key=lambda g: g.chunk_id)]
    return json.dumps({"gaps": items}, ensure_ascii=True,
                      indent=1).encode("ascii")


def gaps_version(memory: Memory) -> str:
    """The digest of the current gaps ("" when none were ever recorded): forgetting
    refusals changes it, so the embedding step builds again."""
    _import_old_file(memory)
    return memory.ledger.pointer(POINTER) or ""


def read_gaps(memory: Memory) -> dict[str, Gap]:
    """The remembered gaps by chunk id."""
    version = gaps_version(memory)
    if not version:
        return {}
    try:
        return _decode(memory.blobs.get_bytes(version))
    except BlobError:
        return {}


def write_gaps(memory: Memory, gaps: Iterable[Gap]) -> None:
    """Replace the memory (the blob is ASCII JSON: lossless for any string); the last
    writer wins, never a torn mix of two."""
    blob = memory.blobs.put_bytes(_encode(gaps))
    while True:
        current = memory.ledger.pointer(POINTER)
        if current == blob or memory.ledger.set_pointer(POINTER, blob, expected=current):
            return


def _import_old_file(memory: Memory) -> None:
    """Once, on first use: a build directory's `state/embedding-gaps.json` from before the
    ledger becomes the ledger's gaps, and the file goes."""
    path = memory.layout.embedding_gaps
    if not path.exists() or memory.ledger.pointer(POINTER) is not None:
        return
    gaps = _decode(path.read_bytes())
    blob = memory.blobs.put_bytes(_encode(gaps.values()))
    memory.ledger.set_pointer(POINTER, blob, expected=None)
    path.unlink(missing_ok=True)


def _from_schema_1(item: dict[str, Any]) -> Gap:
    """A schema-1 row: its `estimated_tokens` was a guess, not a count, so it is dropped,
    and a length decision is marked as made by the estimate."""
    fields = {k: v for k, v in item.items() if k != "estimated_tokens"}
    return Gap(**fields, by_estimate=fields.get("kind") in LENGTH_KINDS)


def forget_refusals(memory: Memory) -> int:
    """Drop every remembered refusal (truncation notes stay: their vectors are fine), so
    the next build sends those texts again. Returns how many were forgotten."""
    gaps = read_gaps(memory)
    kept = [g for g in gaps.values() if g.has_vector]
    forgotten = len(gaps) - len(kept)
    if forgotten:
        write_gaps(memory, kept)
    return forgotten
