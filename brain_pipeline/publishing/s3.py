"""Publish the store to S3 (or an S3-compatible endpoint) with verified, idempotent uploads.

Each object is uploaded with `ChecksumAlgorithm="SHA256"`: the SDK sends the digest
of the body, a real S3 rejects a body that does not match it, and the answer echoes
the checksum it stored, which we compare with our own (falling back to ETag = MD5 for
servers that echo no checksum; our uploads are single-part). Before uploading we ask
for the object's checksum (HEAD with checksum mode) and skip the PUT when it already
matches, so an unchanged re-publish only reads.

A set, not just objects. The data objects go to content-addressed keys,
`<prefix>objects/<sha256>/<filename>`, which are never overwritten with other bytes;
then `<prefix>manifest.json` is written last and names the keys it covers with their
sha256 and size (its `objects` section). A connection cut anywhere before the manifest
leaves the previous manifest, and every object it names, untouched: a reader that
follows the manifest always gets a complete set. After the manifest, the plain names
`<prefix>knowledge-store.json` (and `embeddings.bin`) are refreshed by a server-side
copy for readers that use fixed keys (each object atomic, the set only via the
manifest), and content-addressed objects named by neither the new nor the previous
manifest are deleted (one generation is kept for readers that fetched the old
manifest a moment ago). manifest.json is rewritten only when its content changes
(its timestamp and run id alone do not count), like the local copy.

Every failure becomes a `PublishError` naming the bucket, the endpoint and the cause,
never a credential. Connect and read timeouts and a total deadline come from the
configuration (`publish.s3.connect_timeout_seconds`, `read_timeout_seconds`,
`deadline_seconds`): an endpoint that accepts connections and never answers fails
within the deadline, not after the SDK's default minutes.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from brain_pipeline.corpus.store import STORE_FILENAME
from brain_pipeline.publishing.local import embeddings_refusal
from brain_pipeline.publishing.manifest import (
    EMBEDDINGS_FILENAME,
    MANIFEST_FILENAME,
    PublishManifest,
    build_manifest,
    sha256_hex,
)
from brain_pipeline.publishing.source import ArtifactSource, SourceChanged

JSON_CONTENT_TYPE = "application/json"
BINARY_CONTENT_TYPE = "application/octet-stream"

MAX_ATTEMPTS = 2  # in all, one retry: enough for a blip, quick when the endpoint is down
OBJECTS_DIRNAME = "objects"


@dataclass(frozen=True)
class S3Timeouts:
    """Seconds to connect, to wait for each answer, and for the whole publication.

    Defaults match `S3Settings` in config.py. The deadline is enforced between requests
    and by shrinking the read timeout of the requests made near its end, so a silent
    endpoint costs at most about `deadline` seconds (plus one connect timeout).
    """

    connect: float = 5.0
    read: float = 20.0
    deadline: float = 60.0

    @classmethod
    def from_settings(cls, settings: Any) -> S3Timeouts:
        """From `config.S3Settings` (or anything with the three `*_seconds` fields)."""
        return cls(
            connect=float(settings.connect_timeout_seconds),
            read=float(settings.read_timeout_seconds),
            deadline=float(settings.deadline_seconds),
        )


def content_key(prefix: str, filename: str, sha256: str) -> str:
    """Where the bytes with this digest live: never overwritten with other bytes."""
    return f"{prefix}{OBJECTS_DIRNAME}/{sha256}/{filename}"


_EXPLANATIONS = {
    "NoSuchBucket": "the bucket does not exist",
    "InvalidAccessKeyId": "the access key id is not known to the endpoint",
    "SignatureDoesNotMatch": "the secret access key does not match the access key id",
    "AccessDenied": "access denied: the credentials lack permission (s3:PutObject, "
    "s3:GetObject on the prefix)",
    "AllAccessDisabled": "access to the bucket is disabled",
    "ExpiredToken": "the session token has expired",
    "InvalidToken": "the session token is invalid",
    "PermanentRedirect": "the bucket lives in another region",
    "AuthorizationHeaderMalformed": "the region does not match the bucket's region",
    "BadDigest": "the server received different bytes than were sent",
    "XAmzContentSHA256Mismatch": "the server received different bytes than were sent",
}


class PublishError(RuntimeError):
    """Publishing failed; the message names the destination and the cause (no secrets)."""


S3Action = Literal["uploaded", "unchanged", "removed", "copied"]


@dataclass(frozen=True)
class S3ObjectOutcome:
    """One object: what happened, its size and hex SHA-256, and how it was verified
    (size/sha256 None and verified_by "" for a removal)."""

    key: str
    action: S3Action
    size: int | None
    sha256: str | None
    verified_by: str


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
        return "\n".join(lines)


def normalize_prefix(prefix: str | None) -> str:
    """'' stays ''; 'brain' and '/brain/' become 'brain/' (keys are prefix + filename)."""
    cleaned = (prefix or "").lstrip("/")
    if cleaned and not cleaned.endswith("/"):
        cleaned += "/"
    return cleaned


def make_s3_client(
    region: str | None = None,
    endpoint_url: str | None = None,
    timeouts: S3Timeouts | None = None,
) -> Any:
    """An S3 client with the configured timeouts and bounded retries.

    With `endpoint_url` None, boto3 itself honours AWS_ENDPOINT_URL_S3 /
    AWS_ENDPOINT_URL, so tests and S3-compatible stores need no code path of their own.
    """
    import boto3
    from botocore.config import Config

    timeouts = timeouts or S3Timeouts()
    config = Config(
        connect_timeout=timeouts.connect,
        read_timeout=timeouts.read,
        retries={"total_max_attempts": MAX_ATTEMPTS, "mode": "standard"},
    )
    session = boto3.session.Session()
    return session.client(
        "s3", region_name=region or None, endpoint_url=endpoint_url or None, config=config
    )


class _Deadline:
    """The total time budget of one publication (clock injectable for tests)."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._end = clock() + seconds

    def remaining(self) -> float:
        return self._end - self._clock()


