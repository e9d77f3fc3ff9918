"""The real-text benchmark corpus (benchmarks/beir_corpus.py, a sibling script imported by
path): documents laid out as Markdown files whose paragraphs are the chunks the fixture
labels, so `bench_run_cost.py --beir` measures a corpus the evaluation can judge."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from beir_corpus import SENTENCES_PER_PARAGRAPH, write_beir_corpus  # noqa: E402

from brain_pipeline.corpus.file_chunks import ingest_corpus  # noqa: E402

TIDES = ["The moon pulls.", "Water rises.", "Then it falls.", "Tides repeat.", "Twice a day."]


def _dataset(folder: Path) -> Path:
    folder.mkdir()
    docs = [
        {"_id": "d1", "title": "Tides", "text": " ".join(TIDES)},
        {"_id": "d2", "title": "Stars", "text": "Stars burn hydrogen. They shine."},
        {"_id": "d3", "title": "Empty", "text": ""},
    ]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    queries = [{"_id": "q1", "text": "why do tides rise"}, {"_id": "q2", "text": "unjudged"}]
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    return folder


def test_documents_become_files_and_judged_queries_label_their_chunks(tmp_path: Path) -> None:
    corpus = write_beir_corpus(_dataset(tmp_path / "beir"), tmp_path / "out" / "corpus")
    assert [p.name for p in corpus.files] == ["doc-d1.md", "doc-d2.md"]  # no text, no file
    step = SENTENCES_PER_PARAGRAPH
    paragraphs = [" ".join(TIDES[i : i + step]) for i in range(0, len(TIDES), step)]
    assert len(paragraphs) > 1
    assert corpus.files[0].read_text() == "# Tides\n\n" + "\n\n".join(paragraphs) + "\n"
    queries = json.loads(corpus.fixture.read_text())["queries"]
    assert len(queries) == 1 and queries[0]["query"] == "why do tides rise"
    by_id = {chunk.id: chunk for chunk in ingest_corpus(corpus.root).chunks}
    (label,) = queries[0]["relevant"]
    assert by_id[label].content == paragraphs[0]
    assert by_id[label].area == queries[0]["area"]
