"""Reading the bucket back (for `brain-pipeline status --s3`): does it hold the local set?

Every comparison is by SHA-256, never by size alone (same-size tampering must show):
the checksum S3 stores with each object we upload (HEAD with checksum mode), or, for an
object stored without one, its body hashed as it streams by. The fixed names a reader
may use instead of the manifest are checked too. The bucket's manifest is input we did
not necessarily write: a malformed one is one problem line, never a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from brain_pipeline.corpus.store import STORE_FILENAME
from brain_pipeline.publishing.manifest import (
    EMBEDDINGS_FILENAME,
    MANIFEST_FILENAME,
    PublishManifest,
)
from brain_pipeline.publishing.s3_client import (
    PublishError,
    S3Destination,
    S3Protection,
    S3Timeouts,
    normalize_prefix,
)
from brain_pipeline.publishing.s3_records import RemoteEntry, remote_objects


@dataclass(frozen=True)
class S3Check:
    """Whether the bucket holds the set the local publication describes.

    `reachable` False: the bucket could not be read (`problems` says why).
    """

    location: str
    reachable: bool
    problems: tuple[str, ...] = ()

    @property
    def matches(self) -> bool:
        return self.reachable and not self.problems


def inspect_s3(
    expected: PublishManifest,
    *,
    bucket: str,
    prefix: str = "",
    region: str | None = None,
    endpoint_url: str | None = None,
    include_embeddings: bool = False,
    timeouts: S3Timeouts | None = None,
    protection: S3Protection | None = None,
    client: Any = None,
) -> S3Check:
    """Compare the bucket's manifest, the objects it names and the fixed names with
    `expected`. Reads only.

    The bucket matches when its manifest names the same store (and, with
    `include_embeddings`, the same vectors) as the local manifest; every object its
    `objects` section names is there with that SHA-256 and size; and the fixed names
    (`knowledge-store.json`, `embeddings.bin`) hold exactly those objects' bytes
    (`embeddings.bin` absent when the manifest names no vectors).
    """
    dest = S3Destination.connect(
        bucket,
        normalize_prefix(prefix),
        region=region,
        endpoint_url=endpoint_url,
        timeouts=timeouts,
        protection=protection,
        client=client,
    )
    location = dest.describe()
    try:
        return S3Check(location, True, tuple(_problems(dest, expected, include_embeddings)))
    except PublishError as exc:
        return S3Check(location, False, (str(exc),))


def _problems(
    dest: S3Destination, expected: PublishManifest, include_embeddings: bool
) -> list[str]:
    raw = dest.read_small(dest.prefix + MANIFEST_FILENAME)
    if raw is None:
        return [f"no {MANIFEST_FILENAME} in the bucket"]
    try:
        remote = PublishManifest.from_json(raw)
        entries = remote_objects(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return [f"the bucket's {MANIFEST_FILENAME} is unreadable: {exc}"]
    problems: list[str] = []
    if remote.store.sha256 != expected.store.sha256:
        problems.append("the bucket's store differs from the local publication's")
    wanted = expected.embeddings if include_embeddings else None
    if wanted is not None and (
        remote.embeddings is None or remote.embeddings.sha256 != wanted.sha256
    ):
        problems.append("the bucket's embeddings differ from the local publication's")
    if not entries:
        problems.append(f"the bucket's {MANIFEST_FILENAME} names no objects (older format)")
        return problems
    problems += _section_agrees(remote, entries)
    for filename, entry in sorted(entries.items()):
        problems += _object_problem(dest, f"{filename} ({entry.key}) named by the manifest", entry)
    for filename in (EMBEDDINGS_FILENAME, STORE_FILENAME):
        problems += _fixed_problem(dest, filename, entries.get(filename))
    return problems


def _section_agrees(remote: PublishManifest, entries: dict[str, RemoteEntry]) -> list[str]:
    """The `objects` section must vouch for the very store and vectors the manifest names."""
    declared = {STORE_FILENAME: remote.store.sha256}
    if remote.embeddings is not None:
        declared[EMBEDDINGS_FILENAME] = remote.embeddings.sha256
    problems = []
    for filename in sorted(set(declared) | set(entries)):
        entry = entries.get(filename)
        if entry is None or entry.sha256 != declared.get(filename):
            problems.append(
                f"the bucket's {MANIFEST_FILENAME} lists {filename} in objects and in its "
                "header with different digests (or in only one of them)"
            )
    return problems


def _object_problem(dest: S3Destination, what: str, entry: RemoteEntry) -> list[str]:
    digest = dest.sha256_of(entry.key)
    if digest is None:
        return [f"{what} is missing"]
    if digest != entry.sha256:
        return [f"{what} holds other bytes (sha256 {digest}, manifest says {entry.sha256})"]
    return []


def _fixed_problem(dest: S3Destination, filename: str, entry: RemoteEntry | None) -> list[str]:
    key = dest.prefix + filename
    digest = dest.sha256_of(key)
    if entry is None:
        if digest is None:
            return []
        return [
            f"the fixed name {key} is present but the manifest names no {filename}: a reader "
            "of the fixed names would pair it with another publication's store"
        ]
    if digest is None:
        return [f"the fixed name {key} is missing"]
    if digest != entry.sha256:
        return [
            f"the fixed name {key} holds other bytes than the manifest's {filename} (sha256 "
            f"{digest}, manifest says {entry.sha256}): readers of the fixed names get "
            "another set"
        ]
    return []
