"""Our store bytes against the independent JavaScript reference, run by Node.js."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from brain_pipeline.corpus.file_chunks import ingest_corpus
from brain_pipeline.corpus.jscompat import JS_STRING_MAX_ARRAY_DEPTH, parse_json
from brain_pipeline.corpus.junk import REASON_TOO_DEEP
from brain_pipeline_tests.corpus.corpora import (
    NESTED_FIELDS,
    NESTING_DEPTHS,
    build_deep_corpus,
    build_edge_corpus,
    build_random_corpus,
    deep_roadmap,
    nested,
)


def _first_difference(ours: bytes, theirs: bytes) -> str:
    pairs = zip(ours, theirs, strict=False)
    at = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(ours), len(theirs)))
    window = slice(max(at - 80, 0), at + 80)
    return f"first difference at byte {at}: ours {ours[window]!r} vs {theirs[window]!r}"


def test_edge_case_corpus_matches_reference(
    tmp_path: Path, reference: Callable[[Path], bytes]
) -> None:
    root = tmp_path / "corpus"
    build_edge_corpus(root, tmp_path / "outside")
    ours = ingest_corpus(root).store_bytes()
    theirs = reference(root)
    assert ours == theirs, _first_difference(ours, theirs)
    assert len(ours) > 10_000  # the corpus really produced a store worth comparing


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_corpus_matches_reference(
    tmp_path: Path, reference: Callable[[Path], bytes], seed: int
) -> None:
    root = tmp_path / "corpus"
    build_random_corpus(root, seed)
    result = ingest_corpus(root)
    ours = result.store_bytes()
    theirs = reference(root)
    assert ours == theirs, _first_difference(ours, theirs)
    assert result.duplicates_collapsed > 0 and len(result.chunks) > 100


def test_sample_corpus_matches_reference(reference: Callable[[Path], bytes]) -> None:
    sample = Path(__file__).resolve().parents[2] / "examples" / "curated-content"
    result = ingest_corpus(sample)
    ours = result.store_bytes()
    theirs = reference(sample)
    assert ours == theirs, _first_difference(ours, theirs)
    assert len(result.chunks) > 100


def _statements(store: bytes, prefix: str) -> dict[str, list[str]]:
    """What each file whose name starts with `prefix` contributed to a store."""
    made: dict[str, list[str]] = {}
    for row in parse_json(store.decode("utf-8")):  # deep headings: past json's recursion
        name = row["source"].rsplit("/", 1)[-1]
        if name.startswith(prefix):
            made.setdefault(name, []).append(row["content"])
    return made


@pytest.mark.parametrize("field", NESTED_FIELDS)
def test_deep_nesting_matches_reference(
    tmp_path: Path, reference: Callable[[Path], bytes], field: str
) -> None:
    """Issue 40 item 8: a `level`, `label`, `description` or `title` nested 100 to 5,000
    arrays deep, byte for byte as the Node reference writes it. What Node does is read
    from its output: JSON.parse takes any depth; String() of the nested arrays converts
    up to JS_STRING_MAX_ARRAY_DEPTH and throws RangeError past it, which stops that file
    where it stands (the statements before it stay). A title nested 5,000 deep through
    objects converts (`[object Object]`) but JSON.stringify cannot write it: no store
    from the original, refused by both here."""
    root = tmp_path / "corpus"
    build_deep_corpus(root, field)
    result = ingest_corpus(root)
    ours = result.store_bytes()
    theirs = reference(root)
    assert ours == theirs, _first_difference(ours, theirs)

    # what Node did, file by file
    made = _statements(theirs, field)
    converted = {d for d in NESTING_DEPTHS if d <= JS_STRING_MAX_ARRAY_DEPTH}
    overflowed = set(NESTING_DEPTHS) - converted
    assert converted == {100, 1_000, 1_500, 3_000} and overflowed == {4_000, 5_000}
    names = {d: f"{field}-{d:05}.json" for d in NESTING_DEPTHS}
    count = {name: len(made.get(name, [])) for name in names.values()}
    if field == "title":
        # as they come only the 100-deep title fits the output bound; padded, all that convert
        assert count == {f"title-{d:05}.json": 4 if d == 100 else 0 for d in NESTING_DEPTHS}
        padded = {n for n in made if n.endswith("-padded.json")}
        assert padded == {f"title-{d:05}-padded.json" for d in converted}
        assert "title-objects-05000-padded.json" not in made
    else:
        # the whole file where it converts; where it overflows, what came before it
        stopped = {"level": 2, "label": 2, "description": 0}[field]
        assert count == {
            f"{field}-{d:05}.json": 4 if d in converted else stopped for d in NESTING_DEPTHS
        }
    assert _statements(theirs, "issue-40-item-8") == {
        "issue-40-item-8.json": [
            "Role: Deep Role - Description: ",
            "Role: Deep Role - Topic: deep (x)",
        ]
    }
    assert _statements(theirs, "unused-keys") == {
        "unused-keys.json": ["Role: Unused - Description: ", "Role: Unused - Topic: kept (x)"]
    }
    # and we say so, in one line naming the file, where JavaScript gave up
    problems = {source.rsplit("/", 1)[-1]: said for source, said in result.problems}
    refused = {f"{field}-{d:05}.json" for d in overflowed}
    if field == "title":
        refused.add("title-objects-05000-padded.json")
    for name in refused:
        assert problems[name].startswith(REASON_TOO_DEEP) and "\n" not in problems[name]
    assert not {"issue-40-item-8.json", "unused-keys.json"} & set(problems)


def test_the_depth_where_string_overflows_is_node_s(
    tmp_path: Path, reference: Callable[[Path], bytes]
) -> None:
    """JS_STRING_MAX_ARRAY_DEPTH is where the reference ingest's String() stops, to the
    level: one less, the limit and one more, in a level, a label and a description. It is
    a property of V8's stack (measured on Node 20): if this fails on another Node,
    re-measure the limit from the failure rather than widening the test."""
    limit = JS_STRING_MAX_ARRAY_DEPTH
    folder = tmp_path / "corpus" / "deep" / "roadmaps"
    folder.mkdir(parents=True)
    for field in ("level", "label", "description"):
        for depth in (limit - 1, limit, limit + 1):
            value = nested(depth - 1, f"[{depth}, null]")  # `depth` arrays
            text = deep_roadmap(field, value, f" {field} {depth}")
            (folder / f"{field}-{depth:05}.json").write_text(text, encoding="utf-8")
    ours = ingest_corpus(tmp_path / "corpus").store_bytes()
    theirs = reference(tmp_path / "corpus")
    assert ours == theirs, _first_difference(ours, theirs)
    for field in ("level", "label", "description"):
        made = _statements(theirs, field)
        assert len(made[f"{field}-{limit:05}.json"]) == 4
        assert len(made.get(f"{field}-{limit + 1:05}.json", [])) < 4, (
            f"Node's String() now converts {limit + 1:,} arrays deep: re-measure the limit"
        )
