"""The fixed names, `<prefix>embeddings.bin`, `knowledge-store.json` and `manifest.json`:
changed as one set, each verified, or put back to the previous set.

S3 cannot change several objects at once, so a reader of the fixed names is protected by
order and by undo, not by a transaction:

- every object of the new set is already stored under its content-addressed key, so
  the fixed names are written by server-side copies from there (`embeddings.bin` first,
  or removed when the set has no vectors; then the store), and `manifest.json` last;
- each write is verified (HEAD with checksum mode: the server's SHA-256 must be ours);
- on any failure, every fixed name this publication touched is put back to what the
  previous manifest names (copied back from its content-addressed key, which the
  clean-up keeps; removed when the previous set had no such object), each verified, and
  the publish fails with one line saying the previous set is whole again, or, when the
  undo fails too, naming each fixed name left TORN.

What a reader of the fixed names can observe: before the first copy and after a failed,
undone publish, the previous set; after success, the new one. During the window between
the first copy and the manifest (server-side copies, usually well under a second) a
reader that fetches the names one after the other can get the new vectors with the
previous store; `embeddings.bin` carries its chunk ids, and a reader that must never mix
follows `manifest.json` to the content-addressed keys, which never change under it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from brain_pipeline.publishing.manifest import MANIFEST_FILENAME
from brain_pipeline.publishing.s3_client import (
    Content,
    PublishError,
    S3Destination,
    S3ObjectOutcome,
    already_there,
    content_key,
)
from brain_pipeline.publishing.s3_records import RemoteEntry, remote_objects

UNTOUCHED = (
    "no fixed name was changed: readers of the fixed names and of manifest.json see the "
    "previous publication, whole"
)
"""What a failure that changed nothing readers see adds to its line."""


@dataclass(frozen=True)
class FixedName:
    """What one fixed name must hold in the new set.

    `content` None: the name must be absent (no vectors this time). `source` is the
    content-addressed key to copy from; None: upload `content` (the manifest's bytes).
    """

    filename: str
    content: Content | None
    content_type: str
    source: str | None = None


@dataclass(frozen=True)
class PreviousSet:
    """The set the bucket's manifest named before this publication (what undo restores)."""

    manifest: bytes | None
    entries: dict[str, RemoteEntry]

    @classmethod
    def read(cls, raw: bytes | None, prefix: str) -> PreviousSet:
        """From the previous manifest's bytes. A manifest we cannot read names nothing,
        and only entries at our own content-addressed key for their digest count: the
        undo never copies from anywhere else in the bucket, whatever the manifest says."""
        entries: dict[str, RemoteEntry] = {}
        if raw is not None:
            try:
                entries = remote_objects(raw)
            except ValueError:
                entries = {}
        ours = {
            name: entry
            for name, entry in entries.items()
            if entry.key == content_key(prefix, name, entry.sha256)
        }
        return cls(raw, ours)


def write_fixed_names(
    dest: S3Destination, names: Sequence[FixedName], previous: PreviousSet
) -> list[S3ObjectOutcome]:
    """Write `names` in order (see the module docstring); undo all on any failure."""
    outcomes: list[S3ObjectOutcome] = []
    touched: list[FixedName] = []
    for name in names:
        touched.append(name)
        try:
            outcome = _write(dest, name)
        except PublishError as exc:
            raise _undone(dest, touched, previous, exc) from None
        if outcome is not None:
            outcomes.append(outcome)
    return outcomes


def _write(dest: S3Destination, name: FixedName) -> S3ObjectOutcome | None:
    key = dest.prefix + name.filename
    if name.content is not None:
        return dest.ensure(key, name.content, name.content_type, source=name.source)
    if dest.probe(key) is None:
        return None
    dest.delete(key, "removing stale")
    return S3ObjectOutcome(key, "removed", None, None, "")


def _undone(
    dest: S3Destination, touched: list[FixedName], previous: PreviousSet, cause: PublishError
) -> PublishError:
    """Put every touched name back to the previous set; the one-line error to raise."""
    dest.deadline = dest.deadline.renewed()  # the undo gets its own budget
    restored: list[str] = []
    torn: list[str] = []
    for name in reversed(touched):
        try:
            if _restore(dest, name, previous):
                restored.append(name.filename)
        except PublishError as exc:
            torn.append(f"{name.filename} ({_cause_of(exc)})")
    if torn:
        return PublishError(
            f"{cause}; putting the previous set back failed too, so the fixed names are "
            f"TORN: {', '.join(torn)} may hold this publication's bytes while the others "
            "hold the previous ones; do not read the fixed names until a publish succeeds "
            "(the content-addressed keys manifest.json names are whole)"
        )
    if not restored:
        return PublishError(f"{cause}; {UNTOUCHED}")
    return PublishError(
        f"{cause}; the fixed names were put back to the previous set ({', '.join(restored)}): "
        "readers of the fixed names and of manifest.json see the previous publication, whole"
    )


def _restore(dest: S3Destination, name: FixedName, previous: PreviousSet) -> bool:
    """Make `name` hold what the previous set had there; True when a request changed it."""
    key = dest.prefix + name.filename
    head = dest.probe(key)
    if name.filename == MANIFEST_FILENAME:  # its previous bytes, or nothing
        if previous.manifest is None:
            if head is None:
                return False
            dest.delete(key, "undoing")
            return True
        if already_there(head, previous.manifest, name.content_type) is not None:
            return False
        dest.put_verified(key, previous.manifest, name.content_type)
        return True
    entry = previous.entries.get(name.filename)
    if entry is None:
        if head is None:
            return False
        dest.delete(key, "undoing")
        return True
    if head is not None and dest.sha256_of(key) == entry.sha256:
        return False
    dest.copy(entry.key, key, name.content_type)
    if dest.sha256_of(key) != entry.sha256:
        raise dest.fail(f"verifying {key}", "the restored object differs from the previous set's")
    return True


def _cause_of(exc: PublishError) -> str:
    """The cause part of a PublishError line ("... failed while X: cause")."""
    text = str(exc)
    marker = " failed while "
    return text.split(marker, 1)[1] if marker in text else text
