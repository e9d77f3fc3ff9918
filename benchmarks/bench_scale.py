"""What a re-ingest costs as the corpus grows: full, no-change and one-file-edit runs.

For each corpus size this generates a synthetic corpus, then runs `brain-pipeline
materialize` three times as a fresh process, exactly as a user or CI would (embedding
provider `none` unless `--provider` says otherwise, so only ingest, evaluation and
publishing are measured):

  full         first run on an empty build directory and an empty DAGSTER_HOME
  no-change    the same corpus again
  one-edit     one paragraph of one file replaced

and after each run one `brain-pipeline search` (lexical, one query). Per run it prints

  wall s       elapsed time of the command
  CPU s        user + system CPU of the command and everything it started:
               the difference of getrusage(RUSAGE_CHILDREN) around it
  peak RSS     the largest resident set of the command or any process it waited for
               (from wait4: RUSAGE_CHILDREN's ru_maxrss is a high-water mark over every
               child this benchmark ever ran, so it cannot tell runs apart)
  +DAGSTER_HOME  net bytes the run added to the instance folder (run history, event
               logs, anything new pickled there)
  home files written  bytes of files (other than SQLite databases) the run created or
               rewrote in the instance folder: outputs pickled there show up here even
               when a same-size rewrite adds nothing
  search       wall and CPU seconds of the query that followed

and checks that every run exited 0 and published exactly the bytes it built. The
sequence is repeated `--repeat` times (default 5) on a fresh corpus, build and
DAGSTER_HOME, and a summary prints each figure as median [min-max] over the repeats
(benchmarks/_figures.py; a reference unit timed between the repeats states the
machine's speed).

The synthetic corpus (deterministic for a seed):

* N Markdown files spread evenly over 4 areas (`area-0` .. `area-3`), 200 files per
  topic folder (`area-1/topic-003/doc-00712.md`).
* Words come from a vocabulary of 30,000 made-up words (syllable strings, unique),
  drawn with Zipf frequencies (weight of rank r = 1 / r**1.1), so a few words are very
  common and most are rare, like natural text.
* Each file is a `# heading` line long enough to be a chunk, then 11 to 19 body
  paragraphs (15 on average), each of 2 to 4 sentences of 6 to 16 words: about 16
  chunks per file, so 10,000 files give ~158,000 chunks and 70,000 files ~1.1 million.
* About 2 % of body paragraphs are copies from a pool of shared boilerplate paragraphs,
  so the store's de-duplication has work to do.
* A retrieval fixture of 8 queries (2 per area), each made of rare words from one
  paragraph of one file and labelled with that paragraph's chunk id (sha256 of its text,
  the store's id rule), with no floors on the scores: the blocking check runs
  its full evaluation and passes, so publishing is measured too. The edited file is
  never one the fixture points into.

Usage::

    python benchmarks/bench_scale.py --repeat 1         # 1,000 files once (CI size)
    python benchmarks/bench_scale.py --sizes 1000,10000
    python benchmarks/bench_scale.py --sizes 70000 --keep --workdir /tmp/scale
    python benchmarks/bench_scale.py --sizes 1200 --provider auto --runs full   # a newcomer's
                                                  # first run: ~19,000 chunks, no key

The commands run this checkout's code (PYTHONPATH points at it) through
`python -m brain_pipeline.cli`, which is what the `brain-pipeline` script calls.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from _figures import DEFAULT_RUNS, Figure, Session

from brain_pipeline.corpus.store import chunk_id
from brain_pipeline.utils.digest import file_sha256

REPO = Path(__file__).resolve().parents[1]
AREAS = 4
FILES_PER_TOPIC = 200
VOCABULARY_SIZE = 30_000
ZIPF_EXPONENT = 1.1
DUPLICATE_SHARE = 0.02
BOILERPLATE_POOL = 60
QUERIES_PER_AREA = 2
STORE_FILENAME = "knowledge-store.json"

# Environment that would point the commands at real services or another configuration.
_DROPPED_ENV = (
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "CURATED_CONTENT_PATH",
    "RETRIEVAL_MODE",
    "S3_BUCKET_NAME",
    "AWS_S3_BUCKET",
    "BRAIN_BUILD_DIR",
    "BRAIN_PUBLISH_ROOT",
    "BRAIN_EVAL_FIXTURE",
    # A user's install caches bytecode; without it every run would compile the project's
    # modules again (the peers' installed packages have theirs), a cost no user pays.
    "PYTHONDONTWRITEBYTECODE",
)

_CONSONANTS = tuple("bcdfghjklmnprstvwz") + ("br", "ch", "cr", "dr", "gr", "kl", "pl", "sh", "st")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ie", "oo", "ou")


# --- the synthetic corpus ------------------------------------------------------------


def make_vocabulary(rng: random.Random) -> list[str]:
    """VOCABULARY_SIZE unique syllable words, shortest first (frequent words are short)."""
    words: set[str] = set()
    syllables = 1
    while len(words) < VOCABULARY_SIZE:
        for _ in range(VOCABULARY_SIZE * 2):
            word = "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(syllables))
            words.add(word)
            if len(words) >= VOCABULARY_SIZE:
                break
        syllables += 1
    return sorted(words, key=lambda w: (len(w), w))


class TextMaker:
    """Sentences and paragraphs with Zipf-distributed words, drawn in numpy batches."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.np_rng = np.random.default_rng(seed)
        self.vocabulary = np.array(make_vocabulary(self.rng), dtype=object)
        weights = 1.0 / np.arange(1, VOCABULARY_SIZE + 1, dtype=np.float64) ** ZIPF_EXPONENT
        self.cumulative = np.cumsum(weights / weights.sum())

    def words(self, count: int) -> list[str]:
        ranks = np.searchsorted(self.cumulative, self.np_rng.random(count), side="right")
        ranks = np.minimum(ranks, VOCABULARY_SIZE - 1)
        return list(self.vocabulary[ranks])

    def paragraph(self) -> str:
        lengths = [self.rng.randint(6, 16) for _ in range(self.rng.randint(2, 4))]
        pool = self.words(sum(lengths))
        sentences, start = [], 0
        for length in lengths:
            words = pool[start : start + length]
            start += length
            sentences.append(" ".join(words).capitalize() + self.rng.choice(".....?!"))
        return " ".join(sentences)

    def heading(self, number: int) -> str:
        return f"# Topic {number}: " + " ".join(self.words(3))