Content = ArtifactSource | bytes
"""What an object is uploaded from: a file (the store, its vectors; streamed from disk,
never held whole) or bytes made in memory (the manifest, a few KB)."""


def _size(content: Content) -> int:
    return content.size if isinstance(content, ArtifactSource) else len(content)


def _sha256(content: Content) -> str:
    return content.sha256 if isinstance(content, ArtifactSource) else sha256_hex(content)


def _b64_sha256(content: Content) -> str:
    if isinstance(content, ArtifactSource):
        return content.b64_sha256
    return base64.b64encode(hashlib.sha256(content).digest()).decode("ascii")


def _md5_hex(content: Content) -> str:
    if isinstance(content, ArtifactSource):
        return content.md5_hex()
    return hashlib.md5(content, usedforsecurity=False).hexdigest()


def _known_secrets(client: Any) -> list[str]:
    """Credential values to scrub from any message, however it was built."""
    values = [os.environ.get("AWS_SECRET_ACCESS_KEY"), os.environ.get("AWS_SESSION_TOKEN")]
    with contextlib.suppress(Exception):
        creds = client._get_credentials()
        if creds is not None:
            frozen = creds.get_frozen_credentials()
            values += [frozen.secret_key, frozen.token]
    return [v for v in values if v and len(v) >= 4]


