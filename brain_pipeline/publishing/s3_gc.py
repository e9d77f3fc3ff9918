"""Clean-up of old content-addressed S3 objects: only ours, only under our own prefix.

After a new manifest is live, an object is deleted only when all of these hold:

- the prefix is not empty (a bucket-wide sweep is refused: `sweep_refusal`);
- its key has exactly our layout, `<prefix>objects/<64 hex>/knowledge-store.json` or
  `.../embeddings.bin` (`objects/other-team/invoice.pdf` never matches);
- it carries the mark our uploads set (`x-amz-meta-written-by: brain-pipeline`);
- neither the new manifest, the one it replaced (kept one generation for readers that
  fetched it a moment ago), nor the caller's `keep` (the generations a rollback can
  reach) names it.

Housekeeping only: a listing denied by policy leaves the old objects in place and is not
an error.
"""

from __future__ import annotations

import re

from brain_pipeline.corpus.store import STORE_FILENAME
from brain_pipeline.publishing.manifest import EMBEDDINGS_FILENAME
from brain_pipeline.publishing.s3_client import (
    MARK,
    OBJECTS_DIRNAME,
    S3Destination,
    S3ObjectOutcome,
    http_status,
)
from brain_pipeline.publishing.s3_records import remote_objects


def named_keys(raw: bytes | None) -> set[str]:
    """The object keys an uploaded manifest names (none for an unreadable or old one)."""
    if raw is None:
        return set()
    try:
        return {entry.key for entry in remote_objects(raw).values()}
    except ValueError:
        return set()


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
    """Delete our own unkept content-addressed objects (see the module docstring).

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
