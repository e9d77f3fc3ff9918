"""What sending every text whole costs on a real-sized corpus: texts cut, extra requests.

Issue #32: the builder used to cut every text whose local token estimate passed the
model's limit. Now every text goes out whole and only the service's own length refusal
(400 `the input token count (N) exceeds the maximum number of tokens allowed (2048)`)
cuts one (`truncate`) or leaves it without a vector (`skip`). This script measures, on a
corpus about the size of the one in the issue (~1,300 files, ~19,000 chunks), what that
costs against the test Gemini peer (`brain_pipeline_tests/peers/fake_gemini.py`, whose
token count is shaped like a subword tokenizer's and which refuses at 2,048 tokens as
the service does), driven through the real google-genai SDK by `build_embeddings`.

The corpus, deterministic:

* `--synthetic-files` Markdown files of English-like prose from bench_scale's generator
  (about 16 chunks each);
* the 5,183 SciFact abstracts (`--scifact`), ten to a file under one heading: real
  English with figures, two of them (10,000 characters each) over the peer's limit;
* what a local guess gets wrong: digit-heavy tables (`data/`), Cyrillic lexicon entries
  (`lexicon/`) and Japanese text with figures (`ja/`), 1 to 4.6 KB each, all within the
  peer's count.

Per policy it prints: chunks; texts over 2,048 UTF-8 bytes (what a pre-flight
`models.count_tokens` would have to ask about, one request each, since that endpoint
answers one total per call); texts the earlier estimate would have cut (the rule is
copied here only for this comparison); texts the peer counts over its limit; texts cut
(or skipped); requests sent, the minimum (one per 100 texts) and the extra requests the
refusals cost; and how many stored vectors equal the vector of the whole text.

Usage: python benchmarks/bench_length_refusals.py [--synthetic-files 835]
       [--scifact ../shared/datasets/scifact] [--dimension 256]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_scale import generate_corpus  # noqa: E402

from brain_pipeline.corpus.file_chunks import ingest_corpus  # noqa: E402
from brain_pipeline.corpus.store import Chunk  # noqa: E402
from brain_pipeline.embedding.builder import build_embeddings, local_memory  # noqa: E402
from brain_pipeline.embedding.gaps import read_gaps  # noqa: E402
from brain_pipeline.embedding.gemini import GeminiEmbedder  # noqa: E402
from brain_pipeline.embedding.limits import (  # noqa: E402
    TOO_LONG_POLICIES,
    TooLongPolicy,
    certainly_fits,
    limits_for,
)
from brain_pipeline.embedding.store_file import read_embeddings  # noqa: E402
from brain_pipeline.retrieval.vectors import quantize  # noqa: E402
from brain_pipeline_tests.peers.fake_gemini import (  # noqa: E402
    FakeGemini,
    fake_token_count,
    fake_vector,
)

KEY = "bench-length-key"
MODEL = "gemini-embedding-001"
DEFAULT_SCIFACT = REPO.parent / "shared" / "datasets" / "scifact"
SDK_MODE_VARIABLES = ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI",
                      "GOOGLE_GENAI_USE_ENTERPRISE", "GOOGLE_CLOUD_PROJECT",
                      "GOOGLE_CLOUD_LOCATION", "GOOGLE_GENAI_API_VERSION")


def earlier_estimate(text: str) -> int:
    """The estimate the builder cut by before #32 (for comparison only): an ASCII letter
    1/3 token, a space 0, an astral character 2, anything else 1."""
    total = sum(1 / 3 if c.isascii() and c.isalpha() else 0.0 if c == " "
                else 2.0 if ord(c) > 0xFFFF else 1.0 for c in text)
    return math.ceil(total - 1e-9)


def table(rng: random.Random) -> str:
    lines = ["| date | region | units | revenue | share |",
             "|------|--------|-------|---------|-------|"]
    for _ in range(rng.randint(20, 72)):
        n = rng.randrange(100_000)
        lines.append(f"| 2023-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} | "
                     f"R{rng.randrange(100):02d} | {n:,} | {n * 3.17:,.2f} | "
                     f"{(n % 1000) / 10:.1f}% |")
    return "\n".join(lines)


_WORDS = ["дом", "книга", "вода", "город", "человек", "работа", "время", "слово", "место",
          "жизнь", "дорога", "окно", "рука", "земля", "голова"]


def lexicon_entry(rng: random.Random) -> str:
    size = rng.randint(1500, 3200)
    head = rng.choice(_WORDS)
    parts = [f"**{head}** [ˈ{head}] (сущ., ж. р.)"]
    while sum(map(len, parts)) < size:
        w, other, see = rng.choice(_WORDS), rng.choice(_WORDS), rng.choice(_WORDS)
        parts.append(f"{rng.randint(1, 40)}. значение: «{w} стоит у {other}и»; мн. ч. {w}ы, "
                     f"род. п. {w}ов; ср. {other}, {see} (с. {rng.randint(1, 999)}).")
    return " ".join(parts)


def japanese(rng: random.Random) -> str:
    size = rng.randint(600, 2300)
    parts: list[str] = []
    while sum(map(len, parts)) < size:
        parts.append(f"{rng.randint(1990, 2024)}年{rng.randint(1, 12)}月の売上は"
                     f"{rng.randrange(10_000_000):,}円で、前年比{rng.randrange(300) / 10:.1f}%"
                     "増でした。")
    return "".join(parts)


def write_corpus(root: Path, synthetic_files: int, scifact: Path, seed: int) -> None:
    generate_corpus(root, synthetic_files, seed)
    science = root / "science"
    science.mkdir()
    docs = [json.loads(line) for line in (scifact / "corpus.jsonl").open(encoding="utf-8")]
    for start in range(0, len(docs), 10):
        body = [d["text"].strip() for d in docs[start : start + 10] if d["text"].strip()]
        (science / f"abstracts-{start // 10:04d}.md").write_text(
            f"# SciFact abstracts {start} to {start + 9}\n\n" + "\n\n".join(body) + "\n",
            encoding="utf-8")
    rng = random.Random(seed)
    for area, count, per_file, make in (("data", 8, 4, table), ("lexicon", 6, 5, lexicon_entry),
                                        ("ja", 4, 4, japanese)):
        (root / area).mkdir()
        for number in range(count):
            paragraphs = [f"# {area} {number}: reference material"]
            paragraphs += [make(rng) for _ in range(per_file)]
            (root / area / f"{area}-{number:02d}.md").write_text(
                "\n\n".join(paragraphs) + "\n", encoding="utf-8")


def measure(chunks: list[Chunk], server: FakeGemini, work: Path, policy: TooLongPolicy,
            dimension: int) -> None:
    server.reset()
    server.configure(api_key=KEY)
    # A build directory per policy: its own ledger, so neither reuses the other's vectors.
    (work / policy).mkdir()
    out = work / policy / "embeddings.bin"
    embedder = GeminiEmbedder(api_key=KEY, dimension=dimension, texts_per_minute=10_000_000)
    memory = local_memory(out)
    started = time.monotonic()
    with contextlib.closing(memory.ledger):
        report = build_embeddings(chunks, out, embedder, too_long=policy, memory=memory)
        seconds = time.monotonic() - started
        remembered = read_gaps(memory)
    stats = server.stats()
    minimum = math.ceil(len(chunks) / embedder.max_batch)
    store = read_embeddings(out, warn=print)
    assert store is not None
    content = {c.id: c.content for c in chunks}
    row_of = {chunk_id: row for row, chunk_id in enumerate(store.ids)}
    whole = sum(
        1 for chunk_id, row in row_of.items()
        if np.array_equal(store.vectors[row],
                          quantize(fake_vector(content[chunk_id], dimension)[None, :])[0]))
    print(f"\ntoo_long: {policy}")
    print(f"  texts cut (truncated)            {report.truncated}")
    print(f"  texts without a vector           {report.refused} "
          f"({', '.join(sorted(g.kind for g in remembered.values() if not g.has_vector)) or '-'})")
    print(f"  requests sent                    {stats.requests} "
          f"(minimum {minimum}: one per {embedder.max_batch} texts)")
    print(f"  extra requests                   {stats.requests - minimum} "
          f"({stats.refused} refused for a text's length)")
    print(f"  texts sent                       {len(stats.sent_texts)} "
          f"({len(stats.sent_texts) - len(chunks)} again after a refusal)")
    print(f"  stored vectors of the whole text {whole} of {len(store.ids)}")
    for gap in sorted(remembered.values(), key=lambda g: g.source):
        print(f"  - {gap.source} [{gap.chunk_id}] {gap.describe()}")
    print(f"  build wall time                  {seconds:.1f} s (not a figure to quote: "
          "loopback peer)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--synthetic-files", type=int, default=835)
    parser.add_argument("--scifact", type=Path, default=DEFAULT_SCIFACT)
    parser.add_argument("--dimension", type=int, default=256)
    parser.add_argument("--seed", type=int, default=32)
    args = parser.parse_args(argv)
    for name in SDK_MODE_VARIABLES:
        os.environ.pop(name, None)
    limit = limits_for(MODEL).max_tokens
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_corpus(work / "corpus", args.synthetic_files, args.scifact, args.seed)
        ingested = ingest_corpus(work / "corpus")
        chunks = ingested.chunks
        texts = [c.content for c in chunks]
        print(f"corpus: {ingested.files_seen} files, {len(chunks)} chunks "
              f"({ingested.duplicates_collapsed} duplicates collapsed)")
        print(f"  over {limit:,} UTF-8 bytes (a pre-flight count would ask about each) "
              f"{sum(1 for t in texts if not certainly_fits(t, limits_for(MODEL)))}")
        guessed = [t for t in texts if earlier_estimate(t) > limit]
        print(f"  over {limit:,} by the earlier estimate (cut before #32)       "
              f"{len(guessed)} ({sum(1 for t in guessed if fake_token_count(t) <= limit)} "
              "of them within the peer's count)")
        print(f"  over {limit:,} by the peer's count (refused by the 'service')   "
              f"{sum(1 for t in texts if fake_token_count(t) > limit)}")
        with FakeGemini(api_key=KEY) as server:
            os.environ["GOOGLE_GEMINI_BASE_URL"] = server.url
            for policy in TOO_LONG_POLICIES:
                measure(chunks, server, work, policy, args.dimension)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
