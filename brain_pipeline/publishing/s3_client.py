"""The S3 client and one destination's object operations: timeouts, errors, verified PUTs.

Each object is uploaded with `ChecksumAlgorithm="SHA256"`: the SDK sends the digest
of the body, a real S3 rejects a body that does not match it, and the answer echoes
the checksum it stored, which we compare with our own (falling back to ETag = MD5 for
servers that echo no checksum; our uploads are single-part). Before uploading we ask
for the object's checksum (HEAD with checksum mode) and skip the PUT when it already
matches, so an unchanged re-publish only reads.

Every failure becomes a `PublishError` naming the bucket, the endpoint and the cause,
never a credential. Connect and read timeouts and a total deadline come from the
configuration (`publish.s3.connect_timeout_seconds`, `read_timeout_seconds`,
`deadline_seconds`): an endpoint that accepts connections and never answers fails
within the deadline, not after the SDK's default minutes.

`S3Protection` carries the optional server-side encryption asked for every object we
write (`ServerSideEncryption`, `SSEKMSKeyId`) and the `ExpectedBucketOwner` added to
every request the destination's clients send (an event hook, so no call can forget it).
Content-addressed objects carry the metadata mark `written-by: brain-pipeline`: the
clean-up deletes nothing without it.
"""

from __future__ import annotations

import base64
import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from brain_pipeline.publishing.source import ArtifactSource, SourceChanged
from brain_pipeline.utils.digest import md5_hex as md5_of
from brain_pipeline.utils.digest import sha256_hex, sha256_parts

JSON_CONTENT_TYPE = "application/json"
BINARY_CONTENT_TYPE = "application/octet-stream"

MAX_ATTEMPTS = 2  # in all, one retry: enough for a blip, quick when the endpoint is down
OBJECTS_DIRNAME = "objects"
MARK = {"written-by": "brain-pipeline"}
"""User metadata on every content-addressed object we upload: what lets the clean-up
tell our objects from anyone else's under the same prefix."""
_OWNER_HOOK = "brain-pipeline-expected-bucket-owner"


@dataclass(frozen=True)
class S3Protection:
    """Server-side encryption for what we write, and the account that must own the bucket.

    Defaults: nothing asked (the bucket's default encryption applies) and no owner check.
    `expected_bucket_owner` is sent on every request (and as the copy source's owner), so
    a bucket name taken over by another account is refused by S3 before any byte moves.
    """

    server_side_encryption: str | None = None
    kms_key_id: str | None = None
    expected_bucket_owner: str | None = None

    @classmethod
    def from_settings(cls, settings: Any) -> S3Protection:
        """From `config.S3Settings`."""
        return cls(
            server_side_encryption=settings.server_side_encryption,
            kms_key_id=settings.kms_key_id,
            expected_bucket_owner=settings.expected_bucket_owner,
        )

    def write_args(self) -> dict[str, str]:
        """The encryption parameters of a PutObject or CopyObject."""
        args: dict[str, str] = {}
        if self.server_side_encryption:
            args["ServerSideEncryption"] = self.server_side_encryption
        if self.kms_key_id:
            args["SSEKMSKeyId"] = self.kms_key_id
        return args

    def bind(self, client: Any) -> Any:
        """Make every request of `client` carry the expected owner (idempotent)."""
        owner = self.expected_bucket_owner
        if owner:

            def add_owner(params: dict[str, Any], model: Any, **_: Any) -> None:
                members = model.input_shape.members if model.input_shape else {}
                for name in ("ExpectedBucketOwner", "ExpectedSourceBucketOwner"):
                    if name in members:
                        params.setdefault(name, owner)

            client.meta.events.register(
                "before-parameter-build.s3", add_owner, unique_id=_OWNER_HOOK
            )
        return client

    def encrypted_as_asked(self, head: dict[str, Any]) -> bool:
        """Whether an existing object is encrypted the way we would write it now (the
        algorithm only: S3 reports a KMS key by ARN whatever name it was given)."""
        wanted = self.server_side_encryption
        return wanted is None or head.get("ServerSideEncryption") == wanted


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