def _redact(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


class _Destination:
    """The bucket/endpoint pair a publication talks to, and its error translation."""

    def __init__(
        self,
        client: Any,
        bucket: str,
        prefix: str,
        *,
        timeouts: S3Timeouts | None = None,
        factory: Callable[[S3Timeouts], Any] | None = None,
        deadline: _Deadline | None = None,
    ) -> None:
        self._client = client
        self.bucket = bucket
        self.prefix = prefix
        self.endpoint_url: str | None = getattr(client.meta, "endpoint_url", None)
        self.timeouts = timeouts or S3Timeouts()
        self._factory = factory
        self.deadline = deadline or _Deadline(self.timeouts.deadline)

    @property
    def client(self) -> Any:
        """The client for the next request; near the deadline, one whose timeouts fit it.

        botocore has no total deadline, so each request's read timeout is shrunk so that
        all its attempts end before the deadline does.
        """
        remaining = self.deadline.remaining()
        budget = remaining / MAX_ATTEMPTS
        if self._factory is None or budget >= self.timeouts.read:
            return self._client
        shrunk = S3Timeouts(
            connect=max(0.5, min(self.timeouts.connect, budget)),
            read=max(0.5, budget),
            deadline=self.timeouts.deadline,
        )
        return self._factory(shrunk)

    def check_deadline(self, what: str) -> None:
        if self.deadline.remaining() <= 0:
            raise self.fail(
                what,
                f"gave up: the publication took longer than its {self.deadline.seconds:g} s "
                "deadline (publish.s3.deadline_seconds)",
            )

    def describe(self) -> str:
        return f"s3://{self.bucket}/{self.prefix} (endpoint {self.endpoint_url or 'default'})"

    def fail(self, what: str, cause: str) -> PublishError:
        message = f"S3 publish to {self.describe()} failed while {what}: {cause}"
        return PublishError(_redact(message, _known_secrets(self._client)))

    @contextlib.contextmanager
    def errors(self, what: str) -> Iterator[None]:
        """Translate SDK exceptions into PublishError (raised from None: the SDK's
        exception stays out of logs that might print its request)."""
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectionClosedError,
            ConnectTimeoutError,
            EndpointConnectionError,
            NoCredentialsError,
            PartialCredentialsError,
            ReadTimeoutError,
        )

        self.check_deadline(what)
        try:
            yield
        except (NoCredentialsError, PartialCredentialsError) as exc:
            raise self.fail(what, f"no usable AWS credentials ({type(exc).__name__})") from None
        except (EndpointConnectionError, ConnectTimeoutError) as exc:
            cause = f"cannot connect to the endpoint ({type(exc).__name__})"
            raise self.fail(what, cause) from None
        except ReadTimeoutError:
            self.check_deadline(what)
            cause = (
                f"the endpoint accepted the connection but did not answer within "
                f"{self.timeouts.read:g} s (read timeout, {MAX_ATTEMPTS} attempts)"
            )
            raise self.fail(what, cause) from None
        except ConnectionClosedError:
            cause = "the connection was cut before the endpoint answered (ConnectionClosedError)"
            raise self.fail(what, cause) from None
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code", "unknown"))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            explanation = _EXPLANATIONS.get(code, str(error.get("Message") or "error"))
            raise self.fail(what, f"{code} (HTTP {status}): {explanation}") from None
        except BotoCoreError as exc:
            raise self.fail(what, f"{type(exc).__name__}: {exc}") from None

    # -- object operations ---------------------------------------------------------------

    def probe(self, key: str) -> dict[str, Any] | None:
        """HEAD the object with its checksum; None when absent or not readable by us.

        A 403/404 here is not fatal: HEAD answers carry no error body, so a missing
        bucket, a missing key and a put-only policy look alike. The PUT that follows
        reports the real cause.
        """
        from botocore.exceptions import ClientError

        with self.errors(f"checking {key}"):
            try:
                return dict(
                    self.client.head_object(Bucket=self.bucket, Key=key, ChecksumMode="ENABLED")
                )
            except ClientError as exc:
                status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                if status in (403, 404):
                    return None
                raise
        return None  # pragma: no cover - errors() always raises or the body returns

    def read_small(self, key: str) -> bytes | None:
        """GET a small object (the manifest); None when absent or not readable by us."""
        from botocore.exceptions import ClientError

        with self.errors(f"reading {key}"):
            try:
                response = self.client.get_object(Bucket=self.bucket, Key=key)
                return bytes(response["Body"].read())
            except ClientError as exc:
                status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                if status in (403, 404):
                    return None
                raise
        return None  # pragma: no cover

    def put_verified(self, key: str, data: Content, content_type: str) -> str:
        """Upload and confirm the server holds exactly `data`; return how it was checked.

        A file is uploaded from its open handle with its length: the SDK streams it
        (and reads it once more to compute the SHA256 checksum it sends, as it does for
        bytes), so the upload's memory does not grow with the file. The checksum the
        server echoes is of the bytes the SDK actually read, and is compared with the
        file's known digest, so a file rewritten since it was named fails here.
        """
        with contextlib.ExitStack() as stack:
            if isinstance(data, ArtifactSource):
                try:
                    body: Any = stack.enter_context(data.open())
                except (OSError, SourceChanged) as exc:
                    raise self.fail(f"uploading {key}", f"cannot read {data.path}: {exc}") from None
            else:
                body = data
            with self.errors(f"uploading {key}"):
                response = self.client.put_object(
                    Bucket=self.bucket,
                    Key=key,
                    Body=body,
                    ContentLength=_size(data),
                    ContentType=content_type,
                    ChecksumAlgorithm="SHA256",
                )
        how = _verification(response, data)
        if how is None:
            raise self.fail(
                f"verifying {key}",
                "the stored object's checksum differs from the bytes sent "
                f"(local sha256 {_b64_sha256(data)}, server {_server_digest(response)})",
            )
        return how


