"""Reading the bucket back (for `brain-pipeline status --s3`): does it hold the local set?"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from brain_pipeline.publishing.manifest import MANIFEST_FILENAME, PublishManifest
from brain_pipeline.publishing.s3_client import (
    PublishError,
    S3Destination,
    S3Timeouts,
    make_s3_client,
    normalize_prefix,
)


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
) -> S3Check:
    """Compare the bucket's manifest (and the objects it names) with `expected`. Reads only.

    The bucket matches when its manifest names the same store (and, with
    `include_embeddings`, the same vectors) as the local manifest, and every object it
    names is there with the recorded size.
    """
    key_prefix = normalize_prefix(prefix)
    timeouts = timeouts or S3Timeouts()

    def factory(t: S3Timeouts) -> Any:
        return make_s3_client(region, endpoint_url, t)

    dest = S3Destination(factory(timeouts), bucket, key_prefix, timeouts=timeouts, factory=factory)
    location = dest.describe()
    try:
        raw = dest.read_small(key_prefix + MANIFEST_FILENAME)
        if raw is None:
            return S3Check(location, True, (f"no {MANIFEST_FILENAME} in the bucket",))
        try:
            remote = PublishManifest.from_json(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            return S3Check(
                location, True, (f"the bucket's {MANIFEST_FILENAME} is unreadable: {exc}",)
            )
        problems: list[str] = []
        if remote.store.sha256 != expected.store.sha256:
            problems.append("the bucket's store differs from the local publication's")
        wanted = expected.embeddings if include_embeddings else None
        if wanted is not None and (
            remote.embeddings is None or remote.embeddings.sha256 != wanted.sha256
        ):
            problems.append("the bucket's embeddings differ from the local publication's")
        entries = json.loads(raw).get("objects") or {}
        if not entries:
            problems.append(f"the bucket's {MANIFEST_FILENAME} names no objects (older format)")
        for filename, entry in sorted(entries.items()):
            head = dest.probe(str(entry["key"]))
            if head is None or head.get("ContentLength") != int(entry["size"]):
                problems.append(f"{filename} ({entry['key']}) named by the manifest is missing")
        return S3Check(location, True, tuple(problems))
    except PublishError as exc:
        return S3Check(location, False, (str(exc),))
