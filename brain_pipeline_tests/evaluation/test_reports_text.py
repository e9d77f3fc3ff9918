"""An evaluation report rendered for the terminal and the check: tables, notes, rank rows."""

from __future__ import annotations

import re

from brain_pipeline.evaluation.fixture.model import Fixture, LabelledQuery
from brain_pipeline.evaluation.reports import (
    fallback_notes,
    query_rows,
    report_markdown,
    report_text,
)
from brain_pipeline.evaluation.runner import evaluate
from brain_pipeline_tests.evaluation.helpers import make_chunk

VPC = make_chunk("Amazon VPC gives you a private network.")
S3 = make_chunk("S3 buckets hold objects.")
FIXTURE = Fixture(
    (
        LabelledQuery("private network", "aws", (VPC.id,)),
        LabelledQuery("a | pipe", "aws", ("0123456789ab",)),
    ),
    "t.json",
)


def test_text_and_markdown_say_hybrid_was_bm25_and_name_stale_ids() -> None:
    report = evaluate([VPC, S3], FIXTURE)
    text, markdown = report_text(report), report_markdown(report)
    assert "hybrid (= bm25)" in text and "| hybrid (= bm25) |" in markdown
    assert "stale ids (1): 0123456789ab" in text
    assert "**Stale fixture**: 1 labelled chunk id(s)" in markdown
    (note,) = fallback_notes(report)
    assert note.startswith("hybrid answered 2/2 queries with BM25")
    assert "- hybrid answered 2/2 queries with BM25 \\(no query embedder: 2/2\\)" in markdown


def test_the_rank_table_escapes_pipes_and_marks_misses() -> None:
    markdown = report_markdown(evaluate([VPC, S3], FIXTURE)).splitlines()
    assert "| a \\| pipe | aws | — | — | — |" in markdown
    assert "| private network | aws | 1 | 1 | 1 |" in markdown


def test_query_rows_carry_ranks_per_retriever_and_staleness() -> None:
    rows = query_rows(evaluate([VPC, S3], FIXTURE))
    assert rows[0] == {
        "query": "private network", "area": "aws",
        "legacy": 1, "bm25": 1, "hybrid": 1, "stale_label": False,
    }
    assert rows[1]["stale_label"] is True and rows[1]["bm25"] is None


EVIL = "![x](http://evil.example/p.png) [click](https://evil.example) <img src=x> a|b `c`"


def test_fixture_text_in_the_markdown_is_literal_text_not_markup() -> None:
    fixture = Fixture(
        (
            LabelledQuery(EVIL, "aws", (VPC.id,)),
            LabelledQuery("q", "area ![y](http://evil.example/a.png)", ("ffffffffffff",)),
        ),
        "t.json",
    )
    markdown = report_markdown(evaluate([VPC, S3], fixture))
    # no unescaped opener of an image, a link or a tag; no URL an autolink would take
    assert re.search(r"(?<!\\)(!\[|\]\(|\[click|<img)", markdown) is None
    assert "http://" not in markdown and "https://" not in markdown
    row = next(line for line in markdown.splitlines() if "evil" in line and "click" in line)
    assert row.startswith(
        "| \\!\\[x\\]\\(http\\://evil.example/p.png\\) \\[click\\]\\(https\\://evil.example\\) "
        "\\<img src=x\\> a\\|b \\`c\\` | aws |"
    )
    assert "**Unknown area(s)** in the fixture: area \\!\\[y\\]" in markdown