def _verification(response: dict[str, Any], data: Content) -> str | None:
    """'ChecksumSHA256' or 'ETag' when the server's digest equals ours; None on mismatch."""
    checksum = response.get("ChecksumSHA256")
    if checksum:
        return "ChecksumSHA256" if checksum == _b64_sha256(data) else None
    etag = str(response.get("ETag", "")).strip('"')
    if etag and "-" not in etag:
        return "ETag" if etag == _md5_hex(data) else None
    return None


def _server_digest(response: dict[str, Any]) -> str:
    return str(response.get("ChecksumSHA256") or response.get("ETag") or "none")


def _already_there(head: dict[str, Any] | None, data: Content, content_type: str) -> str | None:
    """How an existing object was shown to equal `data` (None: it must be uploaded)."""
    if head is None or head.get("ContentLength") != _size(data):
        return None
    if head.get("ContentType") not in (None, content_type):
        return None
    return _verification(head, data)


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
    the store), which needs s3:DeleteObject. Old content-addressed objects are deleted
    after the manifest when s3:ListBucket allows listing them (else they are kept).

    `timeouts` (default `S3Timeouts()`) bound every request and the whole call; pass
    `S3Timeouts.from_settings(cfg.publish.s3)`. A `client` given explicitly is used
    as it is (its own timeouts; the deadline is then only checked between requests).
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

    timeouts = timeouts or S3Timeouts()
    factory: Callable[[S3Timeouts], Any] | None = None
    if client is None:

        def factory(t: S3Timeouts) -> Any:
            return make_s3_client(region, endpoint_url, t)

        client = factory(timeouts)
    dest = _Destination(client, bucket, key_prefix, timeouts=timeouts, factory=factory)

    files: list[tuple[str, ArtifactSource, str]] = []
    if send_vectors and embeddings is not None:
        files.append((EMBEDDINGS_FILENAME, embeddings, BINARY_CONTENT_TYPE))
    files.append((STORE_FILENAME, store, JSON_CONTENT_TYPE))

    # 1. the set, under keys that name its bytes (nothing the live manifest names moves)
    objects: list[S3ObjectOutcome] = []
    covered: dict[str, dict[str, Any]] = {}
    for filename, source, content_type in files:
        key = content_key(key_prefix, filename, source.sha256)
        objects.append(_publish_object(dest, key, source, content_type))
        covered[filename] = {"key": key, "sha256": source.sha256, "size": source.size}

    # 2. the manifest, last: from here on the new set is the bucket's set
    manifest_key = key_prefix + MANIFEST_FILENAME
    previous_raw = dest.read_small(manifest_key)
    live = _live_manifest(previous_raw, manifest)
    manifest_bytes = remote_manifest_bytes(live, covered)
    objects.append(_publish_object(dest, manifest_key, manifest_bytes, JSON_CONTENT_TYPE))

    # 3. fixed names for readers that do not follow the manifest
    for filename, source, content_type in files:
        stored = covered[filename]["key"]
        objects.append(_copy_object(dest, stored, key_prefix + filename, source, content_type))
    if include_embeddings and not send_vectors:
        removed = _remove_object(dest, key_prefix + EMBEDDINGS_FILENAME)
        if removed is not None:
            objects.append(removed)

    # 4. content-addressed objects neither manifest names any more (housekeeping: it
    #    does not make an otherwise unchanged publication "published")
    changed = any(o.action != "unchanged" for o in objects)
    keep = {entry["key"] for entry in covered.values()} | _named_keys(previous_raw)
    objects += _collect_garbage(dest, keep)

    return S3PublishReport(
        status="published" if changed else "unchanged",
        bucket=bucket,
        prefix=key_prefix,
        endpoint_url=dest.endpoint_url,
        objects=tuple(objects),
        manifest=live,
    )


