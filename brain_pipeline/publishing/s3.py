"""Publish the store to S3 (or an S3-compatible endpoint) with verified, idempotent uploads.

Each object is uploaded with `ChecksumAlgorithm="SHA256"`: the SDK sends the digest
of the body, a real S3 rejects a body that does not match it, and the answer echoes
the checksum it stored, which we compare with our own (falling back to ETag = MD5 for
servers that echo no checksum; our uploads are single-part). Before uploading we ask
for the object's checksum (HEAD with checksum mode) and skip the PUT when it already
matches, so an unchanged re-publish only reads.

Order: embeddings.bin, knowledge-store.json, then manifest.json, so the manifest never
describes objects that are not there yet. manifest.json is rewritten only when its
content changes (its timestamp and run id alone do not count), like the local copy.

Every failure becomes a `PublishError` naming the bucket, the endpoint and the cause,
never a credential. Connect timeouts are short and retries bounded, so an endpoint
that is down fails within seconds rather than after the SDK's default back-off.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
from collections.abc import Iterator
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

JSON_CONTENT_TYPE = "application/json"
BINARY_CONTENT_TYPE = "application/octet-stream"

CONNECT_TIMEOUT_S = 3
READ_TIMEOUT_S = 60
MAX_ATTEMPTS = 2  # one retry: enough for a transient blip, quick when the endpoint is down

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


S3Action = Literal["uploaded", "unchanged", "removed"]


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


def make_s3_client(region: str | None = None, endpoint_url: str | None = None) -> Any:
    """An S3 client with short connect timeouts and bounded retries.

    With `endpoint_url` None, boto3 itself honours AWS_ENDPOINT_URL_S3 /
    AWS_ENDPOINT_URL, so tests and S3-compatible stores need no code path of their own.
    """
    import boto3
    from botocore.config import Config

    config = Config(
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=READ_TIMEOUT_S,
        retries={"max_attempts": MAX_ATTEMPTS, "mode": "standard"},
    )
    session = boto3.session.Session()
    return session.client(
        "s3", region_name=region or None, endpoint_url=endpoint_url or None, config=config
    )


def _b64_sha256(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode("ascii")


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

    def __init__(self, client: Any, bucket: str, prefix: str) -> None:
        self.client = client
        self.bucket = bucket
        self.prefix = prefix
        self.endpoint_url: str | None = getattr(client.meta, "endpoint_url", None)

    def describe(self) -> str:
        return f"s3://{self.bucket}/{self.prefix} (endpoint {self.endpoint_url or 'default'})"

    def fail(self, what: str, cause: str) -> PublishError:
        message = f"S3 publish to {self.describe()} failed while {what}: {cause}"
        return PublishError(_redact(message, _known_secrets(self.client)))

    @contextlib.contextmanager
    def errors(self, what: str) -> Iterator[None]:
        """Translate SDK exceptions into PublishError (raised from None: the SDK's
        exception stays out of logs that might print its request)."""
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectTimeoutError,
            EndpointConnectionError,
            NoCredentialsError,
            PartialCredentialsError,
            ReadTimeoutError,
        )

        try:
            yield
        except (NoCredentialsError, PartialCredentialsError) as exc:
            raise self.fail(what, f"no usable AWS credentials ({type(exc).__name__})") from None
        except (EndpointConnectionError, ConnectTimeoutError) as exc:
            cause = f"cannot connect to the endpoint ({type(exc).__name__})"
            raise self.fail(what, cause) from None
        except ReadTimeoutError:
            raise self.fail(what, "the endpoint stopped answering (read timeout)") from None
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

    def put_verified(self, key: str, data: bytes, content_type: str) -> str:
        """Upload and confirm the server holds exactly `data`; return how it was checked."""
        with self.errors(f"uploading {key}"):
            response = self.client.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=data,
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


def _verification(response: dict[str, Any], data: bytes) -> str | None:
    """'ChecksumSHA256' or 'ETag' when the server's digest equals ours; None on mismatch."""
    checksum = response.get("ChecksumSHA256")
    if checksum:
        return "ChecksumSHA256" if checksum == _b64_sha256(data) else None
    etag = str(response.get("ETag", "")).strip('"')
    if etag and "-" not in etag:
        return "ETag" if etag == hashlib.md5(data, usedforsecurity=False).hexdigest() else None
    return None


def _server_digest(response: dict[str, Any]) -> str:
    return str(response.get("ChecksumSHA256") or response.get("ETag") or "none")


