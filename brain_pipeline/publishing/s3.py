"""Publish the store to S3 (or an S3-compatible endpoint): a whole set, or the old one.

A set, not just objects. The data objects go to content-addressed keys,
`<prefix>objects/<sha256>/<filename>`, which are never overwritten with other bytes and
carry our mark. Then the fixed names are written (see "the fixed names" below): the plain
`<prefix>embeddings.bin` and `knowledge-store.json`, by verified server-side copies, for
readers that use fixed keys, and `<prefix>manifest.json` last, naming the keys it covers
with their sha256 and size (its `objects` section). Any failure there puts every fixed
name back to the previous set and fails in one line saying so. A connection cut before
the manifest leaves the previous manifest, and every object it names, untouched: a
reader that follows the manifest always gets a complete set. Finally our own
content-addressed objects named by neither the new nor the previous manifest are
deleted (see "clean-up" below; refused under an empty prefix). manifest.json is
rewritten only when its content changes (its timestamp and run id alone do not count),
like the local copy. `inspect_s3` reads the bucket back for `brain-pipeline status --s3`.

The client, its timeouts, encryption and owner check, and the verified object
operations live in `publishing.s3_client`; this module is the protocol over them.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from brain_pipeline.corpus.store import STORE_FILENAME
from brain_pipeline.publishing.manifest import (
    EMBEDDINGS_FILENAME,
    MANIFEST_FILENAME,
    PublishManifest,
    build_manifest,
)
from brain_pipeline.publishing.s3_client import (
    BINARY_CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    MARK,
    OBJECTS_DIRNAME,
    Content,
    PublishError,
    S3Destination,
    S3ObjectOutcome,
    S3Protection,
    S3Timeouts,
    already_there,
    content_key,
    http_status,
    normalize_prefix,
)
from brain_pipeline.publishing.source import ArtifactSource

__all__ = ["PublishError", "S3PublishReport", "S3Timeouts", "content_key", "publish_s3"]


@dataclass(frozen=True)
class S3PublishReport:
    """The outcome of `publish_s3`. `status` is published, unchanged or skipped."""

    status: Literal["published", "unchanged", "skipped"]
    bucket: str | None
    prefix: str
    endpoint_url: str | None
    objects: tuple[S3ObjectOutcome, ...] = ()
    reason: str | None = None
    manifest: PublishManifest | None = field(default=None, compare=False)
    notes: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return self.status == "published"

    def to_metadata(self) -> dict[str, Any]:
        """Plain JSON-able summary (for Dagster metadata)."""
        return {
            "status": self.status,
            "reason": self.reason,
            "bucket": self.bucket,
            "prefix": self.prefix,
            "endpoint_url": self.endpoint_url,
            "notes": list(self.notes),
            "objects": {
                o.key: {
                    "action": o.action,
                    "bytes": o.size,
                    "sha256": o.sha256,
                    "verified_by": o.verified_by,
                }
                for o in self.objects
            },
        }

    def summary(self) -> str:
        if self.status == "skipped":
            return f"S3: skipped: {self.reason}"
        lines = [f"s3://{self.bucket}/{self.prefix}: {self.status}"]
        for o in self.objects:
            detail = f" {o.size} bytes sha256 {o.sha256}" if o.sha256 else ""
            lines.append(f"  {o.key}: {o.action}{detail}")
        lines += [f"  {note}" for note in self.notes]
        return "\n".join(lines)


def publish_s3(
    store: ArtifactSource,
    embeddings: ArtifactSource | None,
    *,
    bucket: str | None,
    prefix: str = "",
    region: str | None = None,
    endpoint_url: str | None = None,
    include_embeddings: bool = False,
    manifest: PublishManifest | None = None,
    timeouts: S3Timeouts | None = None,
    client: Any = None,
    retain: Iterable[str] = (),
    protection: S3Protection | None = None,
) -> S3PublishReport:
    """Upload the set (store, + embeddings.bin when asked) and then manifest.json.

    No bucket configured: nothing happens and the report says `skipped: no bucket`.
    `manifest` should be the one published locally (built with `build_manifest`);
    without it a minimal one is built from the files. When embeddings are not part of
    this upload, the uploaded manifest says so. The files are uploaded from disk, never
    read whole into memory.

    Vectors from another model than the agent's are withheld by the manifest: the one
    `publish_local` made says so (`embeddings_refusal`), and a `manifest` that publishes
    no vectors uploads none. When `include_embeddings` is on but no vectors go out this
    time, an embeddings.bin left by an earlier upload is deleted (it no longer matches
    the store), which needs s3:DeleteObject; so is one left from when vectors were
    uploaded, when `include_embeddings` is now off. Our old content-addressed objects are
    deleted after the manifest when s3:ListBucket allows listing them (else they are
    kept) and the prefix is not empty.

    `timeouts` (default `S3Timeouts()`) bound every request and the whole call; pass
    `S3Timeouts.from_settings(cfg.publish.s3)`. A `client` given explicitly is used
    as it is (its own timeouts; the deadline is then only checked between requests).
    `retain`: content-addressed keys the garbage collection keeps besides the new and
    the previous manifest's (the generations a rollback can still reach).
    `protection`: server-side encryption and the expected bucket owner (default: none).
    """
    key_prefix = normalize_prefix(prefix)
    if not bucket:
        return S3PublishReport("skipped", None, key_prefix, endpoint_url, reason="no bucket")
    refusal = _vectors_refusal(embeddings, include_embeddings, manifest)
    send_vectors = refusal is None
    if manifest is None:
        manifest = build_manifest(store, embeddings if send_vectors else None)
    if refusal is not None:
        manifest = manifest.without_embeddings(refusal)

    dest = S3Destination.connect(
        bucket,
        key_prefix,
        region=region,
        endpoint_url=endpoint_url,
        timeouts=timeouts,
        protection=protection,
        client=client,
    )

    files: list[tuple[str, ArtifactSource, str]] = []
    if send_vectors and embeddings is not None:
        files.append((EMBEDDINGS_FILENAME, embeddings, BINARY_CONTENT_TYPE))
    files.append((STORE_FILENAME, store, JSON_CONTENT_TYPE))

    # 1. the set, under keys that name its bytes (nothing the live manifest names moves)
    objects: list[S3ObjectOutcome] = []
    covered: dict[str, dict[str, Any]] = {}
    manifest_key = key_prefix + MANIFEST_FILENAME
    with _says(UNTOUCHED):
        for filename, source, content_type in files:
            key = content_key(key_prefix, filename, source.sha256)
            objects.append(dest.ensure(key, source, content_type, mark=True))
            covered[filename] = {"key": key, "sha256": source.sha256, "size": source.size}
        previous_raw = dest.read_small(manifest_key)

    # 2. the fixed names, manifest last: the new set whole, or the previous one put back
    live = manifest.or_earlier([_parsed(previous_raw)])
    manifest_bytes = live.to_json(objects=covered)  # the local one plus the keys
    vectors = next((f for f in files if f[0] == EMBEDDINGS_FILENAME), None)
    names = [
        FixedName(EMBEDDINGS_FILENAME, vectors[1], BINARY_CONTENT_TYPE, covered[vectors[0]]["key"])
        if vectors is not None
        else FixedName(EMBEDDINGS_FILENAME, None, BINARY_CONTENT_TYPE),
        FixedName(STORE_FILENAME, store, JSON_CONTENT_TYPE, covered[STORE_FILENAME]["key"]),
        FixedName(MANIFEST_FILENAME, manifest_bytes, JSON_CONTENT_TYPE),
    ]
    objects += write_fixed_names(dest, names, PreviousSet.read(previous_raw, key_prefix))

    # 3. our content-addressed objects neither manifest names any more (housekeeping: it
    #    does not make an otherwise unchanged publication "published")
    changed = any(o.action != "unchanged" for o in objects)
    notes: tuple[str, ...] = ()
    no_sweep = sweep_refusal(key_prefix)
    if no_sweep is None:
        keep = {e["key"] for e in covered.values()} | named_keys(previous_raw) | set(retain)
        with _says(SWEEP_ONLY):
            objects += collect_garbage(dest, keep)
    else:
        notes = (no_sweep,)

    return S3PublishReport(
        status="published" if changed else "unchanged",
        bucket=bucket,
        prefix=key_prefix,
        endpoint_url=dest.endpoint_url,
        objects=tuple(objects),
        manifest=live,
        notes=notes,
    )


SWEEP_ONLY = (
    "the new set is live and whole (fixed names and manifest.json); only the clean-up of "
    "old objects failed"
)


@contextlib.contextmanager
def _says(state: str) -> Iterator[None]:
    """Make a PublishError raised inside also say what readers see now (one line)."""
    try:
        yield
    except PublishError as exc:
        raise PublishError(f"{exc}; {state}") from None


def _vectors_refusal(
    embeddings: ArtifactSource | None, include_embeddings: bool, manifest: PublishManifest | None
) -> str | None:
    """Why no embeddings.bin goes to S3 this time, or None when it does. The bucket
    carries the given manifest, so it never holds vectors that manifest disowns (the
    local publication withheld another model's vectors)."""
    if not include_embeddings:
        return "embeddings are not uploaded to S3 (include_embeddings is off)"
    if embeddings is None:
        return "no embeddings were built"
    if manifest is not None and manifest.embeddings is None:
        return manifest.embeddings_note or "the manifest publishes no vectors"
    return None


def _parsed(raw: bytes | None) -> PublishManifest | None:
    """The bucket's manifest, None when absent or unreadable (it is then replaced)."""
    with contextlib.suppress(ValueError, UnicodeDecodeError):
        return None if raw is None else PublishManifest.from_json(raw)
    return None


# -- what an uploaded manifest vouches for: its `objects` section, read strictly ------
# The bucket's manifest.json is input we did not necessarily write (anyone with write
# access to the prefix can replace it), so every reader of its `objects` section (the
# publish, the clean-up, `status --s3`) goes through `remote_objects`, which either
# returns well-typed entries or raises `ValueError` with one line naming the bad field:
# never a `TypeError` from indexing a string, and never a control character to print.

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


def _named(raw: bytes | None) -> dict[str, RemoteEntry]:
    """What an uploaded manifest names; nothing for an absent, unreadable or old one
    (the publish and the clean-up then rely on nothing it says)."""
    if raw is None:
        return {}
    try:
        return remote_objects(raw)
    except ValueError:
        return {}


# -- the fixed names -------------------------------------------------------------------
# `<prefix>embeddings.bin`, `knowledge-store.json` and `manifest.json`:
# changed as one set, each verified, or put back to the previous set.
#
# S3 cannot change several objects at once, so a reader of the fixed names is protected by
# order and by undo, not by a transaction:
#
# - every object of the new set is already stored under its content-addressed key, so
#   the fixed names are written by server-side copies from there (`embeddings.bin` first,
#   or removed when the set has no vectors; then the store), and `manifest.json` last;
# - each write is verified (HEAD with checksum mode: the server's SHA-256 must be ours);
# - on any failure, every fixed name this publication touched is put back to what the
#   previous manifest names (copied back from its content-addressed key, which the
#   clean-up keeps; removed when the previous set had no such object), each verified, and
#   the publish fails with one line saying the previous set is whole again, or, when the
#   undo fails too, naming each fixed name left TORN.
#
# What a reader of the fixed names can observe: before the first copy and after a failed,
# undone publish, the previous set; after success, the new one. During the window between
# the first copy and the manifest (server-side copies, usually well under a second) a
# reader that fetches the names one after the other can get the new vectors with the
# previous store; `embeddings.bin` carries its chunk ids, and a reader that must never mix
# follows `manifest.json` to the content-addressed keys, which never change under it.

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
        ours = {
            name: entry
            for name, entry in _named(raw).items()
            if entry.key == content_key(prefix, name, entry.sha256)
        }
        return cls(raw, ours)


def write_fixed_names(
    dest: S3Destination, names: Sequence[FixedName], previous: PreviousSet
) -> list[S3ObjectOutcome]:
    """Write `names` in order (see "the fixed names" above); undo all on any failure."""
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


# -- clean-up of old content-addressed objects: only ours, only under our own prefix --
# After a new manifest is live, an object is deleted only when all of these hold:
#
# - the prefix is not empty (a bucket-wide sweep is refused: `sweep_refusal`);
# - its key has exactly our layout, `<prefix>objects/<64 hex>/knowledge-store.json` or
#   `.../embeddings.bin` (`objects/other-team/invoice.pdf` never matches);
# - it carries the mark our uploads set (`x-amz-meta-written-by: brain-pipeline`);
# - neither the new manifest, the one it replaced (kept one generation for readers that
#   fetched it a moment ago), nor the caller's `keep` (the generations a rollback can
#   reach) names it.
#
# Housekeeping only: a listing denied by policy leaves the old objects in place and is not
# an error.


def named_keys(raw: bytes | None) -> set[str]:
    """The object keys an uploaded manifest names (none for an unreadable or old one)."""
    return {entry.key for entry in _named(raw).values()}


def sweep_refusal(prefix: str) -> str | None:
    """Why the clean-up will not run under `prefix` (None: it may)."""
    if prefix:
        return None
    return (
        "clean-up refused: publish.s3.prefix is empty, so old objects were kept (a sweep "
        "of the whole bucket could reach other people's objects; set a prefix such as "
        "knowledge-store/)"
    )


def ours_by_layout(prefix: str) -> re.Pattern[str]:
    """Keys shaped exactly like the content-addressed objects we write under `prefix`."""
    names = "|".join(re.escape(n) for n in (STORE_FILENAME, EMBEDDINGS_FILENAME))
    return re.compile(rf"{re.escape(prefix)}{OBJECTS_DIRNAME}/[0-9a-f]{{64}}/(?:{names})")


def collect_garbage(dest: S3Destination, keep: set[str]) -> list[S3ObjectOutcome]:
    """Delete our own unkept content-addressed objects (see "clean-up" above).

    Raises ValueError on an empty prefix: callers ask `sweep_refusal` first.
    """
    from botocore.exceptions import ClientError

    if sweep_refusal(dest.prefix) is not None:
        raise ValueError("collect_garbage refuses an empty prefix")
    layout = ours_by_layout(dest.prefix)
    candidates: list[str] = []
    with dest.errors("listing old objects"):
        try:
            pages = dest.client.get_paginator("list_objects_v2").paginate(
                Bucket=dest.bucket, Prefix=f"{dest.prefix}{OBJECTS_DIRNAME}/"
            )
            for page in pages:
                for listed in page.get("Contents", ()):
                    key = str(listed["Key"])
                    if key not in keep and layout.fullmatch(key):
                        candidates.append(key)
        except ClientError as exc:
            if http_status(exc) == 403:
                return []  # no s3:ListBucket: old objects stay, nothing is wrong
            raise
    removed: list[S3ObjectOutcome] = []
    for key in candidates:
        head = dest.probe(key)
        if head is None or (head.get("Metadata") or {}).get("written-by") != MARK["written-by"]:
            continue  # not written by us (or gone): never ours to delete
        dest.delete(key, "removing old")
        removed.append(S3ObjectOutcome(key, "removed", None, None, ""))
    return removed


# -- reading the bucket back (`status --s3`): does it hold the local set? -------------
# Every comparison is by SHA-256, never by size alone (same-size tampering must show):
# the checksum S3 stores with each object we upload (HEAD with checksum mode), or, for an
# object stored without one, its body hashed as it streams by. The fixed names a reader
# may use instead of the manifest are checked too. The bucket's manifest is input we did
# not necessarily write: a malformed one is one problem line, never a traceback.


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
