"""Junk is reported, never published silently: binary, huge, non-object roadmap, long text."""

from __future__ import annotations

import hashlib
import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from brain_pipeline.corpus.chunking import REASON_NOT_OBJECT
from brain_pipeline.corpus.discovery import (
    STATUS_SKIPPED,
    CorpusFile,
    ManifestEntry,
    walk_corpus,
)
from brain_pipeline.corpus.file_chunks import FileOutcome, ingest_corpus, ingest_file
from brain_pipeline.corpus.jscompat import JS_STRING_MAX_ARRAY_DEPTH, JS_STRINGIFY_MAX_DEPTH
from brain_pipeline.corpus.junk import (
    DEFAULT_LIMITS,
    OUTPUT_ALLOWANCE,
    OUTPUT_BOUND,
    OUTPUT_PER_INPUT_BYTE,
    REASON_BINARY,
    REASON_LONG_PARAGRAPH,
    REASON_OUTPUT_TOO_LARGE,
    REASON_TOO_DEEP,
    REASON_TOO_LARGE,
    SNIFF_BYTES,
    IngestLimits,
    binary_content,
)
from brain_pipeline.corpus.store import serialize_store
from brain_pipeline_tests.corpus.conftest import Writer
from brain_pipeline_tests.corpus.hostile import hostile_roadmaps
from brain_pipeline_tests.corpus.manifests import discover

TEXT = "# Notes\n\nA paragraph long enough to be kept in the store, about security groups.\n"
# The start of a real ELF executable: magic, class, data, version, then padding NULs.
ELF = b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 8 + b"\x02\x00\x3e\x00" + b"\x90" * 200


def _found(corpus: Path, source: str) -> CorpusFile:
    for item in walk_corpus(corpus):
        if isinstance(item, CorpusFile) and item.source == source:
            return item
    raise AssertionError(f"{source} not found by the walk")


def _entry(corpus: Path, source: str, limits: IngestLimits = DEFAULT_LIMITS) -> ManifestEntry:
    [entry] = [e for e in ingest_corpus(corpus, limits).manifest if e.source == source]
    return entry


# ---- binary -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "verdict"),
    [
        (b"", None),
        (TEXT.encode(), None),
        (b"col1\tcol2\r\nform\x0cfeed\n" * 50, None),  # tab, CR, LF, FF are text
        ("caf\u00e9 \u2014 \u00e0 la carte".encode() * 100, None),  # UTF-8 bytes 0x80-0xBF
        (b"text\x00more", "NUL byte at offset 4"),
        ("hello".encode("utf-16-le"), "NUL byte at offset 1"),
        (b"\x01\x02\x03\x7fabcdef" * 10, "40 % control characters in the first 100 bytes"),
    ],
    ids=["empty", "text", "text-controls", "utf-8", "nul", "utf-16", "control-bytes"],
)
def test_binary_content_is_told_from_text(data: bytes, verdict: str | None) -> None:
    assert binary_content(data) == verdict


def test_the_control_share_must_exceed_thirty_percent_of_the_first_8_kb() -> None:
    assert binary_content(b"\x1b" * 30 + b"a" * 70) is None  # exactly 30 %: still text
    assert binary_content(b"\x1b" * 31 + b"a" * 69) is not None
    # Only the first 8 KB count: controls after them do not make a file binary.
    assert binary_content(b"a" * SNIFF_BYTES + b"\x00" * 1000) is None


def test_a_binary_renamed_md_is_skipped_with_its_reason_and_not_chunked(
    corpus: Path, write: Writer
) -> None:
    write("a/notes.md", TEXT)
    write("a/program.md", ELF)
    write("a/controls.txt", b"\x01\x02\x03\x04\x05 line\n" * 400)
    result = ingest_corpus(corpus)
    assert {c.source for c in result.chunks} == {"a/notes.md"}
    for source, detail in (
        ("a/program.md", "NUL byte at offset 7"),
        ("a/controls.txt", "% control characters"),
    ):
        entry = _entry(corpus, source)
        assert (entry.status, entry.reason, entry.problem) == (STATUS_SKIPPED, REASON_BINARY, True)
        assert detail in str(entry.detail)
        assert (source, f"{REASON_BINARY}: {entry.detail}") in result.problems
    assert result.skipped_by_reason[REASON_BINARY] == 2
    program = _entry(corpus, "a/program.md")
    assert program.sha256 == hashlib.sha256(ELF).hexdigest()  # hashed: a change is seen


def test_a_binary_roadmap_is_skipped_as_binary_too(corpus: Path, write: Writer) -> None:
    write("a/roadmaps/formatted-x.json", b'{"title": "x"\x00}')
    assert _entry(corpus, "a/roadmaps/formatted-x.json").reason == REASON_BINARY


