"""Content-addressed blobs: the artifacts the ledger's rows name (stores, vectors, reports).

A blob is named by the sha256 of its bytes (`utils.digest`), so it is written once, never
changed, and any worker that knows the name can fetch and check it. Two backends, one
interface (`BlobStore`), chosen by `blob_store(url)`:

* a local folder (the default, `<build dir>/state/blobs`): `sha256/<2 hex>/<digest>`,
  written through `utils.atomic` (temporary file, fsync, rename): a reader sees the
  whole blob or none, whatever kills the writer;
* `s3://bucket/prefix` (several machines): `<prefix>/sha256/<digest>`, uploaded with
  `ChecksumAlgorithm=SHA256` (the SDK hashes the bytes it actually sends, the server
  checks them on arrival and echoes the sha256), the echo compared with the blob's name:
  other bytes are deleted at once and the put fails. A PUT is all or nothing. The
  endpoint and region follow `publish.s3.endpoint_url`/`region` and boto3's own
  environment (AWS_ENDPOINT_URL_S3, the credential chain).

Reading checks the digest too: a damaged blob is an error, never served.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, Protocol
from urllib.parse import urlsplit

from brain_pipeline.utils.atomic import atomic_write_bytes, atomic_writer
from brain_pipeline.utils.digest import file_sha256, new_sha256, sha256_hex

_DIGEST = re.compile(r"[0-9a-f]{64}")
_PIECE = 1 << 20
NAMESPACE = "sha256"


class BlobError(RuntimeError):
    """A blob could not be stored or read intact; one line naming the blob and the cause."""


class BlobNotFound(BlobError, LookupError):
    """No blob of that digest in the store."""


def check_digest(digest: str) -> str:
    if not _DIGEST.fullmatch(digest):
        raise ValueError(f"not a sha256 hex digest: {digest[:80]!r}")
    return digest


class BlobStore(Protocol):
    """What every backend does. Digests are lower-case sha256 hex."""

    def put_bytes(self, data: bytes) -> str: ...
    def put_file(self, path: Path | str) -> str: ...
    def get_bytes(self, digest: str) -> bytes: ...
    def get_file(self, digest: str, path: Path | str) -> None: ...
    def has(self, digest: str) -> bool: ...
    def delete(self, digest: str) -> None: ...
    def list(self) -> Iterator[str]: ...


def _copy_checked(pieces: Iterable[bytes], out: BinaryIO, digest: str, what: str) -> None:
    """Write `pieces` to `out`; raise (so the atomic writer drops it) unless they hash to
    `digest`."""
    hashed = new_sha256()
    for piece in pieces:
        hashed.update(piece)
        out.write(piece)
    if hashed.hexdigest() != digest:
        raise BlobError(f"{what}: the bytes read hash to {hashed.hexdigest()}, not {digest}")


def _pieces(handle: BinaryIO) -> Iterator[bytes]:
    while piece := handle.read(_PIECE):
        yield piece


class LocalBlobs:
    """Blobs in a local folder."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).expanduser().resolve()

    def __repr__(self) -> str:
        return f"LocalBlobs({str(self.root)!r})"

    def _path(self, digest: str) -> Path:
        return self.root / NAMESPACE / check_digest(digest)[:2] / digest

    def put_bytes(self, data: bytes) -> str:
        digest = sha256_hex(data)
        if not self.has(digest):
            atomic_write_bytes(self._path(digest), data)
        return digest

    def put_file(self, path: Path | str) -> str:
        """Stream the file in (hashed first, then copied and hashed again: a file that
        changes in between is refused, and nothing is stored)."""
        digest = file_sha256(path)
        if not self.has(digest):
            with open(path, "rb") as source, atomic_writer(self._path(digest)) as out:
                _copy_checked(_pieces(source), out, digest, f"storing {path}")
        return digest

    def get_bytes(self, digest: str) -> bytes:
        try:
            data = self._path(digest).read_bytes()
        except FileNotFoundError:
            raise BlobNotFound(f"no blob {digest} in {self.root}") from None
        if sha256_hex(data) != digest:
            raise BlobError(f"blob {digest} in {self.root} is damaged (its bytes changed)")
        return data

    def get_file(self, digest: str, path: Path | str) -> None:
        try:
            source = open(self._path(digest), "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            raise BlobNotFound(f"no blob {digest} in {self.root}") from None
        with source, atomic_writer(path) as out:
            _copy_checked(_pieces(source), out, digest, f"blob {digest} in {self.root}")

    def has(self, digest: str) -> bool:
        return self._path(digest).is_file()

    def delete(self, digest: str) -> None:
        self._path(digest).unlink(missing_ok=True)

    def link(self, path: Path | str, digest: str) -> bool:
        """Keep `path`, already verified to hold `digest` and only ever replaced by
        rename (a published file), by hard link: no second copy, no second read. False
        when the filesystem refuses (another device): `put_file` then."""
        if self.has(digest):
            return True
        target = self._path(digest)
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(f".{digest}.link")
        temp.unlink(missing_ok=True)
        try:
            os.link(path, temp)
            os.replace(temp, target)
        except OSError:
            temp.unlink(missing_ok=True)
            return False
        return True

    def list(self) -> Iterator[str]:
        """Every stored digest (a writer's temporary files are not blobs)."""
        for path in sorted((self.root / NAMESPACE).glob("??/*")):
            if _DIGEST.fullmatch(path.name):
                yield path.name


def _b64(digest: str) -> str:
    return base64.b64encode(bytes.fromhex(digest)).decode("ascii")


class S3Blobs:
    """Blobs under one bucket and prefix of an S3-compatible store."""

    def __init__(self, bucket: str, prefix: str, client: Any) -> None:
        self.bucket = bucket
        self.prefix = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
        self.client = client

    def __repr__(self) -> str:
        return f"S3Blobs('s3://{self.bucket}/{self.prefix}')"

    def _key(self, digest: str) -> str:
        return f"{self.prefix}{NAMESPACE}/{check_digest(digest)}"

    def _fail(self, what: str, exc: Exception) -> BlobError:
        from botocore.exceptions import ClientError

        if isinstance(exc, ClientError):
            error = exc.response.get("Error", {})
            cause = f"{error.get('Code', '?')}: {error.get('Message', '')}".strip(": ")
        else:
            cause = " ".join(str(exc).split())
        return BlobError(f"{what} (s3://{self.bucket}/{self.prefix}): {cause}")

    def _put(self, digest: str, body: Any, size: int, what: str) -> str:
        from botocore.exceptions import BotoCoreError, ClientError

        key = self._key(digest)
        try:
            answer = self.client.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=body,
                ContentLength=size,
                ChecksumAlgorithm="SHA256",
            )
        except (BotoCoreError, ClientError) as exc:
            raise self._fail(f"storing {what}", exc) from None
        if answer.get("ChecksumSHA256") != _b64(digest):
            # Other bytes than the ones hashed (the file changed meanwhile): never leave
            # them under this name (a reader would refuse them anyway, by their digest).
            self.client.delete_object(Bucket=self.bucket, Key=key)
            raise BlobError(
                f"storing {what}: the bytes sent do not hash to {digest} "
                "(changed while being stored?); nothing kept"
            )
        return digest

    def put_bytes(self, data: bytes) -> str:
        digest = sha256_hex(data)
        if self.has(digest):
            return digest
        return self._put(digest, data, len(data), f"{len(data)} bytes")

    def put_file(self, path: Path | str) -> str:
        """Streamed from the open file; bytes that are not the ones hashed (a file that
        changed meanwhile) are refused by the checksum echo."""
        digest = file_sha256(path)
        if self.has(digest):
            return digest
        with open(path, "rb") as body:
            return self._put(digest, body, Path(path).stat().st_size, str(path))

    def _body(self, digest: str) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._key(digest))["Body"]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise BlobNotFound(f"no blob {digest} in {self!r}") from None
            raise self._fail(f"reading blob {digest}", exc) from None
        except BotoCoreError as exc:
            raise self._fail(f"reading blob {digest}", exc) from None

    def get_bytes(self, digest: str) -> bytes:
        data: bytes = self._body(digest).read()
        if sha256_hex(data) != digest:
            raise BlobError(f"blob {digest} in {self!r} is damaged (its bytes changed)")
        return data

    def get_file(self, digest: str, path: Path | str) -> None:
        body = self._body(digest)
        with atomic_writer(path) as out:
            _copy_checked(body.iter_chunks(_PIECE), out, digest, f"blob {digest} in {self!r}")

    def has(self, digest: str) -> bool:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(digest))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise self._fail(f"looking for blob {digest}", exc) from None
        except BotoCoreError as exc:
            raise self._fail(f"looking for blob {digest}", exc) from None
        return True

    def delete(self, digest: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._key(digest))

    def list(self) -> Iterator[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=f"{self.prefix}{NAMESPACE}/"
        )
        for page in pages:
            for item in page.get("Contents") or []:
                name = str(item["Key"]).rsplit("/", 1)[-1]
                if _DIGEST.fullmatch(name):
                    yield name


