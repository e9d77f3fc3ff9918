"""`brain-pipeline chunk`: thin, atomic, and honest on stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from brain_pipeline.cli import main
from brain_pipeline.corpus.file_chunks import ingest_corpus
from brain_pipeline_tests.corpus import conftest as corpus_fixtures
from brain_pipeline_tests.corpus.conftest import Writer

# The corpus tests' fixtures: an empty corpus folder and a writer into it.
corpus = corpus_fixtures.corpus
write = corpus_fixtures.write

TEXT = "# Title\n\nA paragraph long enough to be kept in the store.\n"


def test_writes_the_store_and_a_summary(
    corpus: Path, write: Writer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write("a/x.md", TEXT)
    write("a/formatted-bad.json", "{")
    out = tmp_path / "out" / "store.json"
    assert main(["chunk", str(corpus), "-o", str(out)]) == 0
    assert out.read_bytes() == ingest_corpus(corpus).store_bytes()
    err = capsys.readouterr().err
    assert "a/formatted-bad.json: invalid JSON" in err
    summary = err.strip().splitlines()[-1]
    assert "2 files, 1 chunks, 0 duplicates collapsed, 1 problems" in summary
    assert sorted(p.name for p in out.parent.iterdir()) == ["store.json"]  # no temp files


def test_default_output_is_knowledge_store_json_in_the_working_directory(
    corpus: Path, write: Writer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("a/x.md", TEXT)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["chunk", str(corpus)]) == 0
    assert (work / "knowledge-store.json").read_bytes() == ingest_corpus(corpus).store_bytes()


def test_without_a_corpus_argument_the_configured_corpus_is_used(
    corpus: Path, write: Writer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("a/x.md", TEXT)
    work = tmp_path / "elsewhere"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("CURATED_CONTENT_PATH", str(corpus))
    assert main(["chunk", "-o", "s.json"]) == 0
    assert (work / "s.json").read_bytes() == ingest_corpus(corpus).store_bytes()


def test_unchanged_store_is_not_rewritten(
    corpus: Path, write: Writer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write("a/x.md", TEXT)
    out = tmp_path / "store.json"
    assert main(["chunk", str(corpus), "-o", str(out)]) == 0
    os.utime(out, ns=(1, 1))
    assert main(["chunk", str(corpus), "-o", str(out), "-q"]) == 0
    assert out.stat().st_mtime_ns == 1
    assert "(unchanged)" in capsys.readouterr().err


def test_missing_corpus_exits_non_zero_with_a_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "absent"
    assert main(["chunk", str(missing), "-o", str(tmp_path / "s.json")]) == 2
    err = capsys.readouterr().err
    assert "corpus directory does not exist" in err and str(missing) in err
    assert not (tmp_path / "s.json").exists()


def test_console_script_runs_without_importing_dagster(corpus: Path, write: Writer) -> None:
    write("a/x.md", TEXT)
    probe = (
        "import sys; from brain_pipeline.cli import main; "
        f"code = main(['chunk', {str(corpus)!r}, '-o', {str(corpus.parent / 'o.json')!r}]); "
        "assert 'dagster' not in sys.modules, 'dagster imported'; sys.exit(code)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "1 chunks" in done.stderr


def test_junk_is_reported_and_the_limits_can_be_set(
    corpus: Path, write: Writer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write("a/x.md", TEXT)
    write("a/program.md", b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    write("a/long.txt", "z" * 300 + "\n")
    out = tmp_path / "store.json"
    argv = ["chunk", str(corpus), "-o", str(out), "--max-paragraph-chars", "200"]
    assert main([*argv, "--max-file-bytes", "100000"]) == 0
    err = capsys.readouterr().err
    assert "problem: a/program.md: binary file: NUL byte at offset 7" in err
    assert "problem: a/long.txt: paragraph too long: 1 paragraph over 200 characters" in err
    assert "3 files, 2 chunks, 0 duplicates collapsed, 2 problems" in err
    assert main([*argv, "--max-file-bytes", "100"]) == 0
    err = capsys.readouterr().err
    assert "problem: a/long.txt: file too large: 301 bytes, over the limit of 100" in err
    assert main([*argv, "--max-file-bytes", "0"]) == 2
    assert "ingest limits must be positive" in capsys.readouterr().err


def test_without_a_corpus_argument_the_configured_limits_apply(
    corpus: Path, write: Writer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    write("a/x.md", TEXT)
    config = tmp_path / "c.yaml"
    config.write_text(f"corpus:\n  path: {corpus}\n  max_file_bytes: 10\n", encoding="utf-8")
    monkeypatch.setenv("BRAIN_CONFIG", str(config))
    assert main(["chunk", "-o", str(tmp_path / "s.json")]) == 0
    assert "a/x.md: file too large" in capsys.readouterr().err


MEMORY_CAP = 4 * 1024**3  # bytes of address space for the whole command


def _capped() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def test_roadmaps_that_multiply_are_refused_and_the_rest_publishes_in_bounded_memory(
    corpus: Path, write: Writer, tmp_path: Path
) -> None:
    from brain_pipeline_tests.corpus.hostile import (
        hostile_roadmaps,
        refusal_reason,
        write_hostile_roadmaps,
    )

    write("a/x.md", TEXT)
    write("b/formatted-ok.json", '{"title": "Ok", "topics": [{"label": "L", "type": "topic"}]}')
    write_hostile_roadmaps(corpus / "b")
    out = tmp_path / "store.json"
    done = subprocess.run(
        [sys.executable, "-m", "brain_pipeline.cli", "chunk", str(corpus), "-o", str(out)],
        capture_output=True,
        text=True,
        preexec_fn=_capped,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    problems = [line for line in done.stderr.splitlines() if "problem:" in line]
    names = sorted(hostile_roadmaps())
    assert len(problems) == len(names), done.stderr
    for name, line in zip(names, sorted(problems), strict=True):
        assert f"problem: b/{name}: " in line
        assert refusal_reason(name) in line
    store = out.read_bytes()
    assert len(store) < 3_000_000
    sources = {c.source for c in ingest_corpus(corpus).chunks}
    assert sources == {"a/x.md", "b/formatted-ok.json"}
    assert b'"source": "a/x.md"' in store and b'"source": "b/formatted-ok.json"' in store