def remote_manifest_bytes(manifest: PublishManifest, covered: dict[str, dict[str, Any]]) -> bytes:
    """The manifest as uploaded: the local one plus `objects`, the keys it vouches for."""
    data = manifest.to_dict()
    data["objects"] = covered
    text = json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False)
    return (text + "\n").encode("utf-8")


def _named_keys(raw: bytes | None) -> set[str]:
    """The object keys an uploaded manifest names (none for an unreadable or old one)."""
    if raw is None:
        return set()
    try:
        entries = json.loads(raw).get("objects") or {}
        return {str(entry["key"]) for entry in entries.values()}
    except (ValueError, AttributeError, KeyError, TypeError):
        return set()


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


def _remove_object(dest: _Destination, key: str) -> S3ObjectOutcome | None:
    if dest.probe(key) is None:
        return None
    with dest.errors(f"removing stale {key}"):
        dest.client.delete_object(Bucket=dest.bucket, Key=key)
    return S3ObjectOutcome(key, "removed", None, None, "")


def _collect_garbage(dest: _Destination, keep: set[str]) -> list[S3ObjectOutcome]:
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


def _live_manifest(existing: bytes | None, new: PublishManifest) -> PublishManifest:
    """Keep the remote manifest when only its time/run id would change."""
    if existing is not None:
        with contextlib.suppress(ValueError, UnicodeDecodeError):
            old = PublishManifest.from_json(existing)
            if old.same_content(new):
                return old
    return new


def _publish_object(
    dest: _Destination, key: str, data: Content, content_type: str
) -> S3ObjectOutcome:
    digest, size = _sha256(data), _size(data)
    how = _already_there(dest.probe(key), data, content_type)
    if how is not None:
        return S3ObjectOutcome(key, "unchanged", size, digest, how)
    how = dest.put_verified(key, data, content_type)
    return S3ObjectOutcome(key, "uploaded", size, digest, how)


def _copy_object(
    dest: _Destination, source: str, key: str, data: Content, content_type: str
) -> S3ObjectOutcome:
    """Server-side copy of `source` to `key` (no second upload), verified by a HEAD."""
    digest, size = _sha256(data), _size(data)
    how = _already_there(dest.probe(key), data, content_type)
    if how is not None:
        return S3ObjectOutcome(key, "unchanged", size, digest, how)
    with dest.errors(f"copying {source} to {key}"):
        dest.client.copy_object(
            Bucket=dest.bucket,
            Key=key,
            CopySource={"Bucket": dest.bucket, "Key": source},
            ContentType=content_type,
            MetadataDirective="REPLACE",
            ChecksumAlgorithm="SHA256",
        )
    how = _already_there(dest.probe(key), data, content_type)
    if how is None:
        raise dest.fail(f"verifying {key}", "the copied object differs from the bytes sent")
    return S3ObjectOutcome(key, "copied", size, digest, how)


# -- reading the bucket back (for `brain-pipeline status --s3`) ---------------------------


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

    dest = _Destination(factory(timeouts), bucket, key_prefix, timeouts=timeouts, factory=factory)
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
