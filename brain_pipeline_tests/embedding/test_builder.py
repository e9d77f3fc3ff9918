"""The incremental, resumable build of embeddings.bin, against the fake Gemini server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from brain_pipeline.corpus.store import Chunk
from brain_pipeline.embedding.builder import (
    EmbeddingBuildInterrupted,
    build_embeddings,
    local_memory,
    prune_embedding_ids,
)
from brain_pipeline.embedding.pacing import RetryPolicy
from brain_pipeline.embedding.packs import VectorPacks
from brain_pipeline.retrieval.vectors import decode_embeddings, encode_embeddings, quantize
from brain_pipeline_tests.embedding.helpers import corpus, gemini
from brain_pipeline_tests.peers.fake_gemini import FakeGemini, fake_vector

FILES = {"a.md": 12, "b.md": 9, "c.md": 7}


def _expected(chunks: list[Chunk], dim: int) -> np.ndarray:
    """What the agent should read: quantize() of the server's raw vectors, in store order."""
    return quantize(np.stack([fake_vector(c.content, dim) for c in chunks]))


def _packed(out: Path) -> set[str]:
    """The ids whose vectors the packs in `out`'s default ledger hold (not in a base)."""
    memory = local_memory(out)
    try:
        return VectorPacks(memory, "gemini-embedding-001", 16).load()[1]
    finally:
        memory.ledger.close()


def _assert_file_matches(path: Path, chunks: list[Chunk], model: str, dim: int) -> None:
    store = decode_embeddings(path.read_bytes())  # the agent-side decoding
    assert (store.model, store.dim) == (model, dim)
    assert store.ids == [c.id for c in chunks]
    np.testing.assert_array_equal(store.vectors, _expected(chunks, dim))