@dataclass
class Corpus:
    root: Path
    files: list[Path]
    fixture: Path
    fixture_files: set[Path]
    text: TextMaker


def generate_corpus(root: Path, files: int, seed: int) -> Corpus:
    """Write `files` Markdown files over AREAS areas; see the module docstring."""
    text = TextMaker(seed)
    rng = text.rng
    boilerplate = [text.paragraph() for _ in range(BOILERPLATE_POOL)]
    paths: list[Path] = []
    for number in range(files):
        area = number % AREAS
        index_in_area = number // AREAS
        folder = root / f"area-{area}" / f"topic-{index_in_area // FILES_PER_TOPIC:03d}"
        if index_in_area % FILES_PER_TOPIC == 0:
            folder.mkdir(parents=True, exist_ok=True)
        paragraphs = [text.heading(number)]
        for _ in range(rng.randint(11, 19)):
            if rng.random() < DUPLICATE_SHARE:
                paragraphs.append(rng.choice(boilerplate))
            else:
                paragraphs.append(text.paragraph())
        path = folder / f"doc-{number:05d}.md"
        path.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
        paths.append(path)
    fixture = root.parent / "fixture.json"
    chosen = write_fixture(root, paths, fixture, rng, set(boilerplate))
    return Corpus(root, paths, fixture, chosen, text)


