"""One bad text or one bad answer never stops the build (builder + the fake's refusals)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from brain_pipeline.corpus.store import Chunk, chunk_id
from brain_pipeline.embedding.builder import (
    EmbeddingBuildInterrupted,
    build_embeddings,
)
from brain_pipeline.retrieval.vectors import encode_embeddings, quantize
from brain_pipeline_tests.embedding.helpers import API_KEY, gemini, remembered_gaps
from brain_pipeline_tests.peers.fake_gemini import FakeGemini, fake_token_count, fake_vector

DIM = 16


def worst_case_extra_requests(batch_size: int) -> int:
    """Requests beyond the first that one refused text costs when the refusal names no
    text: the batch is halved (larger half first) until the text is alone, and each
    halving sends both halves. With the text named it is always 1 (the rest, resent)."""
    extra = 0
    size = batch_size
    while size > 1:
        extra += 2
        size = (size + 1) // 2
    return extra


def _chunks(n: int, *, long_at: int | None = None, marker_at: tuple[int, ...] = ()) -> list[Chunk]:
    chunks = []
    for i in range(n):
        text = f"Paragraph {i} says something ordinary about the pipeline and its vectors."
        if i == long_at:
            text = "| cell | value |\n" * 1500  # ~27 KB, far over 2,048 tokens
        if i in marker_at:
            text += " BADTEXT"
        chunks.append(Chunk(chunk_id(text), text, "area", f"area/file{i % 3}.md",
                            f"Heading {i}"))
    return chunks


def _decode_by_contract(path: Path) -> tuple[str, int, list[str], np.ndarray]:
    """PATBEMB1 read as the agent's contract states it (not through our codec)."""
    data = path.read_bytes()
    magic, dim, count, name_len = struct.unpack_from("<8sHIH", data, 0)
    assert magic == b"PATBEMB1"
    offset = 16
    model = data[offset : offset + name_len].decode("utf-8")
    offset += name_len
    ids = [data[offset + 12 * i : offset + 12 * (i + 1)].decode("ascii").rstrip(" ")
           for i in range(count)]
    offset += 12 * count
    vectors = np.frombuffer(data, dtype=np.int8, count=dim * count, offset=offset)
    assert offset + dim * count == len(data)
    return model, dim, ids, vectors.reshape(count, dim)


def _reset(server: FakeGemini) -> None:
    """Zeroed statistics and default behaviour, for the next run."""
    server.reset()
    server.configure(api_key=API_KEY)


def _expected(chunks: list[Chunk]) -> np.ndarray:
    return quantize(np.stack([fake_vector(c.content, DIM) for c in chunks]))