def s3_client(region: str | None = None, endpoint_url: str | None = None) -> Any:
    """An S3 client with bounded timeouts and retries; None values leave boto3's own
    environment (AWS_ENDPOINT_URL_S3, AWS_REGION, the credential chain) to decide."""
    import boto3
    from botocore.config import Config

    config = Config(
        connect_timeout=5, read_timeout=60, retries={"total_max_attempts": 3, "mode": "standard"}
    )
    return boto3.session.Session().client(
        "s3", region_name=region or None, endpoint_url=endpoint_url or None, config=config
    )


def check_blobs_url(url: str) -> str:
    """`url` if blobs can be kept there (a folder, file:// or s3://bucket/prefix), else a
    ValueError saying what to write."""
    parts = urlsplit(url)
    if parts.scheme == "s3" and not parts.netloc:
        raise ValueError("an s3:// URL needs a bucket: s3://bucket/prefix")
    if parts.scheme not in ("", "file", "s3"):
        raise ValueError(
            f"unknown blob store scheme {parts.scheme!r}: use a folder or s3://bucket/prefix"
        )
    return url


def blob_store(
    url: str, *, region: str | None = None, endpoint_url: str | None = None
) -> BlobStore:
    """The blob store at `url`: `s3://bucket/prefix`, `file:///path` or a folder path."""
    check_blobs_url(url)
    parts = urlsplit(url)
    if parts.scheme == "s3":
        return S3Blobs(parts.netloc, parts.path, s3_client(region, endpoint_url))
    return LocalBlobs(parts.path if parts.scheme == "file" else url)

