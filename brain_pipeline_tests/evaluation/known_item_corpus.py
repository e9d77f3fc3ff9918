"""A small corpus for the known-item tests: every passage has words of its own.

Each passage opens with two made-up words no other passage shares (so a learner query
finds it), followed by common filler; files hold several passages under headings.
"""

from __future__ import annotations

from collections.abc import Sequence

from brain_pipeline.corpus.store import Chunk, chunk_id

FILLER = (
    "This section explains the topic in detail with examples, notes and the usual "
    "caveats that every learner should keep in mind when practising the material."
)


def word(area: str, n: int) -> str:
    """A made-up word unique to (area, n), made of letters only."""
    letters = "bcdfghjklmnpqrstvwz"
    out = ""
    value = n + 100_000 * (sum(map(ord, area)) % 97 + 1)
    while value:
        value, digit = divmod(value, len(letters))
        out += letters[digit]
    return "zy" + out + "ko"


def passage(area: str, n: int, *, extra: str = "") -> str:
    return f"The {word(area, n)} method and {word(area, n + 5000)} rule. {FILLER}{extra}"


def area_chunks(area: str, files: int = 6, per_file: int = 8) -> list[Chunk]:
    chunks: list[Chunk] = []
    for f in range(files):
        for p in range(per_file):
            n = f * per_file + p
            text = passage(area, n)
            chunks.append(Chunk(chunk_id(text), text, area, f"{area}/file-{f}.md", f"Part {p}"))
    return chunks


def corpus(areas: Sequence[str] = ("alpha", "beta")) -> list[Chunk]:
    return [c for area in areas for c in area_chunks(area)]


def renamed(chunks: Sequence[Chunk], old: str, new: str) -> list[Chunk]:
    return [
        Chunk(c.id, c.content, new, c.source.replace(old, new, 1), c.heading)
        if c.area == old else c
        for c in chunks
    ]
