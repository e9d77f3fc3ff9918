"""A real-text corpus for the run-cost benchmarks: a BEIR data set's documents as
Markdown files, with its own test queries as the labelled fixture.

Each document becomes `area-N/topic-NNN/doc-<id>.md`: its title as the heading, then its
text cut into paragraphs of SENTENCES_PER_PARAGRAPH sentences, so a SciFact abstract
gives a handful of chunks and the whole corpus (5,183 abstracts) about 19,000, the size
the issues quote. Areas are dealt round-robin, as bench_scale.py's synthetic files are.

The fixture labels each test query with the first paragraph of its relevant documents
that share the area of the first one (a query belongs to one area): real questions,
real relevance judgements, mapped onto this layout's chunk ids.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path

from brain_pipeline.corpus.store import chunk_id

AREAS = 4
DOCS_PER_TOPIC = 50
SENTENCES_PER_PARAGRAPH = 3
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(])")


@dataclass(frozen=True)
class BeirCorpus:
    root: Path
    files: list[Path]
    fixture: Path
    queries: int


def paragraphs_of(text: str) -> list[str]:
    """The text's sentences, SENTENCES_PER_PARAGRAPH to a paragraph, trimmed (so a
    paragraph's chunk id is the hash of exactly what is written)."""
    sentences = [s.strip() for s in _SENTENCE_END.split(" ".join(text.split())) if s.strip()]
    return [
        " ".join(sentences[i : i + SENTENCES_PER_PARAGRAPH])
        for i in range(0, len(sentences), SENTENCES_PER_PARAGRAPH)
    ]


def write_beir_corpus(dataset: Path, root: Path) -> BeirCorpus:
    """Lay out `dataset` (corpus.jsonl, queries.jsonl, qrels.tsv) under `root`."""
    first_paragraph: dict[str, tuple[str, str]] = {}  # doc id -> (area, chunk id)
    files: list[Path] = []
    with (dataset / "corpus.jsonl").open(encoding="utf-8") as lines:
        for number, line in enumerate(lines):
            doc = json.loads(line)
            body = paragraphs_of(doc.get("text") or "")
            if not body:
                continue
            area = f"area-{number % AREAS}"
            folder = root / area / f"topic-{number // AREAS // DOCS_PER_TOPIC:03d}"
            folder.mkdir(parents=True, exist_ok=True)
            title = " ".join((doc.get("title") or f"Document {doc['_id']}").split())
            path = folder / f"doc-{doc['_id']}.md"
            path.write_text(f"# {title}\n\n" + "\n\n".join(body) + "\n", encoding="utf-8")
            files.append(path)
            first_paragraph[str(doc["_id"])] = (area, chunk_id(body[0]))
    fixture = root.parent / "fixture.json"
    queries = _labelled_queries(dataset, first_paragraph)
    fixture.write_text(
        json.dumps(
            {"$comment": ["beir_corpus.py: the data set's test queries"], "queries": queries}
        ),
        encoding="utf-8",
    )
    return BeirCorpus(root, files, fixture, len(queries))


def _labelled_queries(
    dataset: Path, first_paragraph: dict[str, tuple[str, str]]
) -> list[dict[str, object]]:
    relevant: dict[str, list[str]] = {}
    with (dataset / "qrels.tsv").open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if int(row.get("score") or 0) > 0 and row["corpus-id"] in first_paragraph:
                relevant.setdefault(row["query-id"], []).append(row["corpus-id"])
    queries: list[dict[str, object]] = []
    with (dataset / "queries.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            query = json.loads(line)
            docs = relevant.get(str(query["_id"]))
            if not docs:
                continue
            area = first_paragraph[docs[0]][0]
            ids = sorted({first_paragraph[d][1] for d in docs if first_paragraph[d][0] == area})
            queries.append({"query": query["text"], "area": area, "relevant": ids})
    return queries
