"""Fixtures for the evaluation tests: a tiny store and a deterministic embedder."""

from __future__ import annotations

import pytest

from brain_pipeline.corpus.store import Chunk
from brain_pipeline_tests.evaluation.helpers import WordHashEmbedder, make_chunk


@pytest.fixture
def embedder() -> WordHashEmbedder:
    return WordHashEmbedder()


@pytest.fixture
def store() -> list[Chunk]:
    """Two areas; each labelled passage is the only one sharing its query's key words."""
    return [
        make_chunk("Amazon VPC gives you a private network inside AWS."),
        make_chunk("S3 buckets hold objects; versioning keeps old copies."),
        make_chunk("IAM roles grant temporary credentials to services."),
        make_chunk("A subnet is a range of addresses inside a VPC."),
        make_chunk("Lambda runs functions without servers to manage."),
        make_chunk("Python lists are ordered and mutable.", area="python"),
        make_chunk("Dictionaries map keys to values in Python.", area="python"),
    ]
