"""Publish the store (and, when the agent can use them, its vectors) into the agent's tree.

Layout: `<publish_root>/src/storage/` always, and `<publish_root>/dist/storage/` as
well when `<publish_root>/dist/` exists (the agent's built copy; we never create
`dist/` ourselves, since its presence means "a build of the agent lives here").
Each target gets `embeddings.bin` (when published), `knowledge-store.json` and
`manifest.json`. The whole set, across both copies, is one commit (see
`publishing.commit`): every file is staged first, then renamed into place with the
manifests last, and an interrupted commit is finished or undone by
`recover_publication`, so the agent never keeps a mixed set. A file whose bytes are
already in place is not rewritten, so an unchanged re-publish touches nothing
(mtime-watching sensors and the agent's file watcher stay quiet); whether it is in place
is known from the signature recorded when it was published (`SIGNATURES_FILENAME`),
else from its bytes.

Public entry points: `recover_publication` (call first, under the publish-root lock),
`publish_local`, `inspect_publication` (read-only, for `status`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from brain_pipeline.corpus.store import STORE_FILENAME
from brain_pipeline.publishing.commit import (
    PUBLISH_STATE_DIRNAME,
    FileChange,
    PendingCommit,
    PublicationError,
    RecoveryReport,
    commit_changes,
    pending_commit,
    recover_publication,
    storage_dirs,
)
from brain_pipeline.publishing.manifest import (
    EMBEDDINGS_FILENAME,
    MANIFEST_FILENAME,
    PublishManifest,
)
from brain_pipeline.publishing.source import ArtifactSource, SourceChanged, read_vectors_header
from brain_pipeline.retrieval.vectors import NotAnEmbeddingStore
from brain_pipeline.utils.atomic import write_if_changed
from brain_pipeline.utils.digest import file_sha256, sha256_hex
from brain_pipeline.utils.file_signature import FileSignature

__all__ = [
    "ArtifactSource",
    "LocalPublication",
    "LocalPublishReport",
    "PublicationError",
    "RecoveryReport",
    "inspect_publication",
    "publish_local",
    "recover_publication",
    "storage_dirs",
]

log = logging.getLogger(__name__)

FileAction = Literal["written", "unchanged", "removed"]


@dataclass(frozen=True)
class FileOutcome:
    """What happened to one file in one target. `size`/`sha256` describe the file now
    in place (None after a removal)."""

    filename: str
    action: FileAction
    size: int | None
    sha256: str | None


@dataclass(frozen=True)
class TargetReport:
    """One storage directory and what happened to each file in it."""

    directory: Path
    files: tuple[FileOutcome, ...]

    @property
    def changed(self) -> bool:
        return any(f.action != "unchanged" for f in self.files)

    @property
    def status(self) -> str:
        """'unchanged' when nothing was written or removed here, else 'updated'."""
        return "updated" if self.changed else "unchanged"


@dataclass(frozen=True)
class LocalPublishReport:
    """The outcome of `publish_local`.

    `manifest` is the manifest now live (an earlier one is kept when only its time and
    run id would differ). `embeddings_note` explains why vectors were withheld.
    """

    targets: tuple[TargetReport, ...]
    manifest: PublishManifest
    embeddings_published: bool
    embeddings_note: str | None

    @property
    def changed(self) -> bool:
        return any(t.changed for t in self.targets)

    def to_metadata(self) -> dict[str, Any]:
        """Plain JSON-able summary (for Dagster metadata or `--json` output)."""
        return {
            "changed": self.changed,
            "embeddings_published": self.embeddings_published,
            "embeddings_note": self.embeddings_note,
            "targets": {
                str(t.directory): {
                    "status": t.status,
                    "files": {
                        f.filename: {"action": f.action, "bytes": f.size, "sha256": f.sha256}
                        for f in t.files
                    },
                }
                for t in self.targets
            },
        }

    def summary(self) -> str:
        """Human-readable lines, one per target and file."""
        lines: list[str] = []
        for target in self.targets:
            lines.append(f"{target.directory}: {target.status}")
            for f in target.files:
                detail = f" {f.size} bytes sha256 {f.sha256}" if f.sha256 else ""
                lines.append(f"  {f.filename}: {f.action}{detail}")
        if not self.embeddings_published and self.embeddings_note:
            lines.append(f"embeddings not published: {self.embeddings_note}")
        return "\n".join(lines)


def embeddings_refusal(embeddings: ArtifactSource | None, agent_query_model: str) -> str | None:
    """Why these embeddings must not go out beside the store, or None when they may.

    The agent embeds each query with its own model and compares it with the stored
    vectors; vectors from any other model give meaningless similarities, so the store
    is better published alone (the agent then ranks with BM25). Only the header is read.
    """
    if embeddings is None:
        return "no embeddings were built"
    try:
        model = read_vectors_header(embeddings).model
    except SourceChanged as exc:
        return f"embeddings.bin changed while publishing ({exc})"
    except NotAnEmbeddingStore as exc:
        return f"embeddings.bin is unreadable ({exc})"
    if model != agent_query_model:
        return (
            f"embeddings.bin holds vectors from {model!r} but the agent embeds queries "
            f"with {agent_query_model!r}; publishing the store without vectors"
        )
    return None


def _check_manifest_matches(
    manifest: PublishManifest, store: ArtifactSource, embeddings: ArtifactSource | None
) -> None:
    """Refuse a manifest built from other files: it would vouch for bytes it never saw.

    Compares the known digests and sizes; that the files still hold those bytes is
    checked as they are copied (`ArtifactSource.blocks`).
    """
    if (manifest.store.sha256, manifest.store.size) != (store.sha256, store.size):
        raise ValueError("manifest.store.sha256 does not match the store bytes to publish")
    if manifest.embeddings is not None and (
        embeddings is None
        or (manifest.embeddings.sha256, manifest.embeddings.size)
        != (embeddings.sha256, embeddings.size)
    ):
        raise ValueError("manifest.embeddings.sha256 does not match the embeddings to publish")


def live_store_file(publish_root: Path) -> Path:
    """The store the agent reads now (it may not exist yet)."""
    return storage_dirs(publish_root)[0] / STORE_FILENAME


def live_manifest(publish_root: Path) -> PublishManifest | None:
    """The manifest now live in src/storage, without verifying the copies (cheap: checks
    that only need what is published, not whether the bytes still match, use this)."""
    return _read_manifest(storage_dirs(publish_root)[0] / MANIFEST_FILENAME)


def _read_manifest(path: Path) -> PublishManifest | None:
    try:
        return PublishManifest.from_json(path.read_bytes())
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError) as exc:
        log.warning("ignoring unreadable %s: %s", path, exc)
        return None


SIGNATURES_FILENAME = "signatures.json"
"""In `<publish_root>/.brain-publish/`: per live artifact, the sha256 it was published or
verified with and its `FileSignature` then (only an optimisation: lost, it costs one
comparison of the bytes)."""

Signatures = dict[str, tuple[str, FileSignature]]


def _signatures_path(publish_root: Path) -> Path:
    return Path(publish_root) / PUBLISH_STATE_DIRNAME / SIGNATURES_FILENAME


def _read_signatures(publish_root: Path) -> Signatures:
    """The recorded signatures; empty when missing, unreadable or of another form."""
    try:
        body = json.loads(_signatures_path(publish_root).read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(body, dict):
        return {}
    found: Signatures = {}
    for key, row in body.items():
        if isinstance(row, list) and len(row) == 2 and isinstance(row[0], str):
            signature = FileSignature.from_list(row[1])
            if signature is not None:
                found[str(key)] = (row[0], signature)
    return found


def _record_signatures(publish_root: Path, artifacts: dict[str, str]) -> None:
    """Record each live artifact's signature with its sha256 (`artifacts`: path relative to
    the root -> sha256), rewriting the record only when it changed."""
    root = Path(publish_root)
    rows: dict[str, list[Any]] = {}
    for key, sha256 in sorted(artifacts.items()):
        signature = FileSignature.of(root / key)
        if signature is not None:
            rows[key] = [sha256, signature.as_list()]
    data = json.dumps(rows, sort_keys=True, separators=(",", ":")).encode("utf-8")
    try:
        write_if_changed(_signatures_path(root), data)
    except OSError as exc:  # the publication is complete; only the shortcut is lost
        log.warning("could not record the published files' signatures: %s", exc)


def _key(publish_root: Path, directory: Path, filename: str) -> str:
    return (directory / filename).relative_to(publish_root).as_posix()


def _known_unchanged(
    directory: Path,
    filename: str,
    data: ArtifactSource | bytes,
    known: tuple[str, FileSignature] | None = None,
) -> bool:
    """True when `directory/filename` already holds `data` (a source's bytes, or these).

    A large artifact is trusted without reading it when the signature recorded with the
    same sha256 at its last publication still matches (the one "unchanged" rule,
    `utils.file_signature`): that saves reading a 450 MB file to learn it did not change.
    Anything less certain is compared byte for byte, a source block by block.
    """
    path = directory / filename
    size = data.size if isinstance(data, ArtifactSource) else len(data)
    try:
        info = path.stat()
    except FileNotFoundError:
        return False
    if info.st_size != size:
        return False
    if isinstance(data, bytes):
        return path.read_bytes() == data
    if known is not None and known[0] == data.sha256 and known[1].still_matches(path):
        return True
    try:
        return data.same_bytes_as(path)
    except SourceChanged:
        return False  # staging it will say so, before anything live changes


def publish_local(
    store: ArtifactSource,
    embeddings: ArtifactSource | None,
    publish_root: Path,
    *,
    agent_query_model: str,
    manifest: PublishManifest,
) -> LocalPublishReport:
    """Publish into `<publish_root>/src/storage/` (and `dist/storage/` when dist exists).

    `manifest` must describe `store`/`embeddings` (see `build_manifest`); when the
    embeddings are withheld (another model's than `agent_query_model`, the one the
    agent embeds queries with), the manifest written says so. An embeddings.bin
    left from an earlier publication is removed when no vectors go out this time: it
    no longer matches the store beside it.

    Every change in every copy is one commit (`publishing.commit`): staged first (a
    full disk raises `PublicationError` with nothing live changed), then renamed into
    place, manifests last. An interrupted earlier commit is recovered first; callers
    should still call `recover_publication` themselves under the publish-root lock
    before deciding what to publish.

    The files are streamed, never read whole: copied block by block into staging
    (hashed as they go: a file rewritten since it was named fails the staging), and
    compared block by block where the live manifest cannot vouch for a live copy.
    """
    _check_manifest_matches(manifest, store, embeddings)
    recover_publication(publish_root)
    refusal = embeddings_refusal(embeddings, agent_query_model)
    if refusal is not None:
        manifest = manifest.without_embeddings(refusal)
    targets = storage_dirs(publish_root)
    live = manifest.or_earlier(_read_manifest(d / MANIFEST_FILENAME) for d in targets)
    manifest_bytes = live.to_json()

    wanted: list[tuple[str, ArtifactSource | None]] = []
    if refusal is None and embeddings is not None:
        wanted.append((EMBEDDINGS_FILENAME, embeddings))
    else:
        wanted.append((EMBEDDINGS_FILENAME, None))
    wanted.append((STORE_FILENAME, store))

    root = Path(publish_root)
    known = _read_signatures(root)
    artifacts: dict[str, str] = {}
    data_changes: list[FileChange] = []
    manifest_changes: list[FileChange] = []
    per_target: list[list[FileOutcome]] = []
    for directory in targets:
        outcomes: list[FileOutcome] = []
        for filename, source in wanted:
            if source is None:
                if (directory / filename).exists():
                    data_changes.append(FileChange(directory, filename, None))
                    outcomes.append(FileOutcome(filename, "removed", None, None))
                continue
            key = _key(root, directory, filename)
            artifacts[key] = source.sha256
            same = _known_unchanged(directory, filename, source, known.get(key))
            if not same:
                data_changes.append(FileChange(directory, filename, source))
            outcomes.append(
                FileOutcome(
                    filename, "unchanged" if same else "written", source.size, source.sha256
                )
            )
        digest = sha256_hex(manifest_bytes)
        same = _known_unchanged(directory, MANIFEST_FILENAME, manifest_bytes)
        if not same:
            manifest_changes.append(FileChange(directory, MANIFEST_FILENAME, manifest_bytes))
        outcomes.append(
            FileOutcome(
                MANIFEST_FILENAME, "unchanged" if same else "written", len(manifest_bytes), digest
            )
        )
        per_target.append(outcomes)
    commit_changes(root, data_changes + manifest_changes, {"manifest": live.to_dict()})
    _record_signatures(root, artifacts)
    return LocalPublishReport(
        targets=tuple(TargetReport(d, tuple(o)) for d, o in zip(targets, per_target, strict=True)),
        manifest=live,
        embeddings_published=refusal is None,
        embeddings_note=refusal,
    )


# -- reading a publication back (for `brain-pipeline status`) ----------------------------


@dataclass(frozen=True)
class CopyCheck:
    """Whether one storage directory holds exactly what the live manifest describes."""

    directory: Path
    problems: tuple[str, ...]

    @property
    def matches(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class LocalPublication:
    """What is live under a publish root: the src manifest and a check of every copy.

    `manifest` is None when nothing has been published (or src's manifest is
    unreadable, then `error` says why).
    """

    root: Path
    manifest: PublishManifest | None
    copies: tuple[CopyCheck, ...]
    error: str | None = None
    pending: PendingCommit | None = None

    @property
    def consistent(self) -> bool:
        return self.manifest is not None and all(c.matches for c in self.copies)


def _check_copy(directory: Path, manifest: PublishManifest) -> CopyCheck:
    problems: list[str] = []
    copy_manifest = _read_manifest(directory / MANIFEST_FILENAME)
    if copy_manifest is None:
        problems.append(f"{MANIFEST_FILENAME} missing or unreadable")
    elif not copy_manifest.same_content(manifest):
        problems.append(f"{MANIFEST_FILENAME} differs from src's")
    for artifact in manifest.artifacts():
        path = directory / artifact.filename
        try:  # streamed: the store and its vectors can be hundreds of MB
            size = path.stat().st_size
            same = size == artifact.size and file_sha256(path) == artifact.sha256
        except FileNotFoundError:
            problems.append(f"{artifact.filename} missing")
            continue
        if not same:
            problems.append(f"{artifact.filename} does not match the manifest's sha256")
    if manifest.embeddings is None and (directory / EMBEDDINGS_FILENAME).exists():
        problems.append(f"{EMBEDDINGS_FILENAME} present but the manifest publishes no vectors")
    return CopyCheck(directory, tuple(problems))


def inspect_publication(publish_root: Path) -> LocalPublication:
    """Read src's manifest.json and verify every copy's files against it.

    Read-only: an interrupted commit is reported in `pending`, never recovered here.
    """
    root = Path(publish_root)
    pending = pending_commit(root)
    targets = storage_dirs(root)
    manifest_path = targets[0] / MANIFEST_FILENAME
    try:
        manifest = PublishManifest.from_json(manifest_path.read_bytes())
    except FileNotFoundError:
        return LocalPublication(root, None, (), pending=pending)
    except (ValueError, UnicodeDecodeError) as exc:
        error = f"{manifest_path} is unreadable: {exc}"
        return LocalPublication(root, None, (), error=error, pending=pending)
    copies = tuple(_check_copy(directory, manifest) for directory in targets)
    return LocalPublication(root, manifest, copies, pending=pending)
