from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import pytest

from brain_pipeline.corpus.observation import files_digest
from brain_pipeline.publishing.manifest import (
    PublishManifest,
    build_manifest,
)
from brain_pipeline_tests.publishing.conftest import (
    AGENT_MODEL,
    SampleBuild,
    make_embeddings,
    source_of,
)


def test_manifest_describes_the_bytes(build: SampleBuild) -> None:
    m = build_manifest(
        build.store,
        build.embeddings,
        build.chunks,
        {"bm25": {"ndcg@10": 0.5}},
        "f" * 64,
        "run-1",
    )
    assert m.store.sha256 == hashlib.sha256(build.store_bytes).hexdigest()
    assert m.store.size == len(build.store_bytes)
    assert m.embeddings is not None
    assert m.embeddings.sha256 == hashlib.sha256(build.embeddings_bytes).hexdigest()
    assert m.chunk_count == 5
    assert m.chunks_per_area == {"aws-tutor": 3, "python-tutor": 2}
    assert (m.embedding_model, m.embedding_dimension, m.vectors_count) == (AGENT_MODEL, 8, 5)
    assert m.vector_coverage == 1.0
    assert m.evaluation == {"bm25": {"ndcg@10": 0.5}}
    assert (m.corpus_digest, m.run_id) == ("f" * 64, "run-1")
    assert m.published_at.endswith("Z")


def test_manifest_parses_the_store_when_chunks_are_not_given(build: SampleBuild) -> None:
    given = build_manifest(build.store, None, build.chunks, published_at="t")
    parsed = build_manifest(build.store, None, published_at="t")
    assert parsed == given
    assert parsed.embeddings is None and parsed.embeddings_note


def test_coverage_counts_only_store_chunks_with_vectors(build: SampleBuild) -> None:
    ids = [c.id for c in build.chunks[:2]] + ["zzzzzzzzzzzz"]  # 2 of 5, plus a stranger
    m = build_manifest(build.store, source_of(make_embeddings(AGENT_MODEL, ids)), build.chunks)
    assert m.vector_coverage == pytest.approx(2 / 5)
    assert m.vectors_count == 3


def test_unreadable_embeddings_are_described_as_absent(build: SampleBuild) -> None:
    m = build_manifest(build.store, source_of(b"NOTMAGIC" + bytes(40)), build.chunks)
    assert m.embeddings is None
    assert m.embeddings_note is not None and "unreadable" in m.embeddings_note


def test_json_round_trip_is_stable(build: SampleBuild) -> None:
    m = build_manifest(build.store, build.embeddings, build.chunks, {"a": 1.5}, None, None)
    raw = m.to_json()
    text = raw.decode()
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2) + "\n"
    assert PublishManifest.from_json(raw) == m
    assert PublishManifest.from_json(raw).to_json() == raw


def test_from_json_rejects_garbage() -> None:
    with pytest.raises(ValueError):
        PublishManifest.from_json(b"[1, 2]")
    with pytest.raises(ValueError):
        PublishManifest.from_json(b'{"store": null}')
    with pytest.raises(ValueError):
        PublishManifest.from_json(b"{not json")


def test_same_content_ignores_time_and_run_only(build: SampleBuild) -> None:
    m = build_manifest(build.store, None, build.chunks, {"x": 1}, "abc", "run-1")
    assert m.same_content(replace(m, published_at="1999-01-01T00:00:00Z", run_id="run-2"))
    assert not m.same_content(replace(m, evaluation={"x": 2}))
    assert not m.same_content(replace(m, corpus_digest="abd"))


def test_without_embeddings_records_why(build: SampleBuild) -> None:
    m = build_manifest(build.store, build.embeddings, build.chunks)
    bare = m.without_embeddings("because")
    assert bare.embeddings is None and bare.embedding_model is None
    assert bare.vector_coverage == 0.0 and bare.embeddings_note == "because"
    assert [a.filename for a in bare.artifacts()] == ["knowledge-store.json"]


def test_markdown_shows_the_figures(build: SampleBuild) -> None:
    m = build_manifest(
        build.store,
        build.embeddings,
        build.chunks,
        {"hybrid": {"ndcg@10": 0.8125}},
        None,
        "run-7",
    )
    md = m.to_markdown()
    assert "| aws-tutor | 3 |" in md and "| python-tutor | 2 |" in md
    assert "hybrid.ndcg@10 | 0.8125" in md
    assert m.store.sha256 in md and AGENT_MODEL in md and "run-7" in md



def test_markdown_shows_area_names_as_text_not_markup(build: SampleBuild) -> None:
    m = build_manifest(build.store, build.embeddings, build.chunks, None, None, "run-7")
    hostile = replace(
        m,
        chunks_per_area={"![x](http://evil.example/p.png)": 1, "a|b\nc": 2},
        embeddings=None,
        embeddings_note="<img src=http://evil.example/q.png>",
    )
    md = hostile.to_markdown()
    assert "| \\!\\[x\\]\\(http\\://evil.example/p.png\\) | 1 |" in md
    assert "| a\\|b c | 2 |" in md
    assert "**Vectors** none (\\<img src=http\\://evil.example/q.png\\>)" in md
    assert "![" not in md and "<img" not in md.replace("\\<img", "")


def test_files_digest_sees_content_paths_and_files() -> None:
    base = {"area/a.md": "aa", "area/b.md": "bb"}
    digest = files_digest(base)
    assert files_digest(dict(reversed(base.items()))) == digest  # order does not count
    assert files_digest({**base, "area/b.md": "bc"}) != digest
    assert files_digest({"area/a.md": "aa", "area/c.md": "bb"}) != digest
    assert files_digest({"area/a.md": "aa"}) != digest
    # Path/hash boundaries are unambiguous.
    assert files_digest({"ab": "c"}) != files_digest({"a": "bc"})


def test_counts_from_a_store_view_give_the_same_manifest() -> None:
    from brain_pipeline.corpus.store import Chunk, serialize_store
    from brain_pipeline.publishing.manifest import build_manifest

    chunks = [
        Chunk("a" * 12, "first passage text", "alpha", "alpha/x.md"),
        Chunk("b" * 12, "second passage text", "beta", "beta/y.md"),
        Chunk("c" * 12, "third passage text", "beta", "beta/y.md"),
    ]
    data = source_of(serialize_store(chunks))
    full = build_manifest(data, None, published_at="2026-01-01T00:00:00Z")
    counted = build_manifest(
        data,
        None,
        published_at="2026-01-01T00:00:00Z",
        counts=({"alpha": 1, "beta": 2}, [c.id for c in chunks]),
    )
    assert counted == full


def test_a_manifest_published_before_the_rename_keeps_its_corpus_digest(
    build: SampleBuild,
) -> None:
    """Older manifests called the digest `corpus_fingerprint`; status must still read it."""
    manifest = build_manifest(build.store, None, build.chunks, corpus_digest="ab" * 32)
    data = manifest.to_dict()
    data["corpus_fingerprint"] = data.pop("corpus_digest")
    assert PublishManifest.from_json(json.dumps(data)).corpus_digest == "ab" * 32
