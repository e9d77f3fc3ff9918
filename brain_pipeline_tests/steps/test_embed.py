"""The embeddings step called with plain values and a toy embedder (no Dagster)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pytest

from brain_pipeline.embedding.store_file import read_embeddings
from brain_pipeline.state.records import read_record
from brain_pipeline.steps.contract import StepFailure
from brain_pipeline.steps.embed import embed_store, embeddings_code_version
from brain_pipeline.steps.ingest import assemble_knowledge_store, chunk_corpus, observe
from brain_pipeline_tests.steps.conftest import Project, StepLog
from brain_pipeline_tests.steps.handed import chunks_of, store_of


class ToyEmbedder:
    """Unit vectors seeded by each text's sha256: the same text, the same vector."""

    name = "toy-embedder"
    dimension = 8
    max_batch = 16

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        rows = [self.embed_query(t) for t in texts]
        return np.asarray(rows, dtype=np.float32).reshape(len(rows), self.dimension)

    def embed_query(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        vector = np.random.default_rng(seed).standard_normal(self.dimension).astype(np.float32)
        return vector / np.linalg.norm(vector)


def _ingest(project: Project, log: StepLog) -> None:
    chunk_corpus(project.cfg, observe(project.cfg), run_id="r", log=log)
    assemble_knowledge_store(project.cfg, chunks_of(project.cfg), run_id="r", log=log)


def test_every_chunk_gets_a_vector_and_a_rerun_embeds_nothing(
    project: Project, log: StepLog
) -> None:
    _ingest(project, log)
    embedder = ToyEmbedder()
    built = embed_store(
        project.cfg, store_of(project.cfg), make_embedder=lambda _cfg: embedder, run_id="r", log=log
    )
    assert len(embedder.texts) == 2
    stored = read_embeddings(project.layout.embeddings_file)
    assert stored is not None and stored.model == "toy-embedder" and len(stored.ids) == 2
    assert (
        built.data_version
        == hashlib.sha256(project.layout.embeddings_file.read_bytes()).hexdigest()
    )
    record = read_record(project.layout, "embeddings")
    assert record is not None and record.code_version == embeddings_code_version(project.cfg)

    again = ToyEmbedder()
    kept = embed_store(
        project.cfg, store_of(project.cfg), make_embedder=lambda _cfg: again, run_id="r2", log=log
    )
    assert again.texts == [] and kept.data_version == built.data_version
    assert kept.metadata["status"] == "unchanged"


def test_provider_none_embeds_nothing_and_says_so(project: Project, log: StepLog) -> None:
    _ingest(project, log)
    result = embed_store(
        project.cfg, store_of(project.cfg), make_embedder=lambda _cfg: None, run_id="r", log=log
    )
    assert not project.layout.embeddings_file.exists()
    assert result.data_version.startswith("absent-")
    assert result.metadata["provider_used"] == "none" and result.metadata["coverage"] == 0.0
    assert "embedding provider is 'none': nothing embedded" in log.infos


def test_embedding_before_the_store_names_the_step_to_run(project: Project, log: StepLog) -> None:
    with pytest.raises(StepFailure, match="embeddings needs knowledge_store"):
        embed_store(
            project.cfg, store_of(project.cfg), make_embedder=lambda _cfg: None, run_id="r", log=log
        )
