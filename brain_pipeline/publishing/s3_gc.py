"""Garbage collection of content-addressed S3 objects no manifest needs any more.

After a new manifest is live, `<prefix>objects/...` keys named by neither it, the
manifest it replaced (kept one generation for readers that fetched the old manifest a
moment ago), nor any key the caller asks to keep are deleted. Housekeeping only: a
listing denied by policy leaves the old objects in place and is not an error.
"""

from __future__ import annotations

import json

from brain_pipeline.publishing.s3_client import OBJECTS_DIRNAME, S3Destination, S3ObjectOutcome


def named_keys(raw: bytes | None) -> set[str]:
    """The object keys an uploaded manifest names (none for an unreadable or old one)."""
    if raw is None:
        return set()
    try:
        entries = json.loads(raw).get("objects") or {}
        return {str(entry["key"]) for entry in entries.values()}
    except (ValueError, AttributeError, KeyError, TypeError):
        return set()



def remove_object(dest: S3Destination, key: str) -> S3ObjectOutcome | None:
    if dest.probe(key) is None:
        return None
    with dest.errors(f"removing stale {key}"):
        dest.client.delete_object(Bucket=dest.bucket, Key=key)
    return S3ObjectOutcome(key, "removed", None, None, "")


def collect_garbage(dest: S3Destination, keep: set[str]) -> list[S3ObjectOutcome]:
    """Delete `<prefix>objects/...` keys not in `keep`; skipped when listing is denied."""
    from botocore.exceptions import ClientError

    removed: list[S3ObjectOutcome] = []
    stale: list[str] = []
    with dest.errors("listing old objects"):
        try:
            pages = dest.client.get_paginator("list_objects_v2").paginate(
                Bucket=dest.bucket, Prefix=f"{dest.prefix}{OBJECTS_DIRNAME}/"
            )
            for page in pages:
                stale += [str(o["Key"]) for o in page.get("Contents", ()) if o["Key"] not in keep]
        except ClientError as exc:
            if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 403:
                return removed  # no s3:ListBucket: old objects stay, nothing is wrong
            raise
    for key in stale:
        with dest.errors(f"removing old {key}"):
            dest.client.delete_object(Bucket=dest.bucket, Key=key)
        removed.append(S3ObjectOutcome(key, "removed", None, None, ""))
    return removed