def write_fixture(
    root: Path, paths: list[Path], target: Path, rng: random.Random, shared: set[str]
) -> set[Path]:
    """QUERIES_PER_AREA labelled queries per area, from rare words of one paragraph each.

    Labels point at paragraphs of their own area that are not shared boilerplate: a
    shared paragraph's chunk lives where it first occurs, which may be another area.
    """
    queries: list[dict[str, Any]] = []
    chosen: set[Path] = set()
    for area in range(AREAS):
        name = f"area-{area}"
        candidates = [p for p in paths if p.relative_to(root).parts[0] == name]
        for path in rng.sample(candidates, min(QUERIES_PER_AREA, len(candidates))):
            # Body paragraphs are written trimmed, so a paragraph's chunk id is its hash.
            body = path.read_text(encoding="utf-8").rstrip("\n").split("\n\n")[1:]
            paragraph = rng.choice([p for p in body if p not in shared] or body)
            # The longest words of the paragraph are its rarest (frequent words are short).
            unique = set(re.findall(r"[a-z]+", paragraph.lower()))
            words = sorted(unique, key=lambda w: (-len(w), w))
            queries.append(
                {
                    "query": " ".join(words[:4]),
                    "area": name,
                    "relevant": [chunk_id(paragraph)],
                }
            )
            chosen.add(path)
    target.write_text(
        json.dumps({"$comment": ["bench_scale.py synthetic fixture"], "queries": queries}),
        encoding="utf-8",
    )
    return chosen


