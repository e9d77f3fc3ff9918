"""A two-area corpus small enough to build in a second, shared by the tests that run the
whole pipeline on a newcomer's own corpus (cli/test_newcomer_preflight.py) and on a
build that must then be found current (steps/test_up_to_date.py)."""

from __future__ import annotations

from pathlib import Path

PARAGRAPHS = {
    "networks": [
        "# Networking basics",
        "A virtual private cloud is an isolated network where your servers live.",
        "Security groups are stateful firewalls attached to each network interface.",
    ],
    "databases": [
        "# Databases",
        "An index lets the database find rows without scanning the whole table.",
        "Transactions group several writes so that either all or none of them happen.",
    ],
}


def write_tiny_corpus(corpus: Path) -> Path:
    """One `notes.md` per area under `corpus`; returns `corpus`."""
    for area, paragraphs in PARAGRAPHS.items():
        (corpus / area).mkdir(parents=True)
        (corpus / area / "notes.md").write_text("\n\n".join(paragraphs), encoding="utf-8")
    return corpus
