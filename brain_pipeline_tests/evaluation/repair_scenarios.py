"""Edits to labelled paragraphs of a copy of the sample corpus, for repair tests and the bench.

Each edit rewrites one labelled paragraph in its file and says what a correct repair
is: the new chunk id for a light edit (typo fix, re-wrap, added sentence), None for a
heavy one (split, deletion, rewrite), which must go to a person.
"""

from __future__ import annotations

import random
import re
import shutil
import textwrap
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from brain_pipeline.corpus.store import Chunk, chunk_id
from brain_pipeline.evaluation.fixture import Fixture

REPO = Path(__file__).resolve().parents[2]
SAMPLE_CORPUS = REPO / "examples" / "curated-content"
SAMPLE_FIXTURE = REPO / "examples" / "retrieval-eval.json"

LIGHT_KINDS = ("typo", "rewrap", "sentence", "typo+rewrap")
HEAVY_KINDS = ("split", "delete", "rewrite")
ADDED_SENTENCE = " Learners often meet this point again in practice questions."


@dataclass(frozen=True)
class Edit:
    """One edit of one labelled paragraph and the right answer for its old id."""

    kind: str
    old_id: str
    source: str
    expected: str | None
    """The id a correct repair maps to; None when a person must decide."""

    @property
    def light(self) -> bool:
        return self.kind in LIGHT_KINDS


def copy_sample(dest: Path) -> tuple[Path, Path]:
    """A private copy of the sample corpus and fixture under `dest`."""
    corpus = dest / "curated-content"
    shutil.copytree(SAMPLE_CORPUS, corpus)
    fixture = dest / "retrieval-eval.json"
    shutil.copyfile(SAMPLE_FIXTURE, fixture)
    return corpus, fixture


def _typo(text: str, rng: random.Random) -> str:
    """Introduce-or-fix style one-letter change: two adjacent letters of a long word swap."""
    spots = [
        m.start() + k
        for m in re.finditer(r"[A-Za-z]{6,}", text)
        for k in range(1, len(m.group()) - 2)
        if text[m.start() + k] != text[m.start() + k + 1]
    ]
    i = spots[rng.randrange(len(spots))]
    return text[:i] + text[i + 1] + text[i] + text[i + 2 :]


def _rewrap(text: str) -> str:
    return textwrap.fill(" ".join(text.split()), width=58)


def _sentences(text: str) -> list[str]:
    return re.split(r"(?<=[.!?])\s+", text.strip())


def _split(text: str) -> str:
    """Two paragraphs, cut at the sentence boundary nearest the middle."""
    sentences = _sentences(text)
    if len(sentences) < 2:
        words = text.split()
        half = len(words) // 2
        return " ".join(words[:half]) + "\n\n" + " ".join(words[half:])
    best = min(
        range(1, len(sentences)),
        key=lambda k: abs(len(" ".join(sentences[:k])) - len(text) / 2),
    )
    return " ".join(sentences[:best]) + "\n\n" + " ".join(sentences[best:])


def _rewrite(text: str, rng: random.Random) -> str:
    """Same words, new sentences: every sentence's words reordered."""
    out = []
    for sentence in _sentences(text):
        words = sentence.split()
        rng.shuffle(words)
        out.append(" ".join(words))
    return " ".join(out)


def edit_paragraph(corpus: Path, chunk: Chunk, kind: str, rng: random.Random) -> Edit:
    """Apply `kind` to the paragraph of `chunk` in its file under `corpus`."""
    path = corpus / chunk.source
    text = path.read_text(encoding="utf-8")
    if text.count(chunk.content) != 1:
        raise ValueError(f"{chunk.id}: paragraph not found exactly once in {chunk.source}")
    new: str
    if kind == "typo":
        new = _typo(chunk.content, rng)
    elif kind == "rewrap":
        new = _rewrap(chunk.content)
    elif kind == "sentence":
        new = chunk.content + ADDED_SENTENCE
    elif kind == "typo+rewrap":
        new = _rewrap(_typo(chunk.content, rng))
    elif kind == "split":
        new = _split(chunk.content)
    elif kind == "delete":
        new = ""
    elif kind == "rewrite":
        new = _rewrite(chunk.content, rng)
    else:
        raise ValueError(f"unknown edit kind {kind!r}")
    path.write_text(text.replace(chunk.content, new), encoding="utf-8")
    expected = chunk_id(new.strip()) if kind in LIGHT_KINDS else None
    return Edit(kind, chunk.id, chunk.source, expected)


def labelled_chunks(fixture: Fixture, chunks: list[Chunk]) -> list[Chunk]:
    """The labelled chunks of a store, in id order (a stable base for seeded choices)."""
    labelled = {i for q in fixture.queries for i in q.relevant}
    return sorted((c for c in chunks if c.id in labelled), key=lambda c: c.id)


def seeded_edits(
    corpus: Path,
    fixture: Fixture,
    chunks: list[Chunk],
    *,
    seed: int,
    n_light: int = 20,
    n_heavy: int = 5,
) -> list[Edit]:
    """Edit `n_light + n_heavy` distinct labelled paragraphs chosen by `seed`."""
    rng = random.Random(seed)
    chosen = rng.sample(labelled_chunks(fixture, chunks), n_light + n_heavy)
    kinds = [LIGHT_KINDS[i % len(LIGHT_KINDS)] for i in range(n_light)]
    kinds += [HEAVY_KINDS[i % len(HEAVY_KINDS)] for i in range(n_heavy)]
    return [edit_paragraph(corpus, c, k, rng) for c, k in zip(chosen, kinds, strict=True)]


@dataclass
class SampleProject:
    """A copy of the sample corpus and fixture, a config, and a build dir with history."""

    root: Path
    corpus: Path
    fixture: Path
    build: Path
    config: Path

    @classmethod
    def create(cls, root: Path) -> SampleProject:
        corpus, fixture = copy_sample(root)
        build = root / "build"
        config = root / "corpus_config.yaml"
        config.write_text(
            f"corpus:\n  path: {corpus}\n"
            f"build_dir: {build}\n"
            f"publish:\n  root: {root / 'agent'}\n"
            "embedding:\n  provider: none\n"
            f"evaluation:\n  fixture: {fixture}\n"
        )
        return cls(root, corpus, fixture, build, config)

    def build_store(self, when: datetime, record: bool = True) -> list[Chunk]:
        """Ingest the corpus into the build dir (as the pipeline does) and record history."""
        from brain_pipeline.corpus.chunk_history import record_store
        from brain_pipeline.corpus.file_chunks import ingest_corpus
        from brain_pipeline.state.layout import StateLayout

        result = ingest_corpus(self.corpus)
        self.build.mkdir(exist_ok=True)
        (self.build / "knowledge-store.json").write_bytes(result.store_bytes())
        if record:
            record_store(StateLayout.of(self.build), result.chunks, when)
        return result.chunks

    def move(self, source: str, new_source: str) -> None:
        """Move a corpus file (`source` is area-relative like the store's)."""
        target = self.corpus / new_source
        target.parent.mkdir(parents=True, exist_ok=True)
        (self.corpus / source).rename(target)