def edit_one_file(corpus: Corpus) -> Path:
    """Replace the middle paragraph of one file the fixture does not point into."""
    for path in corpus.files[len(corpus.files) // 2 :] + corpus.files:
        if path not in corpus.fixture_files:
            break
    paragraphs = path.read_text(encoding="utf-8").rstrip("\n").split("\n\n")
    paragraphs[len(paragraphs) // 2] = corpus.text.paragraph()
    path.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    return path


# --- running and measuring ----------------------------------------------------------


@dataclass
class Measured:
    exit_code: int
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    stdout: str
    stderr: str


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_measured(args: list[str], env: dict[str, str], log_dir: Path, name: str) -> Measured:
    """Run a command to completion; CPU from RUSAGE_CHILDREN, peak RSS from wait4."""
    out_path, err_path = log_dir / f"{name}.out", log_dir / f"{name}.err"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        cpu_before = _children_cpu()
        started = time.perf_counter()
        process = subprocess.Popen(args, env=env, stdout=out, stderr=err, cwd=log_dir)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        cpu = _children_cpu() - cpu_before
        process.returncode = os.waitstatus_to_exitcode(status)
    return Measured(
        exit_code=process.returncode,
        wall_s=wall,
        cpu_s=cpu,
        peak_rss_mb=usage.ru_maxrss / 1024,  # kilobytes on Linux
        stdout=out_path.read_text(encoding="utf-8", errors="replace"),
        stderr=err_path.read_text(encoding="utf-8", errors="replace"),
    )


_SQLITE_SUFFIXES = (".db", ".db-wal", ".db-shm", ".db-journal")


def folder_state(folder: Path) -> dict[str, tuple[int, int]]:
    """path -> (size, mtime_ns) of every file under `folder`."""
    state: dict[str, tuple[int, int]] = {}
    for dirpath, _dirs, names in os.walk(folder):
        for name in names:
            path = os.path.join(dirpath, name)
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                state[path] = (st.st_size, st.st_mtime_ns)
    return state


def home_traffic(
    before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]
) -> tuple[int, int]:
    """(net bytes added, bytes of non-SQLite files created or rewritten) between snapshots.

    The second figure catches outputs pickled into the instance: rewriting a same-size
    pickle adds nothing to the folder but still writes the whole corpus. SQLite files
    are left out of it because their growth is already the first figure.
    """
    added = sum(s for s, _ in after.values()) - sum(s for s, _ in before.values())
    rewritten = sum(
        size
        for path, (size, mtime) in after.items()
        if before.get(path) != (size, mtime) and not path.endswith(_SQLITE_SUFFIXES)
    )
    return added, rewritten


RUNS = ("full", "no-change", "one-edit")


@dataclass
class Row:
    files: int
    chunks: int
    run: str
    materialize: Measured
    home_added: int
    home_rewritten: int
    search: Measured


def child_env(config: Path, home: Path, provider: str = "none") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    env["BRAIN_CONFIG"] = str(config)
    env["DAGSTER_HOME"] = str(home)
    env["BRAIN_EMBEDDING_PROVIDER"] = provider
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def bench_size(
    files: int,
    workdir: Path,
    seed: int,
    provider: str = "none",
    runs: tuple[str, ...] = RUNS,
) -> list[Row]:
    started = time.perf_counter()
    corpus = generate_corpus(workdir / "corpus", files, seed)
    print(f"  generated {files} files in {time.perf_counter() - started:.1f}s", flush=True)
    build, publish, home = workdir / "build", workdir / "agent", workdir / "dagster_home"
    config = workdir / "corpus_config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "corpus": {"path": str(corpus.root), "candidates": []},
                "build_dir": str(build),
                "embedding": {"provider": provider},
                "retrieval": {"mode": "lexical"},
                "evaluation": {"fixture": str(corpus.fixture), "thresholds": {}},
                "publish": {"root": str(publish)},
                "schedule": {"enabled": False, "sensor_enabled": False},
            }
        ),
        encoding="utf-8",
    )
    env = child_env(config, home, provider)
    logs = workdir / "logs"
    logs.mkdir()
    fixture = json.loads(corpus.fixture.read_text(encoding="utf-8"))
    query = fixture["queries"][0]
    cli = [sys.executable, "-m", "brain_pipeline.cli"]
    rows: list[Row] = []
    for run in runs:
        if run == "one-edit":
            edited = edit_one_file(corpus)
            print(f"  edited {edited.relative_to(corpus.root)}", flush=True)
        before = folder_state(home)
        materialize = run_measured([*cli, "materialize"], env, logs, f"materialize-{run}")
        added, rewritten = home_traffic(before, folder_state(home))
        if materialize.exit_code != 0:
            raise SystemExit(
                f"materialize ({run}, {files} files) exited {materialize.exit_code}:\n"
                f"{materialize.stderr[-3000:]}"
            )
        # Streamed, not read whole: bytes held here would be in every child forked
        # next, and inflate the peak RSS that wait4 reports for it.
        store = build / STORE_FILENAME
        if file_sha256(store) != file_sha256(publish / "src" / "storage" / STORE_FILENAME):
            raise SystemExit(f"{run}: the published store differs from the build's")
        search = run_measured(
            [*cli, "search", query["query"], "--area", query["area"], "--mode", "lexical"],
            env,
            logs,
            f"search-{run}",
        )
        if search.exit_code != 0:
            raise SystemExit(f"search ({run}) exited {search.exit_code}:\n{search.stderr[-3000:]}")
        chunks = _count(store, b'"id": "')
        rows.append(Row(files, chunks, run, materialize, added, rewritten, search))
        print(
            f"  {run:<10} {materialize.wall_s:6.1f}s wall {materialize.cpu_s:6.1f} CPU-s "
            f"{materialize.peak_rss_mb:6.0f} MB",
            flush=True,
        )
    return rows


def _count(path: Path, needle: bytes) -> int:
    """Occurrences of `needle` in the file, read in blocks (overlapping by its length)."""
    found, tail = 0, b""
    with path.open("rb") as handle:
        while block := handle.read(1 << 24):
            window = tail + block
            found += window.count(needle)
            # Too short to hold the needle: only a match across the boundary uses it.
            tail = window[-(len(needle) - 1) :] if len(needle) > 1 else b""
    return found


