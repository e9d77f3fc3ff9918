"""Texts are sent whole; only the service's own verdict cuts or skips one (issue #32).

The fake Gemini peer counts tokens like a subword tokenizer (`fake_token_count`) and
refuses a text over the model's limit (2,048 for gemini-embedding-001) as the service
does. The corpus holds what a local guess gets wrong: digit-heavy tables, lexicon
entries in Cyrillic, CJK text with figures. Each is over 2,048 UTF-8 bytes (no cheap
bound proves it fits) and over 2,048 by the estimate an earlier version cut by, yet
within the service's count, so the agent's own ingest (which sends every text whole)
stores the vector of the whole text. Ours must be the same bytes.
"""

from __future__ import annotations

import json
import math
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from google import genai
from google.genai import types

from brain_pipeline.corpus.store import Chunk, chunk_id
from brain_pipeline.embedding.builder import MAX_SERVICE_CUTS, build_embeddings
from brain_pipeline.embedding.gaps import Gap
from brain_pipeline.embedding.protocol import EmbeddingInputRefused
from brain_pipeline.retrieval.vectors import encode_embeddings, quantize
from brain_pipeline_tests.embedding.helpers import API_KEY, gemini, remembered_gaps
from brain_pipeline_tests.peers.fake_gemini import FakeGemini, fake_token_count, fake_vector

DIM = 16
MODEL = "gemini-embedding-001"
LIMIT = 2048


def table(seed: int, rows: int = 70) -> str:
    lines = ["| date | region | units | revenue | share |",
             "|------|--------|-------|---------|-------|"]
    for i in range(rows):
        n = (i * 7919 + seed * 104729) % 100000
        lines.append(f"| 2023-{1 + i % 12:02d}-{1 + i % 28:02d} | R{(i * 13) % 97:02d} | "
                     f"{n:,} | {n * 3.17:,.2f} | {(n % 1000) / 10:.1f}% |")
    return "\n".join(lines)


def lexicon(seed: int) -> str:
    words = ["дом", "книга", "вода", "город", "человек", "работа", "время", "слово"]
    parts: list[str] = []
    i = seed
    while sum(map(len, parts)) < 2900:
        w = words[i % len(words)]
        parts.append(f"**{w}** [ˈ{w}] (сущ., {i % 3 + 1}-е скл.) — значение {i}: «{w} стоит "
                     f"у реки»; мн. ч. {w}ы, род. п. {w}ов; ср. {words[(i + 3) % len(words)]}.")
        i += 1
    return " ".join(parts)


def cjk(seed: int) -> str:
    parts: list[str] = []
    i = seed
    while sum(map(len, parts)) < 2300:
        parts.append(f"{2000 + i % 25}年{1 + i % 12}月の売上は{(i * 7919) % 1000000:,}円で、"
                     f"前年比{(i * 37) % 200 / 10:.1f}%増でした。")
        i += 1
    return "".join(parts)


def earlier_estimate(text: str) -> int:
    """The estimate the previous version cut by (kept here only to show that this corpus
    is the one it got wrong): an ASCII letter 1/3 token, a space 0, an astral character
    2, anything else (every digit, every non-ASCII letter) 1."""
    total = sum(1 / 3 if c.isascii() and c.isalpha() else 0.0 if c == " "
                else 2.0 if ord(c) > 0xFFFF else 1.0 for c in text)
    return math.ceil(total - 1e-9)


def _chunk(text: str, source: str) -> Chunk:
    return Chunk(chunk_id(text), text, source.split("/")[0], source, "Heading")


def guessed_long() -> list[Chunk]:
    texts = [(table(s), f"data/table-{s}.md") for s in range(3)]
    texts += [(lexicon(s), f"lexicon/entry-{s}.md") for s in range(3)]
    texts += [(cjk(s), f"ja/report-{s}.md") for s in range(2)]
    return [_chunk(text, source) for text, source in texts]


def corpus(extra: Sequence[Chunk] = ()) -> list[Chunk]:
    ordinary = [_chunk(f"Paragraph {i} explains how the pipeline keeps its vectors in step "
                       "with the store.", f"notes/file{i % 4}.md") for i in range(150)]
    chunks = ordinary[:60] + guessed_long() + ordinary[60:] + list(extra)
    return chunks


def really_long() -> Chunk:
    return _chunk(table(9, rows=400), "data/huge-table.md")


def whole_vectors(server: FakeGemini, texts: Sequence[str]) -> np.ndarray:
    """What the agent's ingest stores: every text sent whole, 100 to a request as the
    agent sends them, through the real SDK to the same peer (not through our embedder);
    the peer's statistics are cleared afterwards."""
    client = genai.Client(api_key=API_KEY, http_options=types.HttpOptions(base_url=server.url))
    config = types.EmbedContentConfig(task_type="RETRIEVAL_DOCUMENT", output_dimensionality=DIM)
    rows = []
    for start in range(0, len(texts), 100):
        batch = list(texts[start : start + 100])
        answer = client.models.embed_content(model=MODEL, contents=batch, config=config)
        assert answer.embeddings and len(answer.embeddings) == len(batch)
        rows += [e.values for e in answer.embeddings]
    settings = server.settings
    server.reset()
    server.configure(api_key=settings.api_key, max_input_tokens=settings.max_input_tokens)
    return quantize(np.array(rows, dtype=np.float64))