def _already_there(head: dict[str, Any] | None, data: bytes, content_type: str) -> str | None:
    """How an existing object was shown to equal `data` (None: it must be uploaded)."""
    if head is None or head.get("ContentLength") != len(data):
        return None
    if head.get("ContentType") not in (None, content_type):
        return None
    return _verification(head, data)


def publish_s3(
    store_bytes: bytes,
    embeddings_bytes: bytes | None,
    *,
    bucket: str | None,
    prefix: str = "",
    region: str | None = None,
    endpoint_url: str | None = None,
    include_embeddings: bool = False,
    manifest: PublishManifest | None = None,
    agent_query_model: str | None = None,
    client: Any = None,
) -> S3PublishReport:
    """Upload knowledge-store.json (+ embeddings.bin when asked) and manifest.json.

    No bucket configured: nothing happens and the report says `skipped: no bucket`.
    `manifest` should be the one published locally (built with `build_manifest`);
    without it a minimal one is built from the bytes. When embeddings are not part of
    this upload, the uploaded manifest says so.

    With `agent_query_model` set, embeddings from another model are withheld as in
    `publish_local`; and when `include_embeddings` is on but no vectors go out this
    time, an embeddings.bin left by an earlier upload is deleted (it no longer matches
    the store), which needs s3:DeleteObject.
    """
    key_prefix = normalize_prefix(prefix)
    if not bucket:
        return S3PublishReport("skipped", None, key_prefix, endpoint_url, reason="no bucket")
    refusal = _vectors_refusal(embeddings_bytes, include_embeddings, agent_query_model)
    send_vectors = refusal is None
    if manifest is None:
        manifest = build_manifest(store_bytes, embeddings_bytes if send_vectors else None)
    if refusal is not None:
        manifest = manifest.without_embeddings(refusal)

    if client is None:
        client = make_s3_client(region, endpoint_url)
    dest = _Destination(client, bucket, key_prefix)

    objects: list[S3ObjectOutcome] = []
    files: list[tuple[str, bytes, str]] = []
    if send_vectors and embeddings_bytes is not None:
        files.append((EMBEDDINGS_FILENAME, embeddings_bytes, BINARY_CONTENT_TYPE))
    elif include_embeddings:
        removed = _remove_object(dest, key_prefix + EMBEDDINGS_FILENAME)
        if removed is not None:
            objects.append(removed)
    files.append((STORE_FILENAME, store_bytes, JSON_CONTENT_TYPE))
    for filename, data, content_type in files:
        objects.append(_publish_object(dest, key_prefix + filename, data, content_type))

    manifest_key = key_prefix + MANIFEST_FILENAME
    live = _live_manifest(dest.read_small(manifest_key), manifest)
    objects.append(_publish_object(dest, manifest_key, live.to_json(), JSON_CONTENT_TYPE))

    changed = any(o.action != "unchanged" for o in objects)
    return S3PublishReport(
        status="published" if changed else "unchanged",
        bucket=bucket,
        prefix=key_prefix,
        endpoint_url=dest.endpoint_url,
        objects=tuple(objects),
        manifest=live,
    )


def _vectors_refusal(
    embeddings_bytes: bytes | None, include_embeddings: bool, agent_query_model: str | None
) -> str | None:
    """Why no embeddings.bin goes to S3 this time, or None when it does."""
    if not include_embeddings:
        return "embeddings are not uploaded to S3 (include_embeddings is off)"
    if agent_query_model is not None:
        return embeddings_refusal(embeddings_bytes, agent_query_model)
    if embeddings_bytes is None:
        return "no embeddings were built"
    return None


def _remove_object(dest: _Destination, key: str) -> S3ObjectOutcome | None:
    if dest.probe(key) is None:
        return None
    with dest.errors(f"removing stale {key}"):
        dest.client.delete_object(Bucket=dest.bucket, Key=key)
    return S3ObjectOutcome(key, "removed", None, None, "")


def _live_manifest(existing: bytes | None, new: PublishManifest) -> PublishManifest:
    """Keep the remote manifest when only its time/run id would change."""
    if existing is not None:
        with contextlib.suppress(ValueError, UnicodeDecodeError):
            old = PublishManifest.from_json(existing)
            if old.same_content(new):
                return old
    return new


def _publish_object(
    dest: _Destination, key: str, data: bytes, content_type: str
) -> S3ObjectOutcome:
    digest = sha256_hex(data)
    how = _already_there(dest.probe(key), data, content_type)
    if how is not None:
        return S3ObjectOutcome(key, "unchanged", len(data), digest, how)
    how = dest.put_verified(key, data, content_type)
    return S3ObjectOutcome(key, "uploaded", len(data), digest, how)
