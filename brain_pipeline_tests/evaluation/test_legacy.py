"""The legacy baseline's exact semantics: substring matching, duplicate terms, stable ties."""

from __future__ import annotations

from collections.abc import Sequence

from brain_pipeline.corpus.store import Chunk
from brain_pipeline.evaluation.legacy import LegacyBaseline, legacy_terms
from brain_pipeline.retrieval.hybrid import ListSource
from brain_pipeline_tests.evaluation.helpers import make_chunk


class LegacyRetriever:
    """The baseline over chunks in memory for any query: `LegacyBaseline` with the query's
    own terms, answering (chunk, score) pairs."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self._source = ListSource(chunks)

    def search(self, query: str, area: str, limit: int = 10) -> list[tuple[Chunk, int]]:
        hits = LegacyBaseline(self._source, legacy_terms(query)).search(query, area, limit)
        chunks = self._source.area_chunks(area)
        return [(chunks[position], score) for position, score in hits]


def ids(hits: list) -> list[str]:
    return [chunk.id for chunk, _ in hits]


def test_terms_are_lower_cased_whitespace_pieces_longer_than_two() -> None:
    assert legacy_terms("What IS a VPC?\tSubnet\u00a0ROUTE  go") == [
        "what",
        "vpc?",
        "subnet",
        "route",
    ]


def test_terms_are_not_deduplicated() -> None:
    assert legacy_terms("vpc VPC vpc") == ["vpc", "vpc", "vpc"]


def test_length_counts_utf16_code_units_like_javascript() -> None:
    # U+1F600 is two UTF-16 code units, so "😀a" has length 3 in JavaScript.
    assert legacy_terms("😀a é") == ["😀a"]


def test_a_term_matches_as_a_substring_anywhere() -> None:
    chunk = make_chunk("Networking basics for everyone")
    hits = LegacyRetriever([chunk]).search("work", "aws")
    assert [(c.id, s) for c, s in hits] == [(chunk.id, 1)]


def test_each_repeated_term_scores_again() -> None:
    subnet = make_chunk("a subnet lives somewhere")
    vpc = make_chunk("the vpc is private")
    hits = LegacyRetriever([subnet, vpc]).search("vpc vpc subnet", "aws")
    # Deduplicated terms would tie 1-1 and keep store order (subnet first).
    assert [(c.id, s) for c, s in hits] == [(vpc.id, 2), (subnet.id, 1)]


def test_short_terms_are_ignored() -> None:
    chunk = make_chunk("it is on")
    assert LegacyRetriever([chunk]).search("is it on", "aws") == []


def test_ties_keep_store_order_not_id_order() -> None:
    chunks = [make_chunk(f"shared word variant {i}") for i in range(5)]
    hits = LegacyRetriever(chunks).search("shared", "aws")
    assert ids(hits) == [c.id for c in chunks]
    assert sorted(ids(hits)) != ids(hits)  # the ids alone would order them differently


def test_only_positive_scores_only_the_area_top_ten() -> None:
    chunks = [make_chunk(f"cloud note {i}") for i in range(12)]
    other_area = make_chunk("cloud elsewhere", area="python")
    unrelated = make_chunk("nothing relevant here")
    retriever = LegacyRetriever([*chunks, other_area, unrelated])
    hits = retriever.search("CLOUD", "aws")
    assert ids(hits) == [c.id for c in chunks[:10]]
    assert retriever.search("cloud", "nowhere") == []
    assert retriever.search("cloud", "aws", limit=0) == []


def test_higher_scores_come_first() -> None:
    one = make_chunk("alpha only")
    two = make_chunk("alpha and beta")
    three = make_chunk("alpha beta gamma")
    hits = LegacyRetriever([one, two, three]).search("alpha beta gamma", "aws")
    assert [(c.id, s) for c, s in hits] == [(three.id, 3), (two.id, 2), (one.id, 1)]


def test_the_match_matrix_is_the_substring_test_of_every_pair() -> None:
    """Against the plain definition, on texts where lower-casing changes the length (İ),
    terms at the very start and end of a text, empty texts and repeated hits."""
    import random

    from brain_pipeline.evaluation.legacy import term_matches

    rng = random.Random(7)
    alphabet = ["ab", "ba", "İ", "i̇", "Ab", "c", " ", "\n", "é", "😀"]
    for _ in range(200):
        contents = ["".join(rng.choices(alphabet, k=rng.randrange(0, 9))) for _ in range(6)]
        terms = ["".join(rng.choices(["ab", "b", "i̇", "a", "😀", "é"], k=rng.randrange(1, 4)))
                 for _ in range(5)]
        expected = [[int(t in text.lower()) for t in terms] for text in contents]
        assert term_matches(contents, terms).tolist() == expected, (contents, terms)
