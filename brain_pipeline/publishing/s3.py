"""Publish the store to S3 (or an S3-compatible endpoint): a whole set, or the old one.

A set, not just objects. The data objects go to content-addressed keys,
`<prefix>objects/<sha256>/<filename>`, which are never overwritten with other bytes and
carry our mark. Then the fixed names are written (`publishing.s3_fixed`): the plain
`<prefix>embeddings.bin` and `knowledge-store.json`, by verified server-side copies, for
readers that use fixed keys, and `<prefix>manifest.json` last, naming the keys it covers
with their sha256 and size (its `objects` section). Any failure there puts every fixed
name back to the previous set and fails in one line saying so. A connection cut before
the manifest leaves the previous manifest, and every object it names, untouched: a
reader that follows the manifest always gets a complete set. Finally our own
content-addressed objects named by neither the new nor the previous manifest are
deleted (`publishing.s3_gc`; refused under an empty prefix). manifest.json is rewritten
only when its content changes (its timestamp and run id alone do not count), like the
local copy.

The client, its timeouts, encryption and owner check, and the verified object
operations live in `publishing.s3_client`; reading the bucket back in
`publishing.s3_inspect`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from brain_pipeline.corpus.store import STORE_FILENAME
from brain_pipeline.publishing.local import embeddings_refusal
from brain_pipeline.publishing.manifest import (
    EMBEDDINGS_FILENAME,
    MANIFEST_FILENAME,
    PublishManifest,
    build_manifest,
)
from brain_pipeline.publishing.s3_client import (
    BINARY_CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    PublishError,
    S3Destination,
    S3ObjectOutcome,
    S3Protection,
    S3Timeouts,
    content_key,
    normalize_prefix,
)
from brain_pipeline.publishing.s3_fixed import (
    UNTOUCHED,
    FixedName,
    PreviousSet,
    write_fixed_names,
)
from brain_pipeline.publishing.s3_gc import collect_garbage, named_keys, sweep_refusal
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
    agent_query_model: str | None = None,
    timeouts: S3Timeouts | None = None,
    client: Any = None,
    retain: Iterable[str] = (),
    protection: S3Protection | None = None,
) -> S3PublishReport:
    """Upload the set (store, + embeddings.bin when asked) and then manifest.json.

    No bucket configured: nothing happens and the report says `skipped: no bucket`.
    `manifest` should be the one published locally (built with `build_manifest`);
    without it a minimal one is built from the files. When embeddings are not part of
    this upload, the uploaded manifest says so. The files are uploaded from disk,
    never read whole into memory.

    With `agent_query_model` set, embeddings from another model are withheld as in
    `publish_local`; and when `include_embeddings` is on but no vectors go out this
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
    refusal = _vectors_refusal(embeddings, include_embeddings, agent_query_model)
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
    live = _live_manifest(previous_raw, manifest)
    manifest_bytes = remote_manifest_bytes(live, covered)
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


def remote_manifest_bytes(manifest: PublishManifest, covered: dict[str, dict[str, Any]]) -> bytes:
    """The manifest as uploaded: the local one plus `objects`, the keys it vouches for."""
    data = manifest.to_dict()
    data["objects"] = covered
    text = json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False)
    return (text + "\n").encode("utf-8")



def _vectors_refusal(
    embeddings: ArtifactSource | None, include_embeddings: bool, agent_query_model: str | None
) -> str | None:
    """Why no embeddings.bin goes to S3 this time, or None when it does."""
    if not include_embeddings:
        return "embeddings are not uploaded to S3 (include_embeddings is off)"
    if agent_query_model is not None:
        return embeddings_refusal(embeddings, agent_query_model)
    if embeddings is None:
        return "no embeddings were built"
    return None



def _live_manifest(existing: bytes | None, new: PublishManifest) -> PublishManifest:
    """Keep the remote manifest when only its time/run id would change."""
    if existing is not None:
        with contextlib.suppress(ValueError, UnicodeDecodeError):
            old = PublishManifest.from_json(existing)
            if old.same_content(new):
                return old
    return new