# ---- size ---------------------------------------------------------------------------


def test_a_file_over_the_limit_is_skipped_without_being_read(corpus: Path, write: Writer) -> None:
    write("a/notes.md", TEXT)
    huge = write("a/huge.txt", b"")
    os.truncate(huge, 200_000_000)  # sparse: 200 MB that costs no disk
    found = _found(corpus, "a/huge.txt")
    tracemalloc.start()
    try:
        outcome = ingest_file(found)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000  # nothing near 200 MB was ever allocated
    entry = outcome.entry
    assert outcome.chunks == []
    assert (entry.status, entry.reason, entry.problem) == (STATUS_SKIPPED, REASON_TOO_LARGE, True)
    assert entry.detail == (
        "200,000,000 bytes, over the limit of 10,000,000 (corpus.max_file_bytes)"
    )
    assert entry.size == 200_000_000 and entry.sha256 is None


def test_the_size_limit_is_configurable_and_inclusive(corpus: Path, write: Writer) -> None:
    write("a/notes.md", TEXT)
    size = len(TEXT.encode())
    assert _entry(corpus, "a/notes.md", IngestLimits(max_file_bytes=size)).reason is None
    small = IngestLimits(max_file_bytes=size - 1)
    assert _entry(corpus, "a/notes.md", small).reason == REASON_TOO_LARGE
    assert ingest_corpus(corpus, small).chunks == []


def test_a_file_that_grows_past_the_limit_after_the_walk_is_caught_reading_at_most_the_limit(
    corpus: Path, write: Writer
) -> None:
    path = write("a/notes.md", TEXT)
    found = _found(corpus, "a/notes.md")
    with open(path, "ab") as handle:
        handle.write(b"x" * 5_000_000)
    limits = IngestLimits(max_file_bytes=1000)
    tracemalloc.start()
    try:
        outcome = ingest_file(found, limits)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 200_000
    assert outcome.entry.reason == REASON_TOO_LARGE and outcome.chunks == []
    assert outcome.entry.detail == "grew while being read: over 1,000 bytes (corpus.max_file_bytes)"


def test_discover_and_ingest_agree_on_junk(corpus: Path, write: Writer) -> None:
    write("a/notes.md", TEXT)
    write("a/program.md", ELF)
    os.truncate(write("a/huge.txt", b""), 50_000)
    limits = IngestLimits(max_file_bytes=10_000)
    discovered = {e.source: e for e in discover(corpus, limits).entries}
    ingested = {e.source: e for e in ingest_corpus(corpus, limits).manifest}
    for source in ("a/program.md", "a/huge.txt"):
        assert discovered[source] == ingested[source]


# ---- roadmaps whose top level is not an object ------------------------------------


@pytest.mark.parametrize(
    ("document", "what"),
    [("[1, 2]", "an array"), ('"x"', "a string"), ("3", "a number"), ("null", "null")],
)
def test_a_roadmap_that_is_not_an_object_is_reported(
    corpus: Path, write: Writer, document: str, what: str
) -> None:
    write("a/formatted-list.json", document)
    result = ingest_corpus(corpus)
    entry = _entry(corpus, "a/formatted-list.json")
    assert (entry.status, entry.reason, entry.problem) == (STATUS_SKIPPED, REASON_NOT_OBJECT, True)
    assert entry.detail == f"top level is {what}, nothing taken"
    assert ("a/formatted-list.json", f"{REASON_NOT_OBJECT}: {entry.detail}") in result.problems


# ---- long paragraphs ---------------------------------------------------------------


def test_a_long_paragraph_is_kept_and_its_file_reported(corpus: Path, write: Writer) -> None:
    long = "word " * 30_000  # 150,000 characters, trimmed to 149,999
    write("a/notes.md", TEXT + "\n" + long + "\n")
    result = ingest_corpus(corpus)
    kept = [c for c in result.chunks if len(c.content) > 20_000]
    assert len(kept) == 1 and len(result.chunks) == 2  # kept, beside the normal paragraph
    entry = _entry(corpus, "a/notes.md")
    assert (entry.status, entry.reason, entry.problem) == ("text", REASON_LONG_PARAGRAPH, True)
    assert entry.detail == (
        "1 paragraph over 20,000 characters (corpus.max_paragraph_chars), kept; "
        f"longest 149,999 characters, chunk {kept[0].id}"
    )
    assert entry.sha256 is not None
    assert ("a/notes.md", f"{REASON_LONG_PARAGRAPH}: {entry.detail}") in result.problems


