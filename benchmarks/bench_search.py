"""One `brain-pipeline search` on a big store: cold cache, warm cache, and today's path.

Usage: python benchmarks/bench_search.py [--chunks 200000] [--areas 4] [--workdir DIR]
                                         [--query "..."] [--keep] [--eval]

Each measurement is a fresh Python process, timed with `os.wait4` (wall seconds, user +
system CPU seconds, peak RSS of that process):

* today:  `parse_store` of the whole file, then a fresh in-memory BM25 index of the
          area (`Retriever` over a list of chunks), one lexical query: what `search`
          did before the store view and the index cache.
* cold:   `brain-pipeline search --mode lexical` with the build directory's `state/`
          removed: the sidecar index is scanned, the area is tokenised, its postings
          and the area index are written.
* warm:   the same command again in a new process: sidecar and area index loaded from
          `state/`, only the hits decoded.
* edit:   one chunk of the area replaced (a new store file), then the same command: the
          area's previous postings are reused with the old chunk masked out, plus
          postings of the one new chunk (the only one tokenised).

The three search runs print the same hits as the today run (checked). With `--eval`,
`brain-pipeline eval` (5 labelled queries per area, legacy + BM25 + hybrid=BM25) is
timed too: first run, unchanged inputs (the evaluation record is reused), one chunk
edited (the area's postings are reused as above; the record key changed).

Generator (deterministic, seed 9): a vocabulary of 60,000 pronounceable pseudo-words
drawn with Zipf-like frequencies (rank^-1.1), plus 300 common English words; each chunk
is one paragraph of 12-90 words (sentences of 6-18 words), ~2 % of chunks repeat an
earlier paragraph with a suffix, every 12 chunks share a source file
`<area>/topic-<k // 40>/file-<k>.md`, and most files have a heading. Chunks are assigned
to areas in contiguous blocks (areas sorted), as ingestion writes them, and serialised
with `serialize_store` (the agent's exact bytes).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from brain_pipeline.corpus.store import NO_HEADING, Chunk, chunk_id, serialize_store

ROOT = Path(__file__).resolve().parent.parent
_COMMON_TEXT = (
    "the of and to in is for on with as by at from that this are be or an it can use "
    "data system network service server client request response cache index query store "
    "model train test learn code function value type class object method error file path "
    "user role policy access key secret token bucket region zone cluster node pod image "
    "build deploy release version change update create delete read write list get set "
    "time rate limit size memory disk cpu thread process queue event stream batch job "
    "graph tree table row column record field schema json yaml text word sentence verb "
    "noun adjective grammar tense present past future perfect continuous passive voice "
    "automaton cell rule state neighbour pattern glider oscillator grid step evolution "
    "interview question answer design scale load balance shard replica consistency "
    "latency throughput availability partition failure retry timeout backoff quota"
)
COMMON = _COMMON_TEXT.split()
SYLLABLES = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"] + ["th", "ch", "sh", "qu"]


def _vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    words: dict[str, None] = dict.fromkeys(COMMON)
    while len(words) < size:
        n = int(rng.integers(2, 5))
        words.setdefault("".join(SYLLABLES[i] for i in rng.integers(0, len(SYLLABLES), n)))
    return list(words)


def generate(n_chunks: int, n_areas: int, seed: int = 9) -> list[Chunk]:
    """The synthetic store described in the module docstring (de-duplicated by id)."""
    rng = np.random.default_rng(seed)
    vocab = _vocabulary(rng, 60_000)
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 1.1
    weights /= weights.sum()
    lengths = rng.integers(12, 91, n_chunks)
    words = rng.choice(len(vocab), size=int(lengths.sum()), p=weights)
    areas = [f"area-{a:02d}" for a in range(n_areas)]
    per_area = -(-n_chunks // n_areas)
    breaks = np.cumsum(rng.integers(6, 19, (n_chunks, 8)), axis=1).tolist()
    repeat = (rng.random(n_chunks) < 0.02).tolist()
    ends = np.cumsum(lengths).tolist()
    names = [vocab[w] for w in words.tolist()]
    chunks: list[Chunk] = []
    seen: set[str] = set()
    start = 0
    for k in range(n_chunks):
        picked = names[start : ends[k]]
        start = ends[k]
        for b in breaks[k]:
            if b < len(picked):
                picked[b - 1] += "."
        content = " ".join(picked).capitalize() + "."
        if k > 50 and repeat[k]:
            content = chunks[(k * 7919) % len(chunks)].content + f" (see {k})"
        cid = chunk_id(content)
        if cid in seen:
            continue
        seen.add(cid)
        area = areas[min(k // per_area, n_areas - 1)]
        file_no = k // 12
        source = f"{area}/topic-{file_no // 40}/file-{file_no}.md"
        heading = (
            NO_HEADING if file_no % 5 == 0 else f"Section {file_no % 97} {vocab[file_no % 300]}"
        )
        chunks.append(Chunk(cid, content, area, source, heading))
    return chunks


TODAY = """
import sys
from brain_pipeline.corpus.store import load_store
from brain_pipeline.retrieval.hybrid import Retriever
chunks = load_store(sys.argv[1])
hits = Retriever(chunks).search(sys.argv[2], sys.argv[3], limit=10, mode="lexical").hits
print("\\n".join(f"{h.chunk.id} {h.score!r}" for h in hits))
"""

NEW = """
import sys
from brain_pipeline.evaluation.store_search import open_store
from brain_pipeline.retrieval.hybrid import Retriever
opened = open_store(sys.argv[1])
hits = Retriever(opened.source()).search(sys.argv[2], sys.argv[3], limit=10, mode="lexical").hits
print("\\n".join(f"{h.chunk.id} {h.score!r}" for h in hits))
"""


def measure(argv: list[str], env: dict[str, str]) -> tuple[float, float, float, str]:
    """Run argv; return wall s, CPU s (user+sys), peak RSS MB, and stdout."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read().decode()
    err = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{argv[:3]} failed ({proc.returncode}):\n{err}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out


