"""Discovery: areas, walk order, what is read, what is skipped and why."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from brain_pipeline.corpus import discovery
from brain_pipeline.corpus.discovery import (
    REASON_BAD_NAME,
    REASON_DANGLING,
    REASON_DUPLICATE,
    REASON_IGNORED,
    REASON_LOOP,
    REASON_OUTSIDE,
    REASON_RAW,
    REASON_ROOT_FILE,
    REASON_SPECIAL,
    CorpusFile,
    CorpusNotFoundError,
    ManifestEntry,
    walk_corpus,
)
from brain_pipeline.corpus.file_chunks import ingest_file
from brain_pipeline_tests.corpus.conftest import Writer, symlink
from brain_pipeline_tests.corpus.manifests import discover


def read_sources(root: Path) -> list[str]:
    return [e.source for e in discover(root).entries if e.status != "skipped"]


def skipped(root: Path) -> dict[str, str | None]:
    return {e.source: e.reason for e in discover(root).entries if e.status == "skipped"}


def test_areas_are_top_level_folders_in_name_order(corpus: Path, write: Writer) -> None:
    for rel in ["b/x.md", "a/x.md", "B/x.md", "root.md"]:
        write(rel, "text")
    manifest = discover(corpus)
    assert manifest.areas == ["B", "a", "b"]
    assert read_sources(corpus) == ["B/x.md", "a/x.md", "b/x.md"]
    assert skipped(corpus) == {"root.md": REASON_ROOT_FILE}


def test_walk_is_depth_first_with_files_and_folders_interleaved(
    corpus: Path, write: Writer
) -> None:
    for rel in ["a/a.md.txt", "a/a.md", "a/a-b.md", "a/a/inside.md", "a/Z.md", "a/b/c/d.md"]:
        write(rel, "x")
    write("a/a.mdx", "x")
    assert read_sources(corpus) == [
        "a/Z.md",
        "a/a/inside.md",
        "a/a-b.md",
        "a/a.md",
        "a/a.md.txt",
        "a/b/c/d.md",
    ]


def test_names_sort_by_code_point_not_utf16(corpus: Path, write: Writer) -> None:
    # U+FF5E sorts before U+1F600 by code point (and UTF-8 bytes); JavaScript's default
    # .sort() compares UTF-16 units, where the emoji's 0xD83D comes first.
    for name in ["😀.md", "\uff5e.md", "é.md", "e.md", "z.md"]:
        write(f"a/{name}", "x")
    assert read_sources(corpus) == ["a/e.md", "a/z.md", "a/é.md", "a/\uff5e.md", "a/😀.md"]


def test_raw_folders_are_skipped_below_an_area_only(corpus: Path, write: Writer) -> None:
    for rel in [
        "a/raw/no.md",
        "a/deep/raw/no.md",
        "a/.raw/yes.md",
        "a/Raw/yes.md",
        "a/raws/yes.md",
        "raw/yes.md",
        "raw/raw/no.md",
    ]:
        write(rel, "x")
    assert read_sources(corpus) == [
        "a/.raw/yes.md",
        "a/Raw/yes.md",
        "a/raws/yes.md",
        "raw/yes.md",
    ]
    assert skipped(corpus) == {"a/deep/raw": REASON_RAW, "a/raw": REASON_RAW, "raw/raw": REASON_RAW}


def test_a_file_named_raw_is_just_an_ignored_file(corpus: Path, write: Writer) -> None:
    write("a/raw", "x")
    assert skipped(corpus) == {"a/raw": REASON_IGNORED}


def test_folder_named_like_a_text_file_is_walked(corpus: Path, write: Writer) -> None:
    write("a/x.md/inside.txt", "x")
    assert read_sources(corpus) == ["a/x.md/inside.txt"]


def test_suffixes_are_case_sensitive_and_dotfiles_count(corpus: Path, write: Writer) -> None:
    for name in [".hidden.md", ".md", "a.txt", "b.MD", "c.Txt", "d.markdown", "e.md.bak"]:
        write(f"a/{name}", "x")
    assert read_sources(corpus) == ["a/.hidden.md", "a/.md", "a/a.txt"]
    assert set(skipped(corpus)) == {"a/b.MD", "a/c.Txt", "a/d.markdown", "a/e.md.bak"}


def test_roadmap_json_rules(corpus: Path, write: Writer) -> None:
    for rel in [
        "a/formatted-x.json",
        "a/Formatted-y.json",
        "a/formatted-z.JSON",
        "a/plain.json",
        "a/myroadmaps.json",
        "a/roadmaps/p.json",
        "a/Roadmaps/q.json",
        "roadmaps/r.json",
        "a/formatted-w.md",
    ]:
        write(rel, "{}")
    statuses = {e.source: e.status for e in discover(corpus).entries}
    assert statuses == {
        "a/Formatted-y.json": "skipped",
        "a/Roadmaps/q.json": "skipped",
        "a/formatted-w.md": "text",
        "a/formatted-x.json": "roadmap",
        "a/formatted-z.JSON": "skipped",
        "a/myroadmaps.json": "roadmap",
        "a/plain.json": "skipped",
        "a/roadmaps/p.json": "roadmap",
        "roadmaps/r.json": "roadmap",
    }


def test_roadmaps_in_the_absolute_path_do_not_count(tmp_path: Path) -> None:
    root = tmp_path / "roadmaps-demo" / "corpus"
    (root / "a").mkdir(parents=True)
    (root / "a" / "plain.json").write_text("{}")
    assert [e.status for e in discover(root).entries] == ["skipped"]


def test_manifest_records_size_and_sha256(corpus: Path, write: Writer) -> None:
    data = "Héllo\n".encode()
    write("a/x.md", data)
    [entry] = discover(corpus).entries
    assert (entry.area, entry.size, entry.sha256) == (
        "a",
        len(data),
        hashlib.sha256(data).hexdigest(),
    )


# --- symlinks -----------------------------------------------------------------------------


def test_symlinked_area_and_folder_are_followed(corpus: Path, write: Writer) -> None:
    write("real/sub/x.md", "x")
    symlink(corpus / "alias", "real")
    symlink(corpus / "other" / "linked", "../real/sub")
    write("other/y.md", "y")
    entries = discover(corpus).entries
    assert [(e.source, e.status) for e in entries] == [
        ("alias/sub/x.md", "text"),
        ("other/linked/x.md", "skipped"),
        ("other/y.md", "text"),
        ("real/sub/x.md", "skipped"),
    ]
    assert (
        entries[1].reason == REASON_DUPLICATE and entries[1].detail == "same file as alias/sub/x.md"
    )


def test_file_reached_twice_collapses_including_hard_links(corpus: Path, write: Writer) -> None:
    target = write("a/x.md", "x")
    symlink(corpus / "b" / "soft.md", "../a/x.md")
    os.link(target, corpus / "b" / "hard.md")
    assert read_sources(corpus) == ["a/x.md"]
    assert skipped(corpus) == {"b/hard.md": REASON_DUPLICATE, "b/soft.md": REASON_DUPLICATE}


def test_link_into_a_raw_folder_is_followed_by_its_own_name(corpus: Path, write: Writer) -> None:
    write("a/raw/x.md", "x")
    symlink(corpus / "a" / "y.md", "raw/x.md")
    assert read_sources(corpus) == ["a/y.md"]


def test_dangling_link_is_reported(corpus: Path, write: Writer) -> None:
    symlink(corpus / "a" / "gone.md", "missing.md")
    symlink(corpus / "dangling-area", "nowhere")
    [file_entry, area_entry] = discover(corpus).entries
    assert (file_entry.source, file_entry.reason, file_entry.problem) == (
        "a/gone.md",
        REASON_DANGLING,
        True,
    )
    assert area_entry.source == "dangling-area" and area_entry.reason == REASON_DANGLING


def test_links_leaving_the_root_are_not_followed(
    tmp_path: Path, corpus: Path, write: Writer
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "o.md").write_text("outside")
    symlink(corpus / "a" / "out.md", outside / "o.md")
    symlink(corpus / "a" / "out-dir", outside)
    symlink(corpus / "out-area", "../outside")
    symlink(corpus / "a" / "up.md", "../../outside/o.md")
    assert read_sources(corpus) == []
    assert skipped(corpus) == {
        "a/out-dir": REASON_OUTSIDE,
        "a/out.md": REASON_OUTSIDE,
        "a/up.md": REASON_OUTSIDE,
        "out-area": REASON_OUTSIDE,
    }


def test_corpus_root_reached_through_a_symlink_still_works(tmp_path: Path, write: Writer) -> None:
    write("a/x.md", "x")
    symlink(tmp_path / "root-link", tmp_path / "corpus")
    symlink(tmp_path / "corpus" / "a" / "z-inner.md", "x.md")
    assert read_sources(tmp_path / "root-link") == ["a/x.md"]
    assert skipped(tmp_path / "root-link") == {"a/z-inner.md": REASON_DUPLICATE}


def test_loops_are_reported_not_followed(corpus: Path, write: Writer) -> None:
    write("a/sub/x.md", "x")
    symlink(corpus / "a" / "sub" / "up", "..")
    symlink(corpus / "a" / "root", "..")
    symlink(corpus / "a" / "self.md", "self.md")
    symlink(corpus / "a" / "ping.md", "pong.md")
    symlink(corpus / "a" / "pong.md", "ping.md")
    assert read_sources(corpus) == ["a/sub/x.md"]
    assert skipped(corpus) == {
        "a/ping.md": REASON_LOOP,
        "a/pong.md": REASON_LOOP,
        "a/root": REASON_LOOP,
        "a/self.md": REASON_LOOP,
        "a/sub/up": REASON_LOOP,
    }


def test_non_utf8_names_are_reported_and_skipped(corpus: Path, write: Writer) -> None:
    write("a/good.md", "x")
    folder = os.fsencode(corpus / "a")
    with open(os.path.join(folder, b"bad\xff.md"), "wb") as handle:
        handle.write(b"x")
    os.mkdir(os.path.join(os.fsencode(corpus), b"area\xfe"))
    entries = discover(corpus).entries
    bad = [e for e in entries if e.reason == REASON_BAD_NAME]
    assert sorted(e.source for e in bad) == ["a/bad\\xff.md", "area\\xfe"]
    assert all(e.problem for e in bad)
    assert read_sources(corpus) == ["a/good.md"]


def test_special_files_are_reported(corpus: Path, write: Writer) -> None:
    write("a/x.md", "x")
    os.mkfifo(corpus / "a" / "pipe.md")
    os.mkfifo(corpus / "a" / "pipe.bin")
    entries = {e.source: e for e in discover(corpus).entries}
    assert entries["a/pipe.md"].reason == REASON_SPECIAL and entries["a/pipe.md"].problem
    assert entries["a/pipe.bin"].reason == REASON_SPECIAL and not entries["a/pipe.bin"].problem


def test_a_file_that_cannot_be_read_is_reported_not_raised(corpus: Path, write: Writer) -> None:
    path = write("a/x.md", "x")
    [found] = [item for item in walk_corpus(corpus) if isinstance(item, CorpusFile)]
    path.unlink()
    path.mkdir()  # a directory now stands where the walk saw a file: open() raises
    outcome = ingest_file(found)
    assert outcome.chunks == []
    assert (outcome.entry.status, outcome.entry.reason, outcome.entry.problem) == (
        "skipped",
        discovery.REASON_UNREADABLE,
        True,
    )


# --- the root itself ----------------------------------------------------------------------


def test_missing_root_raises_a_file_not_found_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(FileNotFoundError) as caught:
        discover(missing)
    assert isinstance(caught.value, CorpusNotFoundError)
    assert str(missing) in str(caught.value)


def test_root_that_is_a_file_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(CorpusNotFoundError, match="not a directory"):
        discover(file)


def test_walk_yields_only_files_and_manifest_entries(corpus: Path, write: Writer) -> None:
    write("a/x.md", "x")
    write("a/y.png", "x")
    kinds = [type(item) for item in walk_corpus(corpus)]
    assert kinds == [CorpusFile, ManifestEntry]


def test_a_walk_can_be_iterated_again(corpus: Path, write: Writer) -> None:
    write("a/x.md", "x")
    walk = walk_corpus(corpus)
    first, second = list(walk), list(walk)
    assert first == second and walk.areas == ["a"]
    assert isinstance(second[0], CorpusFile)