def test_the_paragraph_limit_is_configurable(corpus: Path, write: Writer) -> None:
    write("a/notes.md", TEXT + "\n" + "x" * 120 + "\n\n" + "y" * 130 + "\n")
    limits = IngestLimits(max_paragraph_chars=100)
    entry = _entry(corpus, "a/notes.md", limits)
    assert entry.reason == REASON_LONG_PARAGRAPH
    assert str(entry.detail).startswith("2 paragraphs over 100 characters")
    assert "longest 130 characters" in str(entry.detail)
    assert len(ingest_corpus(corpus, limits).chunks) == 3
    assert _entry(corpus, "a/notes.md", IngestLimits(max_paragraph_chars=130)).reason is None


def test_a_long_roadmap_statement_is_reported_beside_the_roadmaps_own_problem(
    corpus: Path, write: Writer
) -> None:
    document = (
        '{"title": "Ops", "description": "' + "d" * 300 + '", '
        '"topics": [{"label": "a", "type": "topic"}, null]}'
    )
    write("a/formatted-ops.json", document)
    entry = _entry(corpus, "a/formatted-ops.json", IngestLimits(max_paragraph_chars=200))
    assert entry.reason == "null topic entry" and entry.problem
    assert "also paragraph too long: 1 paragraph over 200 characters" in str(entry.detail)


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        IngestLimits(max_file_bytes=0)


def test_limits_name_a_cache_variant_and_the_defaults_none() -> None:
    assert DEFAULT_LIMITS.cache_variant == IngestLimits().cache_variant == ""
    assert IngestLimits(100, 200).cache_variant == "max_file_bytes=100,max_paragraph_chars=200"
    assert IngestLimits(100, 200).cache_variant != IngestLimits(100, 201).cache_variant
    for limits in (DEFAULT_LIMITS, IngestLimits(100, 200)):
        assert IngestLimits.of_variant(limits.cache_variant) == limits


def _peak_while(action: Callable[[], object]) -> tuple[object, int]:
    tracemalloc.start()
    try:
        result = action()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


@pytest.mark.parametrize("name", sorted(hostile_roadmaps()))
def test_roadmaps_that_multiply_are_refused_in_memory_of_the_file_s_order(
    corpus: Path, write: Writer, name: str
) -> None:
    text = hostile_roadmaps()[name]
    write(f"a/{name}", text)
    outcome, peak = _peak_while(lambda: ingest_file(_found(corpus, f"a/{name}")))
    assert isinstance(outcome, FileOutcome)
    entry = outcome.entry
    assert outcome.chunks == [] and (entry.status, entry.problem) == (STATUS_SKIPPED, True)
    assert entry.reason in (REASON_TOO_DEEP, REASON_OUTPUT_TOO_LARGE)
    assert peak < 20 * len(text) + 5_000_000  # the output would have been 100 MB to TBs


def test_a_text_file_whose_heading_repeats_past_the_bound_is_refused(
    corpus: Path, write: Writer
) -> None:
    paragraphs = "".join(f"\n\nparagraph number {i:06} is kept." for i in range(20_000))
    text = "# " + "h" * 100_000 + paragraphs
    write("a/long-heading.md", text)
    outcome, peak = _peak_while(lambda: ingest_file(_found(corpus, "a/long-heading.md")))
    assert isinstance(outcome, FileOutcome)
    entry = outcome.entry
    assert outcome.chunks == []
    assert (entry.status, entry.reason, entry.problem) == (
        STATUS_SKIPPED,
        REASON_OUTPUT_TOO_LARGE,
        True,
    )
    # 20,000 chunks under a 100,000-character heading: 2 GB of store it never wrote
    assert entry.detail is not None and "would take 2,00" in entry.detail
    assert peak < 50 * len(text)


def test_files_within_the_bound_are_untouched(corpus: Path, write: Writer) -> None:
    paragraphs = "".join(f"\n\nparagraph number {i:06} is kept." for i in range(2_000))
    write("a/notes.md", "# A heading of an ordinary length" + paragraphs)
    outcome = ingest_file(_found(corpus, "a/notes.md"))
    assert len(outcome.chunks) == 2_001 and outcome.entry.reason is None
    size = len(serialize_store(outcome.chunks))
    assert size <= OUTPUT_BOUND.budget(outcome.entry.size)


def test_the_documented_bound_is_the_one_applied() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    flat = " ".join(docs.split())
    assert f"nested more than {JS_STRING_MAX_ARRAY_DEPTH:,} arrays deep stops the file" in flat
    assert f"nested more than {JS_STRINGIFY_MAX_DEPTH:,} arrays/objects deep is refused" in flat
    allowance = f"{OUTPUT_ALLOWANCE // 1024} KiB"
    assert f"more than {OUTPUT_PER_INPUT_BYTE} times its size + {allowance}" in flat
