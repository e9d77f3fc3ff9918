"""The known-item gate: what the agent found at the baseline, asked of a later store."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from brain_pipeline.corpus.store import Chunk, chunk_id
from brain_pipeline.evaluation.known_item_gate import (
    KnownItemBaseline,
    KnownItemSettings,
    KnownItemVerdict,
    judge_known_items,
    table_lines,
    with_ranks,
)
from brain_pipeline.evaluation.known_items import sample_area
from brain_pipeline.retrieval.hybrid import ListSource
from brain_pipeline_tests.evaluation.known_item_corpus import (
    FILLER,
    corpus,
    passage,
    renamed,
    word,
)


def _ranker(chunks: Sequence[Chunk]) -> Callable[[str, str], list[str]]:
    source = ListSource(chunks)
    return lambda query, area: [i for i, _ in source.bm25(area).search(query, 10)]


def baseline_of(chunks: Sequence[Chunk], size: int = 20) -> KnownItemBaseline:
    source = ListSource(chunks)
    by_id = {c.id: c for c in chunks}
    items = []
    for area in source.areas():
        sample = sample_area(area, source.area_ids(area), lambda ids: [by_id[i] for i in ids],
                             source.bm25(area).document_frequency, {}, size)
        items.extend(with_ranks(sample.items, _ranker(chunks)))
    counts = {a: len(source.area_ids(a)) for a in source.areas()}
    return KnownItemBaseline(tuple(items), counts, "known items of the store published then")


def judge(
    before: Sequence[Chunk], after: Sequence[Chunk], **settings: float
) -> KnownItemVerdict:
    return judge_known_items(
        baseline_of(before), ListSource(after), _ranker(after), KnownItemSettings(**settings)
    )


def test_an_unchanged_store_finds_every_known_item_and_passes() -> None:
    chunks = corpus()
    verdict = judge(chunks, chunks)
    assert verdict.failures == () and verdict.warnings == ()
    assert [(a.area, a.found_now, a.items) for a in verdict.areas] == [
        ("alpha", 20, 20), ("beta", 20, 20)
    ]


def test_an_edited_target_is_found_through_its_successor() -> None:
    chunks = corpus()
    base = baseline_of(chunks)
    target = base.items[0]
    edited: list[Chunk] = []
    for c in chunks:
        if c.id == target.target:
            text = c.content.replace("caveats", "pitfalls") + " One more sentence added."
            c = Chunk(chunk_id(text), text, c.area, c.source, c.heading)
        edited.append(c)
    verdict = judge_known_items(base, ListSource(edited), _ranker(edited))
    item = next(o for o in verdict.items if o.target == target.target)
    assert item.status == "found" and item.answer != target.target
    assert verdict.failures == () and sum(a.lost_content for a in verdict.areas) == 0


def test_deleted_files_are_lost_content_and_block_when_the_area_loses_too_much() -> None:
    chunks = corpus()
    gone = {"alpha/file-0.md", "alpha/file-1.md", "alpha/file-2.md"}
    after = [c for c in chunks if c.source not in gone]
    verdict = judge(chunks, after)
    alpha = next(a for a in verdict.areas if a.area == "alpha")
    assert alpha.lost_content > 0 and alpha.lost_retrieval == 0
    assert alpha.chunks_before == 48 and alpha.chunks_now == 24
    assert len(verdict.failures) == 1
    failure = verdict.failures[0]
    assert failure.startswith("known items: area alpha lost 50% of its chunks (48 -> 24)")
    assert "text gone from alpha/file-" in failure
    assert "eval --accept --note" in failure


def test_a_small_deletion_passes() -> None:
    chunks = corpus()
    victim = chunks[5]
    after = [c for c in chunks if c.id != victim.id]
    verdict = judge(chunks, after)
    assert verdict.failures == () and verdict.warnings == ()


def test_a_decoy_flood_is_lost_retrieval_naming_the_file_that_displaced_the_answers() -> None:
    chunks = corpus()
    base = baseline_of(chunks)
    decoys: list[Chunk] = []
    for item in base.items:
        if item.area != "alpha":
            continue
        for n in range(10):
            text = f"{item.query} {item.query} {item.query} decoy copy {n}."
            decoys.append(Chunk(chunk_id(text), text, "alpha", "alpha/decoys.md"))
    after = chunks + decoys
    verdict = judge_known_items(base, ListSource(after), _ranker(after))
    alpha = next(a for a in verdict.areas if a.area == "alpha")
    assert alpha.lost_retrieval == 20 and alpha.lost_content == 0
    assert alpha.change_high < 0
    (failure,) = verdict.failures
    assert failure.startswith("known items: area alpha: found@10 fell from 20/20 to 0/20")
    assert "displaced by alpha/decoys.md" in failure
    assert next(a for a in verdict.areas if a.area == "beta").verdict == "pass"


def test_a_drop_inside_the_noise_warns_instead_of_blocking() -> None:
    chunks = corpus()
    base = baseline_of(chunks)
    # Two alpha answers displaced (of 20): a drop of 0.10 whose interval reaches zero.
    decoys: list[Chunk] = []
    for item in [i for i in base.items if i.area == "alpha"][:2]:
        for n in range(10):
            text = f"{item.query} {item.query} decoy {n}."
            decoys.append(Chunk(chunk_id(text), text, "alpha", "alpha/decoys.md"))
    after = chunks + decoys
    verdict = judge_known_items(base, ListSource(after), _ranker(after),
                                KnownItemSettings(max_found_drop=0.05))
    assert verdict.failures == ()
    (warning,) = verdict.warnings
    assert "area alpha: found@10 fell from 20/20 to 18/20" in warning
    assert warning.endswith("(within the noise)")


def test_a_renamed_area_is_asked_under_its_new_name_and_loses_nothing() -> None:
    chunks = corpus()
    verdict = judge(chunks, renamed(chunks, "alpha", "alpha-2"))
    assert verdict.failures == () and verdict.warnings == ()
    assert verdict.notes == (
        "area alpha is now alpha-2 (its known passages live there): its known items were "
        "asked in alpha-2",
    )
    alpha = next(a for a in verdict.areas if a.area == "alpha")
    assert alpha.asked_in == "alpha-2" and alpha.found_now == 20


def test_a_disappeared_area_blocks_naming_it_and_a_new_area_is_noted() -> None:
    chunks = corpus(("alpha", "beta"))
    after = [c for c in chunks if c.area != "beta"] + corpus(("gamma",))
    verdict = judge(chunks, after)
    (failure,) = verdict.failures
    assert failure.startswith("known items: area beta disappeared: its 48 chunk(s) are gone")
    assert "text gone from beta/file-" in failure
    assert any(n.startswith("area gamma is new since the baseline") for n in verdict.notes)


def test_garbled_text_is_lost_content_and_blocks() -> None:
    chunks = corpus()
    garbled = []
    for c in chunks:
        if c.area == "alpha":
            text = c.content[::-1]
            c = Chunk(chunk_id(text), text, c.area, c.source, c.heading)
        garbled.append(c)
    verdict = judge(chunks, garbled)
    alpha = next(a for a in verdict.areas if a.area == "alpha")
    assert alpha.lost_content == 20 and alpha.chunks_now == alpha.chunks_before
    assert verdict.failures and "the text of 20/20 known items" in verdict.failures[0]


def test_the_verdict_round_trips_and_prints_a_table_per_area() -> None:
    chunks = corpus()
    verdict = judge(chunks, [c for c in chunks if c.source != "beta/file-0.md"])
    assert KnownItemVerdict.from_dict(verdict.to_dict()) == verdict
    lines = table_lines(verdict)
    assert lines[0] == "known items (known items of the store published then):"
    assert lines[1].split()[:4] == ["area", "items", "found", "before"]
    assert lines[2].split()[0] == "alpha" and lines[2].split()[4] == "1.000"


def test_the_test_corpus_words_are_distinct() -> None:
    # The fixture's premise: no two passages share their made-up words.
    words = {word(a, n) for a in ("alpha", "beta", "gamma") for n in range(10_100)}
    assert len(words) == 3 * 10_100
    assert FILLER in passage("alpha", 1)


def test_lost_content_counts_in_found_at_10_when_the_loss_rule_allows_it() -> None:
    chunks = corpus()
    after = [c for c in chunks if c.source not in {"alpha/file-0.md", "alpha/file-1.md"}]
    verdict = judge(chunks, after, max_area_loss=0.9)
    alpha = next(a for a in verdict.areas if a.area == "alpha")
    assert alpha.lost_content > 2 and alpha.lost_retrieval == 0 and alpha.change_high < 0
    (failure,) = verdict.failures
    assert failure.startswith(
        f"known items: area alpha: found@10 fell from 20/20 to {20 - alpha.lost_content}/20"
    )
    assert f"{alpha.lost_content} lost content, 0 became misses; text gone from alpha/file-" in (
        failure
    )


def test_losing_more_than_half_the_allowed_share_warns() -> None:
    chunks = corpus()
    after = [c for c in chunks if c.source != "alpha/file-3.md"]
    verdict = judge(chunks, after, max_found_drop=0.9)
    assert verdict.failures == ()
    (warning,) = verdict.warnings
    assert warning.startswith("known items: area alpha lost 17% of its chunks (48 -> 40)")
    assert next(a for a in verdict.areas if a.area == "alpha").verdict == "warn"


def test_an_area_losing_chunks_but_no_known_item_text_blocks_on_its_chunk_count() -> None:
    """The chunk count is watched on its own: the sample is a few dozen passages, so an
    area can lose far more than the allowed share without any of them being touched."""
    chunks = corpus()
    base = baseline_of(chunks)
    known = {item.target for item in base.items}
    spare = [c.id for c in chunks if c.area == "alpha" and c.id not in known]
    gone = set(spare[:15])  # 15 of alpha's 48 chunks (31%), none of them a known item
    after = [c for c in chunks if c.id not in gone]
    verdict = judge_known_items(base, ListSource(after), _ranker(after))
    alpha = next(a for a in verdict.areas if a.area == "alpha")
    assert (alpha.lost_content, alpha.chunks_before, alpha.chunks_now) == (0, 48, 33)
    assert alpha.verdict == "block"
    (failure,) = verdict.failures
    assert failure.startswith(
        "known items: area alpha lost 31% of its chunks (48 -> 33) and the text of 0/20 "
        "known items, more than the 25% allowed"
    )
