"""Small helpers shared by the asset modules: metadata shaping and build-dir paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg

from brain_pipeline.corpus.store import STORE_FILENAME
from brain_pipeline.publishing.manifest import sha256_hex
from brain_pipeline.retrieval.vectors import EMBEDDINGS_FILENAME


def store_path(build_dir: Path) -> Path:
    return build_dir / STORE_FILENAME


def embeddings_path(build_dir: Path) -> Path:
    return build_dir / EMBEDDINGS_FILENAME


def file_sha256(path: Path) -> str | None:
    """sha256 of a file's bytes, or None when it does not exist."""
    try:
        return sha256_hex(path.read_bytes())
    except FileNotFoundError:
        return None


def to_metadata(values: dict[str, Any]) -> dict[str, Any]:
    """Coerce plain values into Dagster metadata; numbers stay numeric so the UI plots them."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, bool):
            out[key] = dg.MetadataValue.bool(value)
        elif isinstance(value, int):
            out[key] = dg.MetadataValue.int(value)
        elif isinstance(value, float):
            out[key] = dg.MetadataValue.float(value)
        elif isinstance(value, dict | list):
            out[key] = dg.MetadataValue.json(value)
        elif value is None:
            out[key] = dg.MetadataValue.text("—")
        else:
            out[key] = dg.MetadataValue.text(str(value))
    return out


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    """A small markdown table for the UI's metadata panel."""

    def cell(value: Any) -> str:
        text = str(value).replace("|", "\\|").replace("\n", " ")
        return text if len(text) <= 120 else text[:117] + "..."

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
