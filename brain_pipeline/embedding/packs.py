"""Vectors shared by every worker: content-addressed packs in the blobs, named by the ledger.

Every batch the builder embeds becomes a "vector pack": a small PATBEMB1 blob (the same
codec as embeddings.bin: model, ids, int8 vectors) recorded as one row of the
`embedding_packs` table under its shape (model, dimension and the digest of the codec
that decides the bytes). A finished build records its embeddings.bin as the shape's
base once packs pile up, and the packs it covered go, so a worker with an empty build
directory fetches one base and a bounded number of packs, and pays only for what no
worker embedded yet. A pack is written (blob, then row) before the next request: a
worker killed mid-build loses at most the batch in flight, and any other worker resumes
from the packs. A blob without a row is invisible; a row whose blob is gone or damaged
is skipped (its texts are embedded again).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from brain_pipeline.retrieval.vectors import (
    NotAnEmbeddingStore,
    decode_embeddings,
    encode_embeddings,
)
from brain_pipeline.state.blobs import BlobError
from brain_pipeline.state.code_digest import code_digest
from brain_pipeline.state.memory import Memory

Int8Row = npt.NDArray[np.int8]
REBASE_AFTER_PACKS = 16
"""Packs of a shape after which a finished build records its file as the new base."""

DDL = """
CREATE TABLE IF NOT EXISTS embedding_packs (
  id {serial}, shape TEXT NOT NULL, kind TEXT NOT NULL, blob TEXT NOT NULL,
  vectors INTEGER NOT NULL, created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS embedding_packs_shape ON embedding_packs (shape, id)
"""


def shape_key(model: str, dimension: int) -> str:
    """What a vector's bytes depend on besides its text: model, dimension, the codec."""
    return f"{model}@{dimension}@{code_digest('brain_pipeline.retrieval.vectors')[:12]}"


@dataclass
class VectorPacks:
    """The packs of one shape, as one build reads and extends them."""

    memory: Memory
    model: str
    dimension: int
    log: Callable[[str], None] = field(default=lambda _message: None)
    covered: list[tuple[int, str]] = field(default_factory=list)
    """(row id, blob) of the rows this build has read or written: a rebase retires them."""
    has_base: bool = False

    def __post_init__(self) -> None:
        self.shape = shape_key(self.model, self.dimension)
        self.memory.ledger.ensure_tables("embedding", DDL)

    def load(self) -> tuple[dict[str, Int8Row], set[str]]:
        """Every stored vector of the shape, and the ids that came from packs (not a base)."""
        ledger = self.memory.ledger
        rows = ledger.query(
            "SELECT id, kind, blob FROM embedding_packs WHERE shape = ? ORDER BY id",
            (self.shape,),
        )
        bases = [r for r in rows if r[1] == "base"]
        latest = bases[-1][0] if bases else None
        vectors: dict[str, Int8Row] = {}
        from_packs: set[str] = set()
        for row_id, kind, blob in rows:
            if kind == "base" and row_id != latest:
                self.covered.append((int(row_id), str(blob)))
                continue
            try:
                store = decode_embeddings(self.memory.blobs.get_bytes(blob), copy=False)
            except (BlobError, NotAnEmbeddingStore) as exc:
                self.log(f"warning: skipped vector {kind} {blob[:12]}: {exc}")
                continue
            self.covered.append((int(row_id), str(blob)))
            self.has_base = self.has_base or kind == "base"
            for index, chunk_id in enumerate(store.ids):
                vectors[chunk_id] = store.vectors[index]
                if kind == "pack":
                    from_packs.add(chunk_id)
        return vectors, from_packs

    def _record(self, kind: str, blob: str, count: int) -> int:
        """One row (its id); one transaction, whatever the size of the batch."""
        rows = self.memory.ledger.query(
            "INSERT INTO embedding_packs (shape, kind, blob, vectors, created_at)"
            " VALUES (?, ?, ?, ?, ?) RETURNING id",
            (self.shape, kind, blob, count, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
            write=True,
        )
        return int(rows[0][0])

    def add(self, ids: list[str], vectors: npt.NDArray[np.int8]) -> None:
        """Make one embedded batch durable and visible to every worker."""
        blob = self.memory.blobs.put_bytes(encode_embeddings(self.model, ids, vectors))
        self.covered.append((self._record("pack", blob, len(ids)), blob))

    @property
    def packs(self) -> int:
        return len(self.covered)

    def rebase(self, path: Path, count: int) -> None:
        """Record the finished file as the shape's base and retire the rows it covers
        (another worker's packs recorded meanwhile stay)."""
        blob = self.memory.blobs.put_file(path)
        new_id = self._record("base", blob, count)
        retired = [(i, b) for i, b in self.covered if i != new_id]
        ledger = self.memory.ledger
        if retired:
            with ledger.transaction(write=True) as cursor:
                statement = ledger.sql("DELETE FROM embedding_packs WHERE id = ?")
                for row_id, _ in retired:
                    cursor.execute(statement, (row_id,))
            kept = {str(r[0]) for r in ledger.query("SELECT DISTINCT blob FROM embedding_packs")}
            for gone in {b for _, b in retired} - kept:
                self.memory.blobs.delete(gone)
        self.covered = [(new_id, blob)]
        self.has_base = True
