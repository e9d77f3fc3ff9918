"""INTERIM stand-in (replaced by the retrieval-cache branch)."""
from __future__ import annotations

import json
from typing import Any

from brain_pipeline.publishing.atomic import atomic_write_bytes
from brain_pipeline.state.layout import StateLayout


def lookup(layout: StateLayout, key: str) -> dict[str, Any] | None:
    try:
        data = json.loads(layout.eval_record.read_bytes())
    except (FileNotFoundError, ValueError):
        return None
    return data if data.get("key") == key else None

def save(layout: StateLayout, key: str, record: dict[str, Any]) -> None:
    atomic_write_bytes(layout.eval_record, json.dumps({**record, "key": key}).encode())