def _generate_into(store: Path, n_chunks: int, n_areas: int) -> None:
    """Child-process step: write the synthetic store (keeps the measuring parent small)."""
    t0 = time.perf_counter()
    chunks = generate(n_chunks, n_areas)
    data = serialize_store(chunks)
    store.write_bytes(data)
    area = chunks[len(chunks) // 2].area
    print(f"{area}\t{len(chunks)}\t{len(data)}\t{time.perf_counter() - t0:.0f}")


def _edit_one_chunk(store: Path, area: str) -> None:
    """Child-process step: replace the first chunk of `area` (a new file, new inode)."""
    from brain_pipeline.corpus.store_reader import open_store_view

    view = open_store_view(store)
    chunks = view.all_chunks()
    i = next(k for k, c in enumerate(chunks) if c.area == area)
    content = chunks[i].content + " edited"
    chunks[i] = Chunk(chunk_id(content), content, area, chunks[i].source, chunks[i].heading)
    tmp = store.with_name(".store.tmp")
    tmp.write_bytes(serialize_store(chunks))
    os.replace(tmp, store)


def _write_fixture(store: Path, fixture: Path) -> None:
    """Child-process step: 5 labelled queries per area, each 4 words of a known chunk."""
    import json

    from brain_pipeline.corpus.store_reader import open_store_view

    view = open_store_view(store)
    queries = []
    for area in view.areas:
        rows = view.rows_of_area(area)
        for row in rows[1 :: max(len(rows) // 5, 1)][:5].tolist():  # not the edited one
            chunk = view.chunk_at(row)
            words = chunk.content.replace(".", " ").split()
            queries.append({"query": " ".join(words[1:5]), "area": area, "relevant": [chunk.id]})
    fixture.write_text(json.dumps({"queries": queries}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=200_000)
    parser.add_argument("--areas", type=int, default=4)
    parser.add_argument("--query", default="cache index latency partition")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the generated store")
    parser.add_argument(
        "--eval", action="store_true", help="also time `brain-pipeline eval` (5 queries/area)"
    )
    parser.add_argument(
        "--step", choices=("generate", "edit", "fixture"), help=argparse.SUPPRESS
    )
    parser.add_argument("--store", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--area", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step == "generate":
        return _generate_into(args.store, args.chunks, args.areas)
    if args.step == "edit":
        return _edit_one_chunk(args.store, args.area)
    if args.step == "fixture":
        return _write_fixture(args.store, Path(args.area))

    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-search-"))
    build = work / "build"
    build.mkdir(parents=True, exist_ok=True)
    store = build / "knowledge-store.json"
    config = work / "corpus_config.yaml"
    config.write_text(f"build_dir: {build}\nembedding:\n  provider: none\n")
    env = dict(os.environ, BRAIN_CONFIG=str(config), PYTHONPATH=str(ROOT))
    py = sys.executable
    me = [py, str(Path(__file__).resolve())]
    generated = subprocess.run(
        [*me, "--step", "generate", "--store", str(store), "--chunks", str(args.chunks),
         "--areas", str(args.areas)],
        env=env, check=True, capture_output=True, text=True,
    ).stdout.split()
    area, n, size, seconds = generated[0], int(generated[1]), int(generated[2]), generated[3]
    print(f"store: {n} chunks, {size / 1e6:.0f} MB, {args.areas} areas (generated in "
          f"{seconds} s); one query {args.query!r} in {area}, lexical, top 10")

    cli = [py, "-m", "brain_pipeline.cli", "search", args.query, "--area", area,
           "--mode", "lexical", "--json"]
    rows = []
    today = measure([py, "-c", TODAY, str(store), args.query, area], env)
    rows.append(("today: parse_store + fresh BM25", today))
    shutil.rmtree(build / "state", ignore_errors=True)
    rows.append(("cold: brain-pipeline search, no cache", measure(cli, env)))
    rows.append(("warm: brain-pipeline search, cached", measure(cli, env)))
    warm_core = measure([py, "-c", NEW, str(store), args.query, area], env)
    rows.append(("warm: core only (no CLI/config import)", warm_core))
    subprocess.run([*me, "--step", "edit", "--store", str(store), "--area", area],
                   env=env, check=True)
    rows.append(("edit: one chunk changed, then search", measure(cli, env)))
    rows.append(("warm again after the edit", measure(cli, env)))

    if args.eval:
        fixture = work / "fixture.json"
        subprocess.run([*me, "--step", "fixture", "--store", str(store), "--area", str(fixture)],
                       env=env, check=True)
        config.write_text(f"build_dir: {build}\nembedding:\n  provider: none\n"
                          f"evaluation:\n  fixture: {fixture}\n")
        evaluate = [py, "-m", "brain_pipeline.cli", "eval"]
        rows.append(("eval: first run (other areas indexed)", measure(evaluate, env)))
        rows.append(("eval: nothing changed (record reused)", measure(evaluate, env)))
        subprocess.run([*me, "--step", "edit", "--store", str(store), "--area", area],
                       env=env, check=True)
        rows.append(("eval: one chunk edited", measure(evaluate, env)))

    import json

    want = [line.split()[0] for line in today[3].splitlines()]
    for label, (_, _, _, out) in rows[1:3]:
        got = [hit["id"] for hit in json.loads(out)["hits"]]
        assert got == want, f"{label}: {got} != {want}"
    assert [line.split()[0] for line in warm_core[3].splitlines()] == want

    print(f"{'path':<42} {'wall s':>7} {'CPU s':>7} {'peak RSS MB':>12}")
    for label, (wall, cpu, rss, _) in rows:
        print(f"{label:<42} {wall:7.2f} {cpu:7.2f} {rss:12.0f}")
    print("same top-10 ids on the today, cold and warm paths: yes")
    if not args.keep and args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
