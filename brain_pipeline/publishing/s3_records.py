"""What an uploaded manifest vouches for: its `objects` section, read strictly.

The bucket's manifest.json is input we did not necessarily write (anyone with write
access to the prefix can replace it), so every reader of its `objects` section (the
publish, the clean-up, `status --s3`) goes through `remote_objects`, which either
returns well-typed entries or raises `ValueError` with one line naming the bad field:
never a `TypeError` from indexing a string, and never a control character to print.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
"""Characters that must never reach a terminal from a file we did not write (a name or
key is printed by `status --s3`)."""


@dataclass(frozen=True)
class RemoteEntry:
    """One object the manifest names: where it is, its hex SHA-256 and its size."""

    key: str
    sha256: str
    size: int


def remote_objects(raw: bytes | str) -> dict[str, RemoteEntry]:
    """The `objects` section of an uploaded manifest ({} for an older one without it).

    Raises ValueError (one line) when the document is not JSON, not an object, or an
    entry is not `{"key": str, "sha256": 64 hex, "size": int >= 0}`.
    """
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(data, Mapping):
        raise ValueError("not a JSON object")
    section = data.get("objects")
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise ValueError("objects is not an object")
    return {str(name): _entry(str(name), value) for name, value in section.items()}


def _entry(raw_name: str, value: Any) -> RemoteEntry:
    name = json.dumps(raw_name[:60])  # quoted and escaped: the name is not ours
    if not isinstance(value, Mapping):
        raise ValueError(f"objects.{name} is not an object")
    if _CONTROL.search(raw_name):
        raise ValueError(f"objects.{name} has control characters in its name")
    key, sha256, size = value.get("key"), value.get("sha256"), value.get("size")
    if not isinstance(key, str) or not key or _CONTROL.search(key):
        raise ValueError(f"objects.{name}.key is not a key (text without control characters)")
    if not isinstance(sha256, str) or not _SHA256.match(sha256):
        raise ValueError(f"objects.{name}.sha256 is not a hex SHA-256")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ValueError(f"objects.{name}.size is not a byte count")
    return RemoteEntry(key, sha256, size)
