"""Roadmaps that turn a few kilobytes into gigabytes, as issue 36 found them.

The `title` is an array nested `depth` deep; the original ingest copies it, indented one
level more per level, into the heading of every topic's chunk, so the store grows with
depth squared times topics. Shared by the tests and `benchmarks/bench_hostile_input.py`.
"""

from __future__ import annotations

from pathlib import Path

#: (file name, nesting depth, topics): about 5 KB, 60 KB and 800 KB of JSON.
HOSTILE_ROADMAPS = (
    ("formatted-deep-700.json", 700, 100),
    ("formatted-deep-3000.json", 3_000, 1_500),
    ("formatted-deep-800k.json", 200_000, 11_000),
)


def deep_title_roadmap(depth: int, topics: int) -> str:
    """A roadmap whose title is `"x"` inside `depth` arrays, with `topics` topics."""
    title = "[" * depth + '"x"' + "]" * depth
    rows = ",".join(f'{{"label":"t{i:03}","type":"topic"}}' for i in range(topics))
    return f'{{"title":{title},"topics":[{rows}]}}'


#: (file name, title characters, topics): no nesting at all, about 130 KB, and still
#: 600 MB of store under the original's rule (the title is in every statement and heading).
LONG_TITLE_ROADMAP = ("formatted-long-title.json", 100_000, 3_000)


def long_title_roadmap(length: int, topics: int) -> str:
    """A roadmap whose title is a plain string of `length` characters."""
    rows = ",".join(f'{{"label":"t{i:03}","type":"topic"}}' for i in range(topics))
    return f'{{"title":"{"x" * length}","topics":[{rows}]}}'


def refusal_reason(name: str) -> str:
    """Why the pipeline refuses the roadmap `name`: past the depth JavaScript's String()
    converts, the original itself stops the file (nested too deep); below it, nesting is
    no reason and the file is refused for the store its chunks would take."""
    from brain_pipeline.corpus.jscompat import JS_STRING_MAX_ARRAY_DEPTH

    depth = {file: deep for file, deep, _ in HOSTILE_ROADMAPS}.get(name, 0)
    if depth > JS_STRING_MAX_ARRAY_DEPTH:
        return "JSON nested too deep"
    return "chunks too large for the file"


def hostile_roadmaps() -> dict[str, str]:
    """File name -> text of every roadmap above."""
    files = {name: deep_title_roadmap(depth, topics) for name, depth, topics in HOSTILE_ROADMAPS}
    name, length, topics = LONG_TITLE_ROADMAP
    files[name] = long_title_roadmap(length, topics)
    return files


def write_hostile_roadmaps(folder: Path) -> list[Path]:
    """Write every roadmap above into `folder`; return their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in hostile_roadmaps().items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths
