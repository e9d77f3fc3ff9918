"""Docs lint: every performance figure the README or a docs page quotes has the command that
produced it beside it.

A "block" is a paragraph, a list item or a table (with the paragraph just before it,
which introduces the table). A block quotes a performance figure when it holds a
throughput, CPU time, latency statistic, memory peak or speed ratio (the patterns
below); such a block must name the command that measured it (`python
benchmarks/bench_*.py ...` or `brain-pipeline bench|eval ...`), every script it names
must exist, and it must say how fast the machine was (the `reference` unit that the
benchmarks print, see benchmarks/_figures.py) or mark the figure as from an earlier run.
Configuration values ("default 10 MB", "every 60 s") are not figures: they carry none of
these units.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "benchmarks"
#: Every page a reader sees: the README and the docs site's pages (docs/benchmarks.md is
#: generated from benchmarks/results/ by tools/gen_docs.py; it is linted as rendered).
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
GENERATED_PAGE = "benchmarks.md"

FIGURE = re.compile(
    r"\d[\d,.]*\s?(?:q/s|texts/s|chunks/s|CPU[- ]s|µs)"  # throughput, CPU time
    r"|\d[\d,.]*\s?ms\b"  # milliseconds
    r"|\d[\d,.]*\s?×"  # a speed ratio
    r"|\b(?:median|p95)\s+\d"  # latency statistics
    r"|\d[\d,.]*\s?[MG]B\s+RSS|peak(?:s at| RSS)\s+\d"  # memory peaks
    r"|\|\s*(?:CPU s|wall|q/s|peak RSS)\b"  # a table of timings
)
COMMAND = re.compile(r"(?:python )?benchmarks/(bench_\w+\.py)|brain-pipeline (?:bench|eval)\b")
MACHINE_SPEED = re.compile(r"\breference\b|earlier run", re.IGNORECASE)
GOAL = re.compile(r"[≤≥<>]\s?\d[\d,.]*\s?\S*")  # "one edit ≤ 20 CPU-s" is a target


def _blocks(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of every paragraph, list item and table outside code
    fences; a table is joined with the paragraph before it."""
    blocks: list[tuple[int, list[str]]] = []
    fenced = False
    previous_blank = True
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```"):
            fenced = not fenced
            previous_blank = True
            continue
        if fenced:
            continue
        if not line.strip():
            previous_blank = True
            continue
        is_table = line.lstrip().startswith("|")
        starts_item = re.match(r"\s*(?:[-*]|\d+\.)\s", line) is not None
        joins_table = is_table and blocks and not blocks[-1][1][-1].lstrip().startswith("|")
        if joins_table or not (previous_blank or starts_item) or (
            is_table and blocks and blocks[-1][1][-1].lstrip().startswith("|")
        ):
            blocks[-1][1].append(line)
        else:
            blocks.append((number, [line]))
        previous_blank = False
    return [(number, "\n".join(lines)) for number, lines in blocks]


def _figure_blocks() -> list[tuple[str, int, str]]:
    """(page, line, text) of every block quoting a performance figure, with what vouches
    for it: on the README and hand-written pages the block itself; on the generated
    benchmark page its `### ` section, whose command and machine line the generator
    writes once above the section's table and notes (tools/gen_docs.py refuses a
    measurement without them)."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        lines = text.splitlines()
        sectioned = page.name == GENERATED_PAGE
        for n, block in _blocks(text):
            if not FIGURE.search(GOAL.sub("", block)):
                continue
            if sectioned:
                heading = max(
                    (i for i in range(n) if lines[i].startswith("### ")), default=None
                )
                if heading is not None:
                    block = "\n".join(lines[heading:n - 1]) + "\n" + block
            found.append((page.relative_to(REPO).as_posix(), n, block))
    return found


def test_the_lint_sees_the_docs_figures() -> None:
    # the lint must not pass vacuously: the docs quote the BM25 and chunking figures
    found = "\n".join(block for _, _, block in _figure_blocks())
    assert "bm25s" in found and "Node.js" in found and "site-packages" in found


def test_every_performance_figure_names_its_command() -> None:
    missing = [f"{page}:{n}: {block.splitlines()[0][:90]}"
               for page, n, block in _figure_blocks() if not COMMAND.search(block)]
    assert not missing, "figures without the command that measured them:\n" + "\n".join(missing)


def test_every_performance_figure_states_the_machine_speed() -> None:
    missing = [f"{page}:{n}: {block.splitlines()[0][:90]}"
               for page, n, block in _figure_blocks() if not MACHINE_SPEED.search(block)]
    assert not missing, (
        "figures without the reference unit of their run (or 'earlier run'):\n"
        + "\n".join(missing)
    )


def test_every_benchmark_the_docs_name_exists() -> None:
    text = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    named = set(re.findall(r"benchmarks/(bench_\w+\.py)", text))
    assert len(named) > 10, "the docs name no benchmark scripts"
    assert sorted(name for name in named if not (BENCHMARKS / name).is_file()) == []


def test_the_block_splitter_keeps_a_table_with_its_introduction() -> None:
    text = "Intro `python benchmarks/bench_x.py`:\n\n| a | CPU s |\n|---|---|\n| 1 | 2 |\n\nnext\n"
    blocks = _blocks(text)
    assert [n for n, _ in blocks] == [1, 7]
    assert "bench_x.py" in blocks[0][1] and "| 1 | 2 |" in blocks[0][1]
