"""Test helpers shared by the evaluation and CLI tests (no fixtures here)."""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from brain_pipeline.corpus.store import NO_HEADING, Chunk, chunk_id


class WordHashEmbedder:
    """An `Embedder` whose vector is the bag of a text's words hashed into few buckets.

    Texts sharing words point the same way, so dense search behaves predictably, and no
    model or network is needed. It counts what it is asked to embed.
    """

    name = "word-hash-16"
    dimension = 16
    max_batch = 4

    def __init__(self) -> None:
        self.documents_embedded = 0
        self.queries_embedded = 0

    def _vector(self, text: str) -> npt.NDArray[np.float32]:
        out = np.zeros(self.dimension, dtype=np.float32)
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            out[zlib.crc32(word.encode()) % self.dimension] += 1.0
        norm = float(np.linalg.norm(out))
        return out / norm if norm else out

    def embed_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.documents_embedded += len(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self._vector(t) for t in texts])

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        self.queries_embedded += 1
        return self._vector(text)


def make_chunk(
    content: str, area: str = "aws", source: str = "notes.md", heading: Any = NO_HEADING
) -> Chunk:
    return Chunk(chunk_id(content), content, area, source, heading)


def write_beir(root: Path) -> Path:
    """A five-document BEIR collection whose right answers are obvious by construction.

    d4 repeats d3 word for word (one chunk, two BEIR ids); q1 has a grade-2 judgment and
    a grade-0 one; q4 is unjudged and q5 only judged 0, so neither is evaluated.
    """
    root.mkdir(parents=True, exist_ok=True)
    corpus = [
        {"_id": "d1", "title": "Vitamin D", "text": "Vitamin D deficiency and bone fractures."},
        {"_id": "d2", "title": "Gut flora", "text": "The microbiome: bacteria and digestion."},
        {"_id": "d3", "title": "Sleep", "text": "Sleep deprivation harms memory."},
        {"_id": "d4", "title": "Sleep", "text": "Sleep deprivation harms memory."},
        {"_id": "d5", "title": "", "text": "Astronomy of distant stars."},
    ]
    queries = [
        {"_id": "q1", "text": "vitamin D and bone"},
        {"_id": "q2", "text": "gut bacteria"},
        {"_id": "q3", "text": "sleep and memory"},
        {"_id": "q4", "text": "unjudged"},
        {"_id": "q5", "text": "judged zero only"},
    ]
    qrels = [("q1", "d1", 2), ("q1", "d5", 0), ("q2", "d2", 1), ("q3", "d4", 1), ("q5", "d5", 0)]
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in corpus) + "\n")
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in qrels]
    (root / "qrels.tsv").write_text("\n".join(lines) + "\n")
    (root / "queries_train.jsonl").write_text(json.dumps({"_id": "t1", "text": "stars"}) + "\n")
    (root / "qrels_train.tsv").write_text("query-id\tcorpus-id\tscore\nt1\td5\t1\n")
    return root


_MEMORIES: dict[str, Any] = {}


def memory_at(build: Path) -> Any:
    """The default memory (SQLite ledger and blob folder in the build directory's state
    folder) of `build`, as `config.memory_of` opens it for a configuration using it."""
    from brain_pipeline.evaluation.judgements import ready
    from brain_pipeline.state.blobs import LocalBlobs
    from brain_pipeline.state.layout import StateLayout
    from brain_pipeline.state.ledger import Ledger, sqlite_url
    from brain_pipeline.state.memory import Memory

    layout = StateLayout.of(build)
    key = str(layout.build_dir)
    if key not in _MEMORIES:
        ledger = Ledger(sqlite_url(layout.ledger))
        _MEMORIES[key] = Memory(ledger, LocalBlobs(layout.blobs_dir), layout)
    return ready(_MEMORIES[key])