def test_full_build_writes_what_the_agent_should_read(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    chunks = corpus(FILES)
    out = tmp_path / "embeddings.bin"
    seen: list[tuple[int, int]] = []
    report = build_embeddings(chunks, out, gemini(batch_size=10),
                              progress=lambda d, t: seen.append((d, t)))
    _assert_file_matches(out, chunks, "gemini-embedding-001", 16)
    assert (report.chunks, report.embedded, report.reused, report.pruned) == (28, 28, 0, 0)
    assert report.coverage == 100.0
    assert report.requests == 3 and report.rate_limited == 0
    assert report.written and report.complete
    assert seen[0] == (0, 28) and seen[-1] == (28, 28)
    assert _packed(out) == set()  # the finished file is the base: no pack left to fetch
    assert gemini_server.stats().texts == 28


def test_rerun_with_nothing_changed_sends_nothing(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    chunks = corpus(FILES)
    out = tmp_path / "embeddings.bin"
    build_embeddings(chunks, out, gemini())
    before = out.read_bytes()
    sent = gemini_server.stats().requests
    report = build_embeddings(chunks, out, gemini())
    assert gemini_server.stats().requests == sent
    assert (report.embedded, report.reused, report.written) == (0, 28, False)
    assert out.read_bytes() == before


def test_editing_a_file_embeds_exactly_its_new_paragraphs(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    out = tmp_path / "embeddings.bin"
    build_embeddings(corpus(FILES), out, gemini())
    texts_before = gemini_server.stats().texts
    edited = corpus(FILES, edits={"b.md": {2, 5, 6}})
    report = build_embeddings(edited, out, gemini())
    assert gemini_server.stats().texts - texts_before == 3
    assert (report.embedded, report.reused, report.pruned) == (3, 25, 3)
    _assert_file_matches(out, edited, "gemini-embedding-001", 16)


def test_deleted_chunks_are_pruned(gemini_server: FakeGemini, tmp_path: Path) -> None:
    out = tmp_path / "embeddings.bin"
    build_embeddings(corpus(FILES), out, gemini())
    smaller = corpus({"a.md": 12, "c.md": 4})
    report = build_embeddings(smaller, out, gemini())
    assert (report.embedded, report.reused, report.pruned) == (0, 16, 12)
    _assert_file_matches(out, smaller, "gemini-embedding-001", 16)


@pytest.mark.parametrize(
    ("change", "reason"),
    [({"model": "text-embedding-004"}, "model changed"), ({"dimension": 32}, "dimension changed")],
)
def test_model_or_dimension_change_rebuilds(
    gemini_server: FakeGemini, tmp_path: Path, change: dict[str, object], reason: str
) -> None:
    chunks = corpus(FILES)
    out = tmp_path / "embeddings.bin"
    build_embeddings(chunks, out, gemini())
    report = build_embeddings(chunks, out, gemini(**change))
    assert reason in report.rebuilt_because
    assert (report.embedded, report.reused) == (28, 0)
    model = str(change.get("model", "gemini-embedding-001"))
    _assert_file_matches(out, chunks, model, int(change.get("dimension", 16)))  # type: ignore[call-overload]


@pytest.mark.parametrize(
    "damage", [lambda b: b"NOTPATB1" + b[8:], lambda b: b[: len(b) - 5]], ids=["magic", "truncated"]
)
def test_an_unreadable_previous_file_is_ignored_with_a_warning(
    gemini_server: FakeGemini, tmp_path: Path, damage: object
) -> None:
    chunks = corpus(FILES)
    made = tmp_path / "made" / "embeddings.bin"
    build_embeddings(chunks, made, gemini())
    # A damaged file of a build directory from before the ledger (nothing to import):
    out = tmp_path / "old" / "embeddings.bin"
    out.parent.mkdir()
    out.write_bytes(damage(made.read_bytes()))  # type: ignore[operator]
    messages: list[str] = []
    report = build_embeddings(chunks, out, gemini(), log=messages.append)
    assert report.warnings and "ignored embeddings.bin" in report.warnings[0]
    assert any(m.startswith("warning:") for m in messages)
    assert "unreadable" in report.rebuilt_because
    assert report.embedded == 28
    _assert_file_matches(out, chunks, "gemini-embedding-001", 16)

    # Once the ledger holds the vectors, a damaged local copy costs nothing: it is
    # written again from the packs, byte for byte.
    out.write_bytes(damage(out.read_bytes()))  # type: ignore[operator]
    report = build_embeddings(chunks, out, gemini())
    assert (report.embedded, report.reused) == (0, 28)
    assert out.read_bytes() == made.read_bytes()


def test_a_quota_refusal_mid_build_is_waited_out(gemini_server: FakeGemini, tmp_path: Path) -> None:
    gemini_server.configure(quota_texts=15, window_seconds=1.0)
    chunks = corpus({"a.md": 25})
    out = tmp_path / "embeddings.bin"
    report = build_embeddings(chunks, out, gemini(batch_size=10))
    assert report.rate_limited >= 1 and report.waited_seconds > 0
    assert report.rate_limited == gemini_server.stats().rate_limited
    _assert_file_matches(out, chunks, "gemini-embedding-001", 16)


def test_a_failure_keeps_finished_batches_and_the_next_run_resumes(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    chunks = corpus(FILES)
    out = tmp_path / "embeddings.bin"
    gemini_server.configure(script=[200, 200, 503])
    one_shot = RetryPolicy(max_attempts=1)
    with pytest.raises(EmbeddingBuildInterrupted, match="503") as caught:
        build_embeddings(chunks, out, gemini(batch_size=5, retry_policy=one_shot))
    assert caught.value.report.embedded == 10
    assert not out.exists()
    assert len(_packed(out)) == 10

    report = build_embeddings(chunks, out, gemini(batch_size=5))
    assert (report.reused, report.resumed, report.embedded) == (10, 10, 18)
    assert gemini_server.stats().texts == 28  # nothing embedded twice
    assert _packed(out) == set()  # the finished file became the base; its packs retired
    _assert_file_matches(out, chunks, "gemini-embedding-001", 16)


def test_a_damaged_pack_is_skipped_and_only_its_texts_embedded_again(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    chunks = corpus(FILES)
    out = tmp_path / "embeddings.bin"
    gemini_server.configure(script=[200, 200, 403])
    with pytest.raises(EmbeddingBuildInterrupted, match="refused access"):
        build_embeddings(chunks, out, gemini(batch_size=5))
    blobs = sorted((tmp_path / "state" / "blobs").rglob("*"))
    first_pack = [p for p in blobs if p.is_file()][0]
    first_pack.write_bytes(first_pack.read_bytes()[:-7])  # damaged (a disk, a bad copy)
    report = build_embeddings(chunks, out, gemini(batch_size=5))
    assert (report.resumed, report.embedded) == (5, 23)
    _assert_file_matches(out, chunks, "gemini-embedding-001", 16)


def test_allow_partial_writes_what_was_embedded(gemini_server: FakeGemini, tmp_path: Path) -> None:
    chunks = corpus(FILES)
    out = tmp_path / "embeddings.bin"
    gemini_server.configure(script=[200, 200, 503])
    report = build_embeddings(chunks, out, gemini(batch_size=10,
                                                  retry_policy=RetryPolicy(max_attempts=1)),
                              allow_partial=True)
    assert not report.complete
    assert report.missing == 8
    assert report.coverage == pytest.approx(100 * 20 / 28)
    _assert_file_matches(out, chunks[:20], "gemini-embedding-001", 16)


def test_prune_without_a_provider_keeps_live_vectors(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    out = tmp_path / "embeddings.bin"
    assert prune_embedding_ids([c.id for c in corpus(FILES)], out) is None
    build_embeddings(corpus(FILES), out, gemini())
    changed = corpus(FILES, edits={"a.md": {0}})
    report = prune_embedding_ids([c.id for c in changed], out)
    assert report is not None
    assert (report.reused, report.pruned, report.missing) == (27, 1, 1)
    _assert_file_matches(out, changed[1:], "gemini-embedding-001", 16)


def test_report_metadata_is_flat_and_complete(gemini_server: FakeGemini, tmp_path: Path) -> None:
    report = build_embeddings(corpus(FILES), tmp_path / "e.bin", gemini())
    meta = report.as_metadata()
    for key in ("reused", "embedded", "pruned", "coverage", "model", "dimension",
                "rebuilt_because", "requests", "rate_limited", "waited_seconds",
                "texts_per_minute"):
        assert key in meta
    assert all(isinstance(v, int | float | str) for v in meta.values())
    assert float(meta["texts_per_minute"]) > 0


def test_a_file_from_another_model_with_same_ids_is_not_mixed_in(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    chunks = corpus(FILES)
    out = tmp_path / "embeddings.bin"
    foreign = np.ones((len(chunks), 16), dtype=np.int8)
    out.write_bytes(encode_embeddings("other-model", [c.id for c in chunks], foreign))
    report = build_embeddings(chunks, out, gemini())
    assert report.reused == 0 and "other-model" in report.rebuilt_because
    _assert_file_matches(out, chunks, "gemini-embedding-001", 16)


def test_kill_9_mid_run_resumes_within_one_batch(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    n, batch = 400, 20
    out = tmp_path / "embeddings.bin"
    # The server answers six requests and holds the seventh: the kill lands while that
    # batch is in flight, whatever the speed of the machine (no race against a sleep).
    gemini_server.configure(hold_after_requests=6)
    child = subprocess.Popen(
        [sys.executable, "-m", "brain_pipeline_tests.embedding.build_child", str(out), str(n),
         str(batch)],
        env=dict(os.environ), cwd=Path(__file__).resolve().parents[2],
    )
    try:
        # Woken by the server when it holds the seventh request; 60 s is a hang guard.
        assert gemini_server.holding.wait(60), "the child never reached the held request"
        assert child.poll() is None, "the child finished or died before it was killed"
        assert gemini_server.stats().requests >= 7
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL
    assert not out.exists()
    saved = len(_packed(out))
    assert saved == 6 * batch  # every answered batch was packed, the held one was not

    gemini_server.configure(hold_after_requests=None)
    chunks = corpus({"big.md": n})
    report = build_embeddings(chunks, out, gemini(batch_size=batch))
    assert report.resumed == saved
    assert report.embedded == n - saved
    assert gemini_server.stats().texts <= n + batch  # at most the batch in flight was redone
    _assert_file_matches(out, chunks, "gemini-embedding-001", 16)
