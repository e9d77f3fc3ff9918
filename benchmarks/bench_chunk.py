"""Chunking speed: our ingest and `brain-pipeline chunk` next to the JavaScript reference.

Generates a deterministic corpus shaped like the real one (about 1,300 Markdown files,
~5 MB, headings, CRLF files, shared boilerplate paragraphs and some roadmap JSON) in a
temporary folder, then measures, the median and range of N rounds (default 5) in which
the three take turns (benchmarks/_figures.py; a reference unit timed between the rounds
states the machine's speed):

  ingest        ingest_corpus() + serialisation, in this process (warm imports)
  cli           `brain-pipeline chunk CORPUS -o OUT` end to end, as a fresh process
  node (peer)   brain_pipeline_tests/corpus/reference_ingest.mjs on the same corpus

and checks that the CLI and Node wrote identical bytes.

    python benchmarks/bench_chunk.py [--files 1300] [--runs 5] [--seed 20240601]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _figures import DEFAULT_RUNS, Session, ratio

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "brain_pipeline_tests" / "corpus" / "reference_ingest.mjs"

_VOCABULARY_TEXT = (
    "the a of to and in is for that with as on are be by this it from or an can you your "
    "instance bucket subnet route table gateway policy role lambda function queue stream "
    "region availability zone cluster container image registry pipeline deploy monitor "
    "metric alarm log trace cache replica shard partition key index query transaction "
    "tense clause modal verb adjective adverb phrase idiom vocabulary listening reading "
    "writing speaking exam band score essay paragraph cell automaton rule neighbourhood "
    "glider oscillator generation state grid boundary pattern algorithm complexity graph "
    "tree heap stack array hash interview offer salary design scale latency throughput "
    "café naïve résumé — “quoted” 'single' (parenthesis) [bracket] e.g. i.e. 10 20 300"
)
VOCABULARY = _VOCABULARY_TEXT.split()


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(VOCABULARY) for _ in range(rng.randrange(6, 22))]
    return " ".join(words).capitalize() + rng.choice([".", ".", ".", "?", "!", ":"])


def _paragraph(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.12:
        return "\n".join(f"- {_sentence(rng)}" for _ in range(rng.randrange(2, 6)))
    if kind < 0.16:
        body = "\n".join(f"  {rng.choice(VOCABULARY)} --flag {i}" for i in range(3))
        return f"```bash\n# {rng.choice(VOCABULARY)} step\n{body}\n```"
    if kind < 0.2:
        return rng.choice(["See also.", "Next:", "---", "Tip"])
    return " ".join(_sentence(rng) for _ in range(rng.randrange(1, 6)))


def _markdown(rng: random.Random, boilerplate: list[str], size: int) -> str:
    parts = [f"# {_sentence(rng)[:-1]}"]
    length = 0
    while length < size:
        if rng.random() < 0.15:
            part = f"{'#' * rng.randrange(2, 4)} {_sentence(rng)[:-1]}"
        elif rng.random() < 0.05:
            part = rng.choice(boilerplate)
        else:
            part = _paragraph(rng)
        parts.append(part)
        length += len(part)
    text = "\n\n".join(parts) + "\n"
    return text.replace("\n", "\r\n") if rng.random() < 0.05 else text


def _roadmap(rng: random.Random, index: int) -> str:
    topics = [
        {
            "id": f"t{i}",
            "label": _sentence(rng)[:-1],
            "type": rng.choice(["topic", "subtopic", "title", "paragraph"]),
            "level": rng.choice(["beginner", "intermediate", "advanced", None]),
        }
        for i in range(rng.randrange(10, 60))
    ]
    data = {"title": f"Role {index}", "description": _sentence(rng), "topics": topics}
    return json.dumps(data, indent=2, ensure_ascii=False)


def generate_corpus(root: Path, files: int, seed: int) -> int:
    """Write the benchmark corpus; return its size in bytes."""
    rng = random.Random(seed)
    areas = ["aws-tutor", "cellular-automata", "english-certification-instructor", "interview"]
    folders = ["", "basics/", "guides/", "guides/advanced/", "reference/", "exam/"] * 4 + ["raw/"]
    boilerplate = [_paragraph(rng) for _ in range(40)]
    total = 0
    for index in range(files):
        area = areas[index % len(areas)]
        if index % 60 == 0:
            path = root / area / "roadmaps" / f"formatted-role-{index}.json"
            content = _roadmap(rng, index)
        else:
            folder = rng.choice(folders)
            path = root / area / folder / f"{rng.choice(VOCABULARY)}-{index}.md"
            content = _markdown(rng, boilerplate, rng.randrange(1500, 6000))
        path.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8")
        path.write_bytes(data)
        total += len(data)
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1300)
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS)
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args()

    from brain_pipeline.corpus.file_chunks import ingest_corpus

    session = Session(runs=args.runs).start()

    node = shutil.which("node")
    cli = shutil.which("brain-pipeline")
    with tempfile.TemporaryDirectory(prefix="bench-chunk-") as tmp:
        root = Path(tmp) / "corpus"
        size = generate_corpus(root, args.files, args.seed)
        result = ingest_corpus(root)
        files, chunks = result.files_seen, len(result.chunks)
        print(
            f"corpus: {files} files, {size / 1e6:.1f} MB, {chunks} chunks "
            f"({result.duplicates_collapsed} duplicates collapsed), seed {args.seed}"
        )

        def in_process() -> None:
            ingest_corpus(root).store_bytes()

        ours_out, node_out = Path(tmp) / "ours.json", Path(tmp) / "node.json"
        command = [cli] if cli else [sys.executable, "-m", "brain_pipeline.cli"]

        def run_cli() -> None:
            ours_out.unlink(missing_ok=True)
            subprocess.run(
                [*command, "chunk", str(root), "-o", str(ours_out), "-q"],
                check=True,
                stderr=subprocess.DEVNULL,
            )

        def run_node() -> None:
            subprocess.run([str(node), str(REFERENCE), str(root), str(node_out)], check=True)

        actions = {"ingest (in-process)": in_process, "brain-pipeline chunk": run_cli}
        if node:
            actions["node reference (peer)"] = run_node
        figures = session.rounds(actions)
        for name, seconds in figures.items():
            per_second = seconds.map(lambda s: chunks / s)
            print(f"{name:24} {seconds.text('{:.3f}', 's')} wall; "
                  f"{per_second.text('{:,.0f}', 'chunks/s')}")
        session.finish()
        if node:
            same = ours_out.read_bytes() == node_out.read_bytes()
            print(f"CLI and node output identical: {'yes' if same else 'NO'}")
            cli_over_node = ratio(figures["brain-pipeline chunk"], figures["node reference (peer)"])
            print(f"CLI wall time / node wall time, per round: {cli_over_node.text('{:.2f}')}")
            return 0 if same else 1
        print("node not found: no peer measured")
    return 0


if __name__ == "__main__":
    sys.exit(main())
