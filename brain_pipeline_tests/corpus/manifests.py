"""`discover`: a corpus's manifest with every file hashed, nothing chunked.

The tests' view of discovery on its own (walk, screen, hash), made of the same public
steps the observation and the ingest run; the product itself always observes or ingests.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from brain_pipeline.corpus.discovery import (
    ManifestEntry,
    file_entry,
    screen_file,
    walk_corpus,
)
from brain_pipeline.corpus.junk import DEFAULT_LIMITS, IngestLimits
from brain_pipeline.utils.digest import sha256_hex


@dataclass
class Manifest:
    """What `discover` found: every entry, skipped ones included, and the areas."""

    root: Path
    areas: list[str]
    entries: list[ManifestEntry]


def discover(root: Path | str, limits: IngestLimits = DEFAULT_LIMITS) -> Manifest:
    """Walk the corpus and hash every text/roadmap file; junk is skipped with its reason,
    exactly as the ingest skips it."""
    walk = walk_corpus(root)
    entries: list[ManifestEntry] = []
    for item in walk:
        if isinstance(item, ManifestEntry):
            entries.append(item)
            continue
        data = screen_file(item, limits)
        if isinstance(data, ManifestEntry):
            entries.append(data)
        else:
            entries.append(file_entry(item, sha256_hex(data)))
    return Manifest(Path(root), walk.areas, entries)