def test_one_refused_text_in_a_batch_of_100_costs_one_request_and_is_not_resent(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    chunks = _chunks(100, marker_at=(90,))
    gemini_server.configure(refuse_substrings=["BADTEXT"])
    out = tmp_path / "embeddings.bin"
    report = build_embeddings(chunks, out, gemini())
    assert (report.embedded, report.refused, report.missing) == (99, 1, 1)
    assert gemini_server.stats().requests == 2  # the batch, then the 99 without requests[90]
    model, dim, ids, vectors = _decode_by_contract(out)
    good = [c for c in chunks if c is not chunks[90]]
    assert (model, dim, ids) == ("gemini-embedding-001", DIM, [c.id for c in good])
    np.testing.assert_array_equal(vectors, _expected(good))
    gap = remembered_gaps(tmp_path)[chunks[90].id]
    assert gap.kind == "refused" and "requests[90]" in gap.reason
    assert (gap.source, gap.heading) == ("area/file0.md", "Heading 90")

    _reset(gemini_server)
    again = build_embeddings(chunks, out, gemini())
    assert gemini_server.stats().sent_texts == []  # 0 texts sent on the next run
    assert (again.refused, again.refused_now, again.missing) == (1, 0, 1)

    again = build_embeddings(chunks, out, gemini(),
                             retry_refused=True)
    assert gemini_server.stats().sent_texts == [chunks[90].content]


def test_a_refusal_naming_no_text_is_found_by_bisection_within_the_stated_bound(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    chunks = _chunks(100, marker_at=(37,))
    gemini_server.configure(refuse_substrings=["BADTEXT"], name_refused_index=False)
    report = build_embeddings(chunks, tmp_path / "e.bin", gemini())
    assert (report.embedded, report.refused) == (99, 1)
    extra = gemini_server.stats().requests - 1
    assert worst_case_extra_requests(100) == 14
    assert 0 < extra <= 14


def test_the_worst_case_bound_is_reached_by_the_fake(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    chunks = _chunks(100, marker_at=(0,))  # always in the larger (first) half
    gemini_server.configure(refuse_substrings=["BADTEXT"], name_refused_index=False)
    build_embeddings(chunks, tmp_path / "e.bin", gemini())
    assert gemini_server.stats().requests - 1 == worst_case_extra_requests(100) == 14


def test_an_over_long_text_is_truncated_and_noted_by_default(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    chunks = _chunks(100, long_at=5)  # the fake's default limit: 2,048 tokens
    report = build_embeddings(chunks, tmp_path / "e.bin", gemini())
    assert (report.embedded, report.truncated, report.missing) == (100, 1, 0)
    stats = gemini_server.stats()
    assert (stats.refused, stats.requests) == (1, 2)  # sent whole, refused, the head fits
    note = remembered_gaps(tmp_path)[chunks[5].id]
    assert note.kind == "truncated" and note.tokens == fake_token_count(chunks[5].content)


def test_skip_policy_then_policy_change_sends_the_text_again(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    chunks = _chunks(20, long_at=3)
    out = tmp_path / "e.bin"
    report = build_embeddings(chunks, out, gemini(), too_long="skip")
    assert (report.refused, report.missing) == (1, 1)
    assert gemini_server.stats().sent_texts.count(chunks[3].content) == 1  # the service's say
    assert remembered_gaps(tmp_path)[chunks[3].id].kind == "too_long"
    _reset(gemini_server)
    build_embeddings(chunks, out, gemini(), too_long="skip")
    assert gemini_server.stats().sent_texts == []
    report = build_embeddings(chunks, out, gemini(), too_long="truncate")
    sent = gemini_server.stats().sent_texts
    assert sent[0] == chunks[3].content  # whole first: the verdict was under another policy
    assert len(sent) == 2 and chunks[3].content.startswith(sent[1]) and sent[1] != sent[0]
    assert (report.missing, report.truncated) == (0, 1)


def test_a_refusal_remembered_under_one_policy_is_sent_again_under_another(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    chunks = _chunks(10, marker_at=(4,))
    gemini_server.configure(refuse_substrings=["BADTEXT"])
    out = tmp_path / "e.bin"
    build_embeddings(chunks, out, gemini())
    _reset(gemini_server)
    build_embeddings(chunks, out, gemini(), too_long="skip")
    assert gemini_server.stats().sent_texts == [chunks[4].content]


@pytest.mark.parametrize("kind", ["zero", "nan", "inf"])
def test_bad_answers_are_never_stored(
    gemini_server: FakeGemini, tmp_path: Path, kind: str
) -> None:
    chunks = _chunks(30, marker_at=(2, 17))
    gemini_server.configure(bad_answers={"BADTEXT": kind})
    out = tmp_path / "e.bin"
    report = build_embeddings(chunks, out, gemini())
    assert (report.embedded, report.refused) == (28, 2)
    # one request, then one retry carrying only the two bad texts
    assert gemini_server.stats().batch_sizes == [30, 2]
    _, _, ids, vectors = _decode_by_contract(out)
    assert chunks[2].id not in ids and chunks[17].id not in ids
    assert vectors.any(axis=1).all()
    gaps = remembered_gaps(tmp_path)
    assert {gaps[chunks[2].id].kind, gaps[chunks[17].id].kind} == {"invalid"}


def test_a_bad_answer_retried_once_then_good_is_stored(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    chunks = _chunks(10, marker_at=(6,))
    gemini_server.configure(bad_answers={"BADTEXT": "nan"}, bad_answer_times=1)
    report = build_embeddings(chunks, tmp_path / "e.bin", gemini())
    assert (report.embedded, report.refused) == (10, 0)
    _, _, _, vectors = _decode_by_contract(tmp_path / "e.bin")
    np.testing.assert_array_equal(vectors, _expected(chunks))


def test_a_bad_key_is_never_bisected(gemini_server: FakeGemini, tmp_path: Path) -> None:
    chunks = _chunks(100)
    with pytest.raises(EmbeddingBuildInterrupted, match="API key"):
        build_embeddings(chunks, tmp_path / "e.bin", gemini(api_key="wrong-key"))
    assert gemini_server.stats().requests == 1
    assert remembered_gaps(tmp_path) == {}


def test_server_errors_keep_their_retry_and_are_not_bisected(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    chunks = _chunks(100)
    gemini_server.configure(script=[503] * 10)
    with pytest.raises(EmbeddingBuildInterrupted):
        build_embeddings(chunks, tmp_path / "e.bin", gemini())
    assert gemini_server.stats().batch_sizes == []
    assert gemini_server.stats().requests == 4  # the retry policy's attempts, whole batch


def test_a_request_refused_for_every_text_stops_instead_of_refusing_all(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    chunks = _chunks(4, marker_at=(0, 1, 2, 3))
    gemini_server.configure(refuse_substrings=["BADTEXT"], name_refused_index=False)
    with pytest.raises(EmbeddingBuildInterrupted, match="request itself is wrong"):
        build_embeddings(chunks, tmp_path / "e.bin", gemini())


def test_stored_zero_rows_are_healed_with_one_warning(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    chunks = _chunks(8)
    out = tmp_path / "e.bin"
    rows = _expected(chunks)
    rows[[1, 5]] = 0
    out.write_bytes(encode_embeddings("gemini-embedding-001", [c.id for c in chunks], rows))
    report = build_embeddings(chunks, out, gemini())
    assert report.healed == 2 and report.embedded == 2
    assert sum("zero vector" in w for w in report.warnings) == 1
    assert sorted(gemini_server.stats().sent_texts) == sorted([chunks[1].content,
                                                               chunks[5].content])
    _, _, _, vectors = _decode_by_contract(out)
    np.testing.assert_array_equal(vectors, _expected(chunks))


def test_a_text_with_a_lone_surrogate_is_embedded_as_sent(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    text = "Role: Lone \ud800 title - Topic: surrogate \udfff kept"
    chunks = [Chunk(chunk_id(text), text, "maps", "maps/roadmaps/x.json", "Lone \ud800 title")]
    report = build_embeddings(chunks, tmp_path / "e.bin", gemini())
    assert report.embedded == 1
    assert gemini_server.stats().sent_texts == [text]
    _, _, _, vectors = _decode_by_contract(tmp_path / "e.bin")
    np.testing.assert_array_equal(vectors, _expected(chunks))


def test_zero_rows_in_an_interrupted_runs_pack_are_healed(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    from brain_pipeline.embedding.builder import local_memory
    from brain_pipeline.embedding.packs import VectorPacks

    chunks = _chunks(6)
    out = tmp_path / "e.bin"
    rows = _expected(chunks)
    rows[3] = 0
    memory = local_memory(out)
    VectorPacks(memory, "gemini-embedding-001", DIM).add([c.id for c in chunks], rows)
    memory.ledger.close()
    report = build_embeddings(chunks, out, gemini())
    assert (report.healed, report.embedded) == (1, 1)
    assert gemini_server.stats().sent_texts == [chunks[3].content]
    _, _, _, vectors = _decode_by_contract(out)
    np.testing.assert_array_equal(vectors, _expected(chunks))


def test_a_head_the_service_refuses_for_another_reason_is_refused(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    chunks = _chunks(10)
    text = "BADTEXT " + "| cell | value |\n" * 1500  # over the limit, and unsupported
    chunks[2] = Chunk(chunk_id(text), text, "area", "area/bad.md", "")
    gemini_server.configure(refuse_substrings=["BADTEXT"])
    report = build_embeddings(chunks, tmp_path / "e.bin", gemini())
    assert (report.embedded, report.refused, report.truncated) == (9, 1, 0)
    gap = remembered_gaps(tmp_path)[chunks[2].id]
    assert gap.kind == "refused" and "not supported" in gap.reason


def test_a_dimension_change_sends_a_refused_text_again(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    chunks = _chunks(5, marker_at=(1,))
    gemini_server.configure(refuse_substrings=["BADTEXT"])
    out = tmp_path / "e.bin"
    build_embeddings(chunks, out, gemini())
    _reset(gemini_server)
    build_embeddings(chunks, out, gemini(dimension=24))
    assert chunks[1].content in gemini_server.stats().sent_texts


class _ScriptedProvider:
    """A provider of our own (not Gemini): answers from a script, to show every
    provider's answer is validated by the builder, not by the provider."""

    name = "scripted"
    dimension = 4
    max_batch = 8

    def __init__(self, answers: list[object]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        answer = self.answers.pop(0) if self.answers else "good"
        rows = np.array([[1.0, 2.0, 3.0, float(len(t))] for t in texts])
        if answer == "nan-first":
            rows[0, 1] = np.nan
        elif answer == "short":
            rows = rows[:-1]
        return rows

    def embed_query(self, text: str) -> np.ndarray:
        raise NotImplementedError


def test_any_providers_bad_rows_and_short_answers_are_handled(tmp_path: Path) -> None:
    chunks = _chunks(8)
    provider = _ScriptedProvider(["nan-first", "nan-first"])
    report = build_embeddings(chunks, tmp_path / "e.bin", provider)  # type: ignore[arg-type]
    assert (report.embedded, report.refused) == (7, 1)
    assert [len(c) for c in provider.calls] == [8, 1]  # the bad row asked for once more
    provider = _ScriptedProvider(["short", "short"])
    (tmp_path / "other").mkdir()  # a build directory of its own: nothing to reuse
    report = build_embeddings(chunks, tmp_path / "other" / "f.bin",
                              provider)  # type: ignore[arg-type]
    # a short answer: asked again, then split; the halves are answered in full
    assert (report.embedded, report.refused) == (8, 0)
    assert [len(c) for c in provider.calls] == [8, 8, 4, 4]


def test_a_text_over_the_services_count_is_cut_in_its_proportion_once(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    chunks = _chunks(10)
    spaced = "a " * 3000  # the fake counts 3,000 tokens
    chunks[4] = Chunk(chunk_id(spaced), spaced, "area", "area/spaced.md", "")
    gemini_server.configure(max_input_tokens=1200)
    out = tmp_path / "e.bin"
    report = build_embeddings(chunks, out, gemini())
    assert (report.embedded, report.refused, report.truncated) == (10, 0, 1)
    assert gemini_server.stats().requests == 2  # the head went again with the other nine
    note = remembered_gaps(tmp_path)[chunks[4].id]
    assert note.kind == "truncated" and "service's count of 3000" in note.reason
    head = gemini_server.stats().sent_texts[-10:][4]
    assert spaced.startswith(head) and len(head) < len(spaced)
    _reset(gemini_server)
    build_embeddings(chunks, out, gemini())
    assert gemini_server.stats().sent_texts == []  # the head's vector is kept, noted


def test_under_skip_a_service_length_refusal_is_a_refusal(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    spaced = "a " * 3000
    chunks = [*_chunks(3), Chunk(chunk_id(spaced), spaced, "area", "area/spaced.md", "")]
    gemini_server.configure(max_input_tokens=1200)
    report = build_embeddings(chunks, tmp_path / "e.bin", gemini(), too_long="skip")
    assert (report.embedded, report.refused, report.truncated) == (3, 1, 0)
    gap = remembered_gaps(tmp_path)[chunks[3].id]
    assert (gap.kind, gap.tokens) == ("too_long", 3000)