class Deadline:
    """The total time budget of one publication (clock injectable for tests)."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._end = clock() + seconds

    def remaining(self) -> float:
        return self._end - self._clock()

    def renewed(self) -> Deadline:
        """The same budget again from now, on the same clock (the undo of a failed
        publication gets one, so a deadline that ran out does not also stop the undo)."""
        return Deadline(self.seconds, self._clock)


Content = ArtifactSource | bytes
"""What an object is uploaded from: a file (the store, its vectors; streamed from disk,
never held whole) or bytes made in memory (the manifest, a few KB)."""


def content_size(content: Content) -> int:
    return content.size if isinstance(content, ArtifactSource) else len(content)


def content_sha256(content: Content) -> str:
    return content.sha256 if isinstance(content, ArtifactSource) else sha256_hex(content)


def b64_sha256(content: Content) -> str:
    if isinstance(content, ArtifactSource):
        return content.b64_sha256
    return base64.b64encode(bytes.fromhex(sha256_hex(content))).decode("ascii")


def md5_hex(content: Content) -> str:
    if isinstance(content, ArtifactSource):
        return content.md5_hex()
    return md5_of([content])


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


class S3Destination:
    """The bucket/endpoint pair a publication talks to, and its error translation."""

    def __init__(
        self,
        client: Any,
        bucket: str,
        prefix: str,
        *,
        timeouts: S3Timeouts | None = None,
        factory: Callable[[S3Timeouts], Any] | None = None,
        deadline: Deadline | None = None,
        protection: S3Protection | None = None,
    ) -> None:
        self.protection = protection or S3Protection()
        self._client = self.protection.bind(client)
        self.bucket = bucket
        self.prefix = prefix
        self.endpoint_url: str | None = getattr(client.meta, "endpoint_url", None)
        self.timeouts = timeouts or S3Timeouts()
        self._factory = factory
        self.deadline = deadline or Deadline(self.timeouts.deadline)

    @classmethod
    def connect(
        cls,
        bucket: str,
        prefix: str,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        timeouts: S3Timeouts | None = None,
        protection: S3Protection | None = None,
        client: Any = None,
    ) -> S3Destination:
        """A destination with a client of its own (made again with shorter timeouts near
        the deadline), or with `client` used as it is (its own timeouts; the deadline is
        then only checked between requests)."""
        timeouts = timeouts or S3Timeouts()
        if client is not None:
            return cls(client, bucket, prefix, timeouts=timeouts, protection=protection)

        def factory(t: S3Timeouts) -> Any:
            return make_s3_client(region, endpoint_url, t)

        made = factory(timeouts)
        return cls(made, bucket, prefix, timeouts=timeouts, factory=factory, protection=protection)

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
        return self.protection.bind(self._factory(shrunk))

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
            status = http_status(exc)
            explanation = _EXPLANATIONS.get(code, str(error.get("Message") or "error"))
            if code == "AccessDenied" and self.protection.expected_bucket_owner:
                explanation += (
                    ", or the bucket is not owned by publish.s3.expected_bucket_owner "
                    f"{self.protection.expected_bucket_owner}"
                )
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
        head = self._unless_absent(
            f"checking {key}",
            lambda: self.client.head_object(Bucket=self.bucket, Key=key, ChecksumMode="ENABLED"),
        )
        return None if head is None else dict(head)

    def read_small(self, key: str) -> bytes | None:
        """GET a small object (the manifest); None when absent or not readable by us."""
        return self._unless_absent(
            f"reading {key}",
            lambda: bytes(self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()),
        )

    def _unless_absent(self, what: str, request: Callable[[], Any]) -> Any:
        """`request()`, or None when S3 answers 403 or 404 (absent, or not ours to read)."""
        from botocore.exceptions import ClientError

        with self.errors(what):
            try:
                return request()
            except ClientError as exc:
                if http_status(exc) in (403, 404):
                    return None
                raise
        return None  # pragma: no cover - errors() always raises or the body returns

    def put_verified(
        self, key: str, data: Content, content_type: str, *, mark: bool = False
    ) -> str:
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
                    ContentLength=content_size(data),
                    ContentType=content_type,
                    ChecksumAlgorithm="SHA256",
                    **({"Metadata": dict(MARK)} if mark else {}),
                    **self.protection.write_args(),
                )
        how = _verification(response, data)
        if how is None:
            raise self.fail(
                f"verifying {key}",
                "the stored object's checksum differs from the bytes sent "
                f"(local sha256 {b64_sha256(data)}, server {_server_digest(response)})",
            )
        return how

    def ensure(
        self,
        key: str,
        data: Content,
        content_type: str,
        *,
        source: str | None = None,
        mark: bool = False,
    ) -> S3ObjectOutcome:
        """Make `key` hold `data`: left alone when it already does (`already_there`, as
        encrypted as now asked, with our mark when `mark`), else uploaded, or copied
        server-side from `source` (a content-addressed key holding `data`); verified."""
        digest, size = content_sha256(data), content_size(data)
        head = self.probe(key)
        how = already_there(head, data, content_type, protection=self.protection, marked=mark)
        if how is not None:
            return S3ObjectOutcome(key, "unchanged", size, digest, how)
        if source is None:
            how = self.put_verified(key, data, content_type, mark=mark)
            return S3ObjectOutcome(key, "uploaded", size, digest, how)
        how = self.copy_verified(source, key, data, content_type)
        return S3ObjectOutcome(key, "copied", size, digest, how)

    def copy_verified(self, source: str, key: str, data: Content, content_type: str) -> str:
        """Server-side copy of `source` (which holds `data`) to `key`, then a HEAD with
        checksum mode: the copy counts only when the server's SHA-256 of `key` is ours."""
        self.copy(source, key, content_type)
        how = already_there(self.probe(key), data, content_type)
        if how is None:
            raise self.fail(f"verifying {key}", "the copied object differs from the bytes sent")
        return how

    def copy(self, source: str, key: str, content_type: str) -> None:
        """Server-side copy of `source` to `key` (unverified: callers check the result)."""
        with self.errors(f"copying {source} to {key}"):
            self.client.copy_object(
                Bucket=self.bucket,
                Key=key,
                CopySource={"Bucket": self.bucket, "Key": source},
                ContentType=content_type,
                MetadataDirective="REPLACE",
                ChecksumAlgorithm="SHA256",
                **self.protection.write_args(),
            )

    def delete(self, key: str, what: str) -> None:
        with self.errors(f"{what} {key}"):
            self.client.delete_object(Bucket=self.bucket, Key=key)

    def sha256_of(self, key: str) -> str | None:
        """Hex SHA-256 of an object as stored: the checksum the server keeps when there is
        one, else the body read through once (streamed); None when absent."""
        head = self.probe(key)
        if head is None:
            return None
        stored = stored_sha256(head)
        if stored is not None:
            return stored
        with self.errors(f"reading {key}"):
            body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
            return sha256_parts(body.iter_chunks(1 << 20))


