"""Publish the store (and, when the agent can use them, its vectors) into the agent's tree.

Layout: `<publish_root>/src/storage/` always, and `<publish_root>/dist/storage/` as
well when `<publish_root>/dist/` exists (the agent's built copy; we never create
`dist/` ourselves, since its presence means "a build of the agent lives here").
Each target gets `embeddings.bin` (when published), `knowledge-store.json` and
`manifest.json`, written in that order so the manifest, written last, never describes
files that are not there yet. Every write is atomic and skipped when the bytes are
already in place, so an unchanged re-publish touches nothing (mtime-watching sensors
and the agent's file watcher stay quiet).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from brain_pipeline.corpus.store import STORE_FILENAME
from brain_pipeline.publishing.atomic import write_if_changed
from brain_pipeline.publishing.manifest import (
    EMBEDDINGS_FILENAME,
    MANIFEST_FILENAME,
    PublishManifest,
    sha256_hex,
)
from brain_pipeline.retrieval.vectors import NotAnEmbeddingStore, decode_embeddings

log = logging.getLogger(__name__)

DEFAULT_AGENT_QUERY_MODEL = "gemini-embedding-001"
STORAGE_DIRNAME = "storage"

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


def storage_dirs(publish_root: Path) -> list[Path]:
    """The storage directories a publication goes to: src always, dist when it exists."""
    root = Path(publish_root)
    targets = [root / "src" / STORAGE_DIRNAME]
    if (root / "dist").is_dir():
        targets.append(root / "dist" / STORAGE_DIRNAME)
    return targets


def embeddings_refusal(embeddings_bytes: bytes | None, agent_query_model: str) -> str | None:
    """Why these embeddings must not go out beside the store, or None when they may.

    The agent embeds each query with its own model and compares it with the stored
    vectors; vectors from any other model give meaningless similarities, so the store
    is better published alone (the agent then ranks with BM25).
    """
    if embeddings_bytes is None:
        return "no embeddings were built"
    try:
        model = decode_embeddings(embeddings_bytes).model
    except NotAnEmbeddingStore as exc:
        return f"embeddings.bin is unreadable ({exc})"
    if model != agent_query_model:
        return (
            f"embeddings.bin holds vectors from {model!r} but the agent embeds queries "
            f"with {agent_query_model!r}; publishing the store without vectors"
        )
    return None


def _check_manifest_matches(
    manifest: PublishManifest, store_bytes: bytes, embeddings_bytes: bytes | None
) -> None:
    """Refuse a manifest built from other bytes: it would vouch for files it never saw."""
    if manifest.store.sha256 != sha256_hex(store_bytes):
        raise ValueError("manifest.store.sha256 does not match the store bytes to publish")
    if manifest.embeddings is not None and (
        embeddings_bytes is None or manifest.embeddings.sha256 != sha256_hex(embeddings_bytes)
    ):
        raise ValueError("manifest.embeddings.sha256 does not match the embeddings to publish")


def _read_manifest(path: Path) -> PublishManifest | None:
    try:
        return PublishManifest.from_json(path.read_bytes())
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError) as exc:
        log.warning("ignoring unreadable %s: %s", path, exc)
        return None


def _manifest_to_write(manifest: PublishManifest, targets: Iterable[Path]) -> PublishManifest:
    """Keep an existing manifest whose content equals the new one (time and run aside)."""
    for directory in targets:
        existing = _read_manifest(directory / MANIFEST_FILENAME)
        if existing is not None and existing.same_content(manifest):
            return existing
    return manifest


def _write(directory: Path, filename: str, data: bytes) -> FileOutcome:
    written = write_if_changed(directory / filename, data)
    return FileOutcome(filename, "written" if written else "unchanged", len(data), sha256_hex(data))


def _remove(directory: Path, filename: str) -> FileOutcome | None:
    try:
        (directory / filename).unlink()
    except FileNotFoundError:
        return None
    return FileOutcome(filename, "removed", None, None)


def publish_local(
    store_bytes: bytes,
    embeddings_bytes: bytes | None,
    publish_root: Path,
    *,
    agent_query_model: str = DEFAULT_AGENT_QUERY_MODEL,
    manifest: PublishManifest,
) -> LocalPublishReport:
    """Publish into `<publish_root>/src/storage/` (and `dist/storage/` when dist exists).

    `manifest` must describe `store_bytes`/`embeddings_bytes` (see `build_manifest`);
    when the embeddings are withheld, the manifest written says so. An embeddings.bin
    left from an earlier publication is removed when no vectors go out this time: it
    no longer matches the store beside it.
    """
    _check_manifest_matches(manifest, store_bytes, embeddings_bytes)
    refusal = embeddings_refusal(embeddings_bytes, agent_query_model)
    if refusal is not None:
        manifest = manifest.without_embeddings(refusal)
    targets = storage_dirs(publish_root)
    live = _manifest_to_write(manifest, targets)
    manifest_bytes = live.to_json()

    reports: list[TargetReport] = []
    for directory in targets:
        outcomes: list[FileOutcome] = []
        if refusal is None and embeddings_bytes is not None:
            outcomes.append(_write(directory, EMBEDDINGS_FILENAME, embeddings_bytes))
        else:
            removed = _remove(directory, EMBEDDINGS_FILENAME)
            if removed is not None:
                outcomes.append(removed)
        outcomes.append(_write(directory, STORE_FILENAME, store_bytes))
        outcomes.append(_write(directory, MANIFEST_FILENAME, manifest_bytes))
        reports.append(TargetReport(directory, tuple(outcomes)))
    return LocalPublishReport(
        targets=tuple(reports),
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
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            problems.append(f"{artifact.filename} missing")
            continue
        if len(data) != artifact.size or sha256_hex(data) != artifact.sha256:
            problems.append(f"{artifact.filename} does not match the manifest's sha256")
    if manifest.embeddings is None and (directory / EMBEDDINGS_FILENAME).exists():
        problems.append(f"{EMBEDDINGS_FILENAME} present but the manifest publishes no vectors")
    return CopyCheck(directory, tuple(problems))


def inspect_publication(publish_root: Path) -> LocalPublication:
    """Read src's manifest.json and verify every copy's files against it."""
    root = Path(publish_root)
    targets = storage_dirs(root)
    manifest_path = targets[0] / MANIFEST_FILENAME
    try:
        manifest = PublishManifest.from_json(manifest_path.read_bytes())
    except FileNotFoundError:
        return LocalPublication(root, None, ())
    except (ValueError, UnicodeDecodeError) as exc:
        return LocalPublication(root, None, (), error=f"{manifest_path} is unreadable: {exc}")
    copies = tuple(_check_copy(directory, manifest) for directory in targets)
    return LocalPublication(root, manifest, copies)