def _size(value: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if abs(value) >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value} B"


def print_table(rows: list[Row]) -> None:
    header = [
        "files",
        "chunks",
        "run",
        "wall s",
        "CPU s",
        "peak RSS MB",
        "+DAGSTER_HOME",
        "home files written",
        "search wall s",
        "search CPU s",
        "search RSS MB",
    ]
    lines = [
        [
            f"{r.files:,}",
            f"{r.chunks:,}",
            r.run,
            f"{r.materialize.wall_s:.1f}",
            f"{r.materialize.cpu_s:.1f}",
            f"{r.materialize.peak_rss_mb:.0f}",
            _size(r.home_added),
            _size(r.home_rewritten),
            f"{r.search.wall_s:.2f}",
            f"{r.search.cpu_s:.2f}",
            f"{r.search.peak_rss_mb:.0f}",
        ]
        for r in rows
    ]
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for line in lines:
        print("| " + " | ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) + " |")


def print_summary(rows: list[Row]) -> None:
    """Each (size, run) as median [min-max] over its repeats."""
    groups: dict[tuple[int, str], list[Row]] = {}
    for row in rows:
        groups.setdefault((row.files, row.run), []).append(row)
    print("summary, median [min-max] over the repeats:")
    for (files, run), group in groups.items():

        def figure(value: Callable[[Row], float], fmt: str, unit: str) -> str:
            return Figure.of(value(r) for r in group).text(fmt, unit)  # noqa: B023

        print(
            f"  {files:,} files / {group[0].chunks:,} chunks, {run}: "
            f"wall {figure(lambda r: r.materialize.wall_s, '{:.1f}', 's')}; "
            f"CPU {figure(lambda r: r.materialize.cpu_s, '{:.1f}', 's')}; "
            f"peak RSS {figure(lambda r: r.materialize.peak_rss_mb, '{:.0f}', 'MB')}; "
            f"search CPU {figure(lambda r: r.search.cpu_s, '{:.2f}', 's')}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        default="1000",
        help="comma-separated corpus sizes in files (default: 1000, the CI size)",
    )
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--workdir", type=Path, help="where to build (default: a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep corpora, builds and logs")
    parser.add_argument(
        "--provider",
        choices=("none", "auto", "local"),
        default="none",
        help="embedding.provider of the runs (default none; auto without a key is what a "
        "new user's first run does)",
    )
    parser.add_argument(
        "--runs",
        default=",".join(RUNS),
        help=f"which runs, in order (default {','.join(RUNS)}; 'full' alone: the first run)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=DEFAULT_RUNS,
        help=f"repeats of the whole sequence per size (median; default {DEFAULT_RUNS})",
    )
    args = parser.parse_args(argv)
    session = Session(runs=args.repeat).start()
    runs = tuple(r.strip() for r in args.runs.split(",") if r.strip())
    if not runs or any(r not in RUNS for r in runs):
        parser.error(f"--runs: expected some of {','.join(RUNS)}, got {args.runs!r}")
    try:
        sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--sizes: expected numbers like 2000,10000, got {args.sizes!r}")
    if not sizes or min(sizes) < AREAS:
        parser.error(f"--sizes: each size must be at least {AREAS} files")
    base = args.workdir or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    base.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    try:
        for files in sizes:
            for repeat in range(max(args.repeat, 1)):
                workdir = base / f"files-{files}" / f"repeat-{repeat + 1}"
                if workdir.exists():
                    shutil.rmtree(workdir)
                workdir.mkdir(parents=True)
                print(f"== {files} files ({workdir})", flush=True)
                rows.extend(bench_size(files, workdir, args.seed, args.provider, runs))
                session.note_reference()
                if not args.keep:
                    shutil.rmtree(workdir, ignore_errors=True)
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(base, ignore_errors=True)
    print()
    print_table(rows)
    print()
    print_summary(rows)
    session.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