def http_status(exc: Any) -> int | None:
    """The HTTP status of a botocore `ClientError`."""
    return exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")


def stored_sha256(head: dict[str, Any]) -> str | None:
    """The hex SHA-256 a HEAD (checksum mode) reports for a whole single-part object;
    None when it reports none (or a composite multipart checksum, `...-N`)."""
    checksum = str(head.get("ChecksumSHA256") or "")
    if not checksum or "-" in checksum:
        return None
    try:
        raw = base64.b64decode(checksum, validate=True)
    except ValueError:
        return None
    return raw.hex() if len(raw) == 32 else None


def _verification(response: dict[str, Any], data: Content) -> str | None:
    """'ChecksumSHA256' or 'ETag' when the server's digest equals ours; None on mismatch."""
    checksum = response.get("ChecksumSHA256")
    if checksum:
        return "ChecksumSHA256" if checksum == b64_sha256(data) else None
    etag = str(response.get("ETag", "")).strip('"')
    if etag and "-" not in etag:
        return "ETag" if etag == md5_hex(data) else None
    return None


def _server_digest(response: dict[str, Any]) -> str:
    return str(response.get("ChecksumSHA256") or response.get("ETag") or "none")


def already_there(
    head: dict[str, Any] | None,
    data: Content,
    content_type: str,
    *,
    protection: S3Protection | None = None,
    marked: bool = False,
) -> str | None:
    """How an existing object was shown to equal `data` (None: it must be uploaded).

    With `protection`, an object not encrypted as now asked is written again (turning
    encryption on takes effect at the next publish); with `marked`, one without our mark.
    """
    if head is None or head.get("ContentLength") != content_size(data):
        return None
    if head.get("ContentType") not in (None, content_type):
        return None
    if protection is not None and not protection.encrypted_as_asked(head):
        return None
    if marked and (head.get("Metadata") or {}).get("written-by") != MARK["written-by"]:
        return None
    return _verification(head, data)