def peer_stats(server: FakeGemini) -> dict[str, object]:
    """The peer's own figures, read over HTTP as another process would."""
    with urllib.request.urlopen(f"{server.url}/stats") as answer:
        stats: dict[str, object] = json.loads(answer.read())
    return stats


def test_the_corpus_is_what_a_guess_gets_wrong() -> None:
    for chunk in guessed_long():
        assert len(chunk.content.encode("utf-8")) > LIMIT, chunk.source  # no bound proves it
        assert earlier_estimate(chunk.content) > LIMIT, chunk.source  # the estimate cut it
        assert fake_token_count(chunk.content) <= LIMIT, chunk.source  # the service takes it
    assert fake_token_count(really_long().content) > LIMIT


def test_texts_a_guess_would_cut_are_embedded_whole_byte_for_byte(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    chunks = corpus()
    expected = encode_embeddings(MODEL, [c.id for c in chunks],
                                 whole_vectors(gemini_server, [c.content for c in chunks]))
    out = tmp_path / "embeddings.bin"
    report = build_embeddings(chunks, out, gemini())
    assert out.read_bytes() == expected
    assert (report.embedded, report.truncated, report.refused) == (len(chunks), 0, 0)
    stats = peer_stats(gemini_server)
    assert stats["sent_texts"] == [c.content for c in chunks]  # each whole, once
    assert (stats["requests"], stats["refused"]) == (math.ceil(len(chunks) / 100), 0)
    assert remembered_gaps(tmp_path) == {}


def test_a_text_really_over_the_limit_is_cut_once_named_and_embedded(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    huge = really_long()
    chunks = corpus([huge])
    others = [c for c in chunks if c is not huge]
    whole = whole_vectors(gemini_server, [c.content for c in others])
    log: list[str] = []
    out = tmp_path / "embeddings.bin"
    report = build_embeddings(chunks, out, gemini(), log=log.append)

    stats = peer_stats(gemini_server)
    sent = stats["sent_texts"]
    assert isinstance(sent, list)
    heads = [t for t in sent if t != huge.content and huge.content.startswith(t)]
    assert len(heads) == 1 and sent.count(huge.content) == 1  # whole once, then one cut
    head = heads[0]
    assert fake_token_count(head) <= LIMIT < fake_token_count(huge.content)
    # one extra request: the refused batch went again with the head in the text's place
    assert (stats["requests"], stats["refused"]) == (math.ceil(len(chunks) / 100) + 1, 1)
    assert (report.embedded, report.truncated, report.refused) == (len(chunks), 1, 0)

    expected_rows = np.vstack([whole, quantize(fake_vector(head, DIM)[None, :])])
    assert out.read_bytes() == encode_embeddings(
        MODEL, [c.id for c in others] + [huge.id], expected_rows)
    note = remembered_gaps(tmp_path)[huge.id]
    assert (note.kind, note.source, note.tokens) == (
        "truncated", "data/huge-table.md", fake_token_count(huge.content))
    assert f"service's count of {note.tokens}" in note.reason
    named = [line for line in log if huge.id in line]
    assert len(named) == 1 and "data/huge-table.md" in named[0]

    gemini_server.reset()
    gemini_server.configure(api_key=API_KEY)
    build_embeddings(chunks, out, gemini())
    assert peer_stats(gemini_server)["sent_texts"] == []  # the head's vector is kept, noted


def test_skip_skips_only_what_the_service_refuses(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    huge = really_long()
    chunks = corpus([huge])
    others = [c for c in chunks if c is not huge]
    whole = whole_vectors(gemini_server, [c.content for c in others])
    out = tmp_path / "embeddings.bin"
    report = build_embeddings(chunks, out, gemini(), too_long="skip")
    assert out.read_bytes() == encode_embeddings(MODEL, [c.id for c in others], whole)
    assert (report.embedded, report.refused, report.truncated) == (len(others), 1, 0)
    gap = remembered_gaps(tmp_path)[huge.id]
    assert (gap.kind, gap.source, gap.tokens) == ("too_long", "data/huge-table.md",
                                                  fake_token_count(huge.content))
    second = chunks[100:]  # the batch holding the over-long text, which is last
    assert peer_stats(gemini_server)["sent_texts"] == [c.content for c in chunks] + [
        c.content for c in second[:-1]]  # refused, then the rest of its batch again

    gemini_server.reset()
    gemini_server.configure(api_key=API_KEY)
    build_embeddings(chunks, out, gemini(), too_long="skip")
    assert peer_stats(gemini_server)["sent_texts"] == []  # the verdict is remembered


def test_a_head_the_service_still_counts_over_is_cut_again_in_its_proportion(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    # tokens crowd at the start: a dense run of symbols (1 token each), then long words
    # (1 token per 4 letters), so the first proportional cut still holds too many
    crowded = "|." * 500 + " lorem" * 5000
    chunks = [*corpus()[:10], _chunk(crowded, "data/crowded.md")]
    report = build_embeddings(chunks, tmp_path / "e.bin", gemini())
    assert (report.embedded, report.truncated, report.refused) == (11, 1, 0)
    sent = peer_stats(gemini_server)["sent_texts"]
    assert isinstance(sent, list)
    tries = [t for t in sent if crowded.startswith(t)]
    assert len(tries) == 3 and len(tries[0]) > len(tries[1]) > len(tries[2])
    assert [fake_token_count(t) > LIMIT for t in tries] == [True, True, False]
    assert remembered_gaps(tmp_path)[chunks[-1].id].tokens == fake_token_count(crowded)


class _AlwaysOverLimit:
    """A provider of our own whose service counts one text over its limit however short:
    the cuts must stop, and every other text must reach it whole."""

    name = "strict"
    dimension = 4
    max_batch = 8

    def __init__(self, refused: str) -> None:
        self.refused = refused
        self.calls: list[list[str]] = []

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        for index, text in enumerate(texts):
            if self.refused.startswith(text):
                raise EmbeddingInputRefused(
                    f"* requests[{index}].content: the input token count (9000) exceeds "
                    "the maximum number of tokens allowed (2048).", index)
        return np.array([[1.0, 2.0, 3.0, float(len(t))] for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        raise NotImplementedError


def test_cuts_are_bounded_and_other_providers_get_whole_texts(tmp_path: Path) -> None:
    chunks = corpus()[:7] + [really_long()]
    provider = _AlwaysOverLimit(chunks[-1].content)
    report = build_embeddings(chunks, tmp_path / "e.bin", provider)  # type: ignore[arg-type]
    assert (report.embedded, report.refused, report.truncated) == (7, 1, 0)
    assert len(provider.calls) == 1 + MAX_SERVICE_CUTS + 1  # whole, cuts, then the rest
    assert provider.calls[0] == [c.content for c in chunks]
    gap = remembered_gaps(tmp_path)[chunks[-1].id]
    assert gap.kind == "refused" and f"after {MAX_SERVICE_CUTS} cut(s)" in gap.reason


def test_length_decisions_an_earlier_estimate_made_are_redone_once(
    gemini_server: FakeGemini, tmp_path: Path
) -> None:
    chunks = corpus()[:58] + guessed_long()[:2]
    cut, skipped = chunks[-2], chunks[-1]
    refused = chunks[0]
    out = tmp_path / "embeddings.bin"
    whole = whole_vectors(gemini_server, [c.content for c in chunks])
    stale_head = quantize(fake_vector(cut.content[:1000], DIM)[None, :])[0]
    previous = whole.copy()
    previous[-2] = stale_head
    keep = [i for i in range(len(chunks)) if chunks[i] not in (skipped, refused)]
    out.write_bytes(encode_embeddings(MODEL, [chunks[i].id for i in keep], previous[keep]))

    def row(chunk: Chunk, kind: str, reason: str) -> dict[str, object]:
        return {"chunk_id": chunk.id, "kind": kind, "reason": reason, "model": MODEL,
                "dimension": DIM, "policy": "truncate", "source": chunk.source,
                "heading": "Heading", "estimated_tokens": 2831}

    gaps = tmp_path / "state" / "embedding-gaps.json"  # a build directory's before the ledger
    gaps.parent.mkdir()
    gaps.write_text(json.dumps({"schema": 1, "gaps": [
        row(cut, "truncated", "2048 estimated tokens kept of about 2831"),
        row(skipped, "too_long", "about 2831 estimated tokens, over the limit of 2048"),
        row(refused, "refused", "Gemini refused a text (400 INVALID_ARGUMENT: ...)"),
    ]}), encoding="ascii")
    read = remembered_gaps(tmp_path)
    assert read[cut.id].by_estimate and read[skipped.id].by_estimate
    assert not read[refused.id].by_estimate and read[cut.id].tokens is None

    build_embeddings(chunks, out, gemini())
    assert sorted(peer_stats(gemini_server)["sent_texts"]) == sorted(  # type: ignore[type-var]
        [cut.content, skipped.content])
    kept = [i for i in range(len(chunks)) if chunks[i] is not refused]
    assert out.read_bytes() == encode_embeddings(MODEL, [chunks[i].id for i in kept],
                                                 whole[kept])
    assert not gaps.exists()  # read into the ledger once
    assert set(remembered_gaps(tmp_path)) == {refused.id}


@pytest.mark.parametrize("kind", ["truncated", "too_long"])
def test_a_gap_made_by_the_estimate_applies_to_no_build(kind: str) -> None:
    gap = Gap("aaaaaaaaaaaa", kind, "estimated", MODEL, DIM, "truncate",  # type: ignore[arg-type]
              by_estimate=True)
    assert not gap.applies_to(MODEL, DIM, "truncate")
    assert Gap("aaaaaaaaaaaa", kind, "counted", MODEL, DIM,  # type: ignore[arg-type]
               "truncate").applies_to(MODEL, DIM, "truncate")
