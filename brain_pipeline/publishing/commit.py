"""Publish a *set* of files atomically: stage everything, record an intent, rename, forget.

Each file is already replaced atomically by `atomic.py`; a set of files is not. A full
disk or a `kill -9` between two renames would leave `embeddings.bin` of one build beside
`knowledge-store.json` of another. This module closes that gap with a small write-ahead
protocol, per publish root:

1. **Stage.** Every new file is written and fsync'd into `<target>/.brain-staging-<id>/`
   (inside the directory it will replace a file in, so the final rename never crosses a
   filesystem); an artifact is copied from its source file in blocks, hashed as it goes,
   so neither the store nor its vectors is ever held whole, and a source that is not
   the file it was named as fails here. The file it will replace is hard-linked beside
   it as `previous.<name>` (a free backup that makes a roll-back possible). A full disk
   fails here, while nothing live has changed.
2. **Intent.** `<publish_root>/.brain-publish/intent.json` is written atomically and
   fsync'd: which staged file goes where, its size, sha256 and inode, in commit order.
   From this moment the commit is decided.
3. **Commit.** Each staged file is renamed over its live name (data files first, every
   `manifest.json` last), a file to remove is unlinked, the directories are fsync'd.
4. **Forget.** The intent is removed, then the staging directories.

`recover_publication(publish_root)` finishes what a crash interrupted: with an intent
whose staged files are all present and verified (sha256) it rolls the commit forward;
otherwise it rolls back from the `previous.*` links. Without an intent it only sweeps
what an interrupted run can leave behind: staging directories and the `.<name>.*.tmp`
files of `atomic_writer`. Call it under the publish-root lock at the start of every
publication (`publish_local` also calls it, so a direct caller is safe too).

A reader of a storage directory therefore sees a mixed set only during step 3 (a few
renames), and never once recovery has run after a crash.

`pending_commit(publish_root)` is the read-only view `brain-pipeline status` uses.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from brain_pipeline.publishing.source import ArtifactSource, SourceChanged
from brain_pipeline.utils.atomic import atomic_write_bytes
from brain_pipeline.utils.digest import file_sha256, sha256_hex

PUBLISH_STATE_DIRNAME = ".brain-publish"
INTENT_FILENAME = "intent.json"
STAGING_PREFIX = ".brain-staging-"
BACKUP_PREFIX = "previous."
INTENT_FORMAT = 1

# Files the publication owns in a storage directory; only their atomic_writer leftovers
# (`.<name>.<random>.tmp`) are swept, never anything else a user keeps there.
PUBLISHED_FILENAMES = ("embeddings.bin", "knowledge-store.json", "manifest.json")



class PublicationError(RuntimeError):
    """A publication could not be staged or committed; one line naming path and cause."""


class RecoveryError(RuntimeError):
    """An interrupted commit cannot be finished automatically; the message says why."""


def describe_os_error(exc: OSError) -> str:
    """`No space left on device (ENOSPC)`: the message with its symbolic errno."""
    name = errno.errorcode.get(exc.errno or 0, "")
    text = exc.strerror or str(exc)
    return f"{text} ({name})" if name else text


# -- the plan --------------------------------------------------------------------------


@dataclass(frozen=True)
class FileChange:
    """One change a commit makes: put `data` at `target/filename`, or remove it (None).

    `data` is an `ArtifactSource` for the large artifacts (copied into the staging
    folder block by block, never held whole) and `bytes` only for what is made in
    memory anyway (the manifests, a few KB).
    """

    target: Path
    filename: str
    data: ArtifactSource | bytes | None

    @property
    def path(self) -> Path:
        return self.target / self.filename


@dataclass(frozen=True)
class Operation:
    """One step of a recorded commit (paths relative to the publish root)."""

    target: str
    filename: str
    action: Literal["replace", "remove"]
    size: int | None = None
    sha256: str | None = None
    inode: int | None = None
    staged: str | None = None
    backup: str | None = None
    had_previous: bool = False

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Operation:
        """As recorded by `asdict`; a record of another shape raises ValueError or
        TypeError (an intent we cannot follow is never guessed at)."""
        known = {f.name for f in fields(cls)}
        operation = cls(**{name: value for name, value in data.items() if name in known})
        if operation.action not in ("replace", "remove"):
            raise ValueError(f"unknown action {operation.action!r}")
        return operation


@dataclass(frozen=True)
class Intent:
    """The record that makes a commit recoverable: its id and operations in order."""

    commit_id: str
    operations: tuple[Operation, ...]
    description: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> bytes:
        data = {
            "format": INTENT_FORMAT,
            "id": self.commit_id,
            "operations": [asdict(op) for op in self.operations],
            "description": self.description,
        }
        return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes) -> Intent:
        data = json.loads(raw)
        if not isinstance(data, dict) or data.get("format") != INTENT_FORMAT:
            raise ValueError("not an intent record of a known format")
        return cls(
            commit_id=str(data["id"]),
            operations=tuple(Operation.from_dict(op) for op in data["operations"]),
            description=dict(data.get("description") or {}),
        )

    def staging_dirs(self, root: Path) -> list[Path]:
        name = STAGING_PREFIX + self.commit_id
        return sorted({root / op.target / name for op in self.operations})


def intent_path(publish_root: Path) -> Path:
    return Path(publish_root) / PUBLISH_STATE_DIRNAME / INTENT_FILENAME


# -- small OS helpers (every durable step goes through os.* so a tracer can count it) --


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durable(path: Path, data: ArtifactSource | bytes) -> tuple[int, int, str]:
    """Create `path` with `data`, fsync it; return (inode, size, sha256) of what was written.

    A source is copied block by block and hashed as it goes, so the sha256 the intent
    records is of the staged bytes themselves, and a source that is no longer what it
    was named as fails here (`SourceChanged`), before anything live changes. The inode
    is returned because the rename keeps it (recovery tells a committed file by it).
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # less the umask
    try:
        if isinstance(data, ArtifactSource):
            for block in data.blocks():
                _write_all(fd, block)
            size, digest = data.size, data.sha256
        else:
            _write_all(fd, data)
            size, digest = len(data), sha256_hex(data)
        os.fsync(fd)
        return os.fstat(fd).st_ino, size, digest
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]



def _relative(root: Path, path: Path) -> str:
    return os.path.relpath(path, root)


# -- stage, record, commit ---------------------------------------------------------------


def commit_changes(
    publish_root: Path, changes: Sequence[FileChange], description: dict[str, Any] | None = None
) -> str | None:
    """Apply `changes` as one atomic set; return the commit id (None when there are none).

    `changes` are applied in the given order; callers put every manifest last. Raises
    `PublicationError` (one line, with the errno name such as ENOSPC) when staging
    fails, in which case nothing live has changed and the staging is removed.
    """
    if not changes:
        return None
    root = Path(publish_root).absolute()
    commit_id = secrets.token_hex(6)
    intent = _stage(root, commit_id, changes, description or {})
    record = intent_path(root)
    try:
        atomic_write_bytes(record, intent.to_json())
    except OSError as exc:
        _remove_staging(root, intent)
        raise PublicationError(
            f"publishing to {root} failed while recording the commit in {record}: "
            f"{describe_os_error(exc)}; nothing live was changed"
        ) from None
    try:
        _apply(root, intent)
        _forget(root, intent)
    except OSError as exc:
        raise PublicationError(
            f"publishing to {root} was interrupted during its commit: {describe_os_error(exc)} "
            f"({exc.filename}); the next run completes or undoes it (recover_publication)"
        ) from None
    return commit_id


def _stage(
    root: Path, commit_id: str, changes: Sequence[FileChange], description: dict[str, Any]
) -> Intent:
    operations: list[Operation] = []
    staging_dirs: list[Path] = []
    current: Path | None = None
    try:
        for change in changes:
            current = change.path
            staging = change.target / (STAGING_PREFIX + commit_id)
            if staging not in staging_dirs:
                staging.mkdir(parents=True)
                staging_dirs.append(staging)
            live = change.path
            had_previous = live.exists()
            backup: Path | None = None
            if had_previous:
                backup = staging / (BACKUP_PREFIX + change.filename)
                try:
                    os.link(live, backup)
                except OSError as exc:
                    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
                        raise
                    backup = None  # no hard links here: roll-forward only
            if change.data is None:
                operations.append(
                    Operation(
                        _relative(root, change.target),
                        change.filename,
                        "remove",
                        backup=None if backup is None else _relative(root, backup),
                        had_previous=had_previous,
                    )
                )
                continue
            staged = staging / change.filename
            inode, size, digest = _write_durable(staged, change.data)
            operations.append(
                Operation(
                    _relative(root, change.target),
                    change.filename,
                    "replace",
                    size=size,
                    sha256=digest,
                    inode=inode,
                    staged=_relative(root, staged),
                    backup=None if backup is None else _relative(root, backup),
                    had_previous=had_previous,
                )
            )
        for staging in staging_dirs:
            _fsync_dir(staging)
    except (OSError, SourceChanged) as exc:
        for staging in staging_dirs:
            shutil.rmtree(staging, ignore_errors=True)
        where = current if current is not None else root
        cause = describe_os_error(exc) if isinstance(exc, OSError) else str(exc)
        raise PublicationError(
            f"publishing to {root} failed while staging {where}: {cause}; nothing live was changed"
        ) from None
    return Intent(commit_id, tuple(operations), description)


def _apply(root: Path, intent: Intent) -> None:
    """Rename every staged file into place (idempotent: done steps are skipped)."""
    touched: list[Path] = []
    for op in intent.operations:
        live = root / op.target / op.filename
        if op.action == "remove":
            with contextlib.suppress(FileNotFoundError):
                os.unlink(live)
        else:
            assert op.staged is not None
            staged = root / op.staged
            if staged.exists():
                os.replace(staged, live)
        if live.parent not in touched:
            touched.append(live.parent)
    for directory in touched:
        _fsync_dir(directory)


def _forget(root: Path, intent: Intent) -> None:
    """Drop the intent (the commit is complete), then the staging directories."""
    record = intent_path(root)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(record)
    _fsync_dir(record.parent)
    _remove_staging(root, intent)


def _remove_staging(root: Path, intent: Intent) -> None:
    for staging in intent.staging_dirs(root):
        shutil.rmtree(staging, ignore_errors=True)


# -- recovery ----------------------------------------------------------------------------

RecoveryAction = Literal["clean", "rolled_forward", "rolled_back"]


@dataclass(frozen=True)
class RecoveryReport:
    """What `recover_publication` did: finished or undid a commit, and what it swept."""

    action: RecoveryAction
    commit_id: str | None = None
    swept: tuple[Path, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def changed_anything(self) -> bool:
        return self.action != "clean" or bool(self.swept)

    def summary(self) -> str:
        if self.action == "rolled_forward":
            head = f"recovered interrupted publication {self.commit_id}: completed it"
        elif self.action == "rolled_back":
            head = (
                f"recovered interrupted publication {self.commit_id}: rolled back to the "
                f"previous set ({'; '.join(self.problems)})"
            )
        else:
            head = "no interrupted publication"
        if self.swept:
            head += f"; removed {len(self.swept)} leftover temporary file(s)/folder(s)"
        return head


def _read_intent(root: Path) -> Intent | None:
    record = intent_path(root)
    try:
        raw = record.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return Intent.from_json(raw)
    except (ValueError, KeyError, TypeError) as exc:
        raise RecoveryError(
            f"{record} is unreadable ({exc}); the publication under {root} may be "
            "half-committed: inspect it, then delete the record and re-publish"
        ) from None


def _roll_forward_problems(root: Path, intent: Intent) -> list[str]:
    """Why the commit cannot be completed (empty: every staged file is there and intact)."""
    problems: list[str] = []
    for op in intent.operations:
        if op.action != "replace":
            continue
        assert op.staged is not None
        staged = root / op.staged
        live = root / op.target / op.filename
        if staged.exists():
            if staged.stat().st_size != op.size or file_sha256(staged) != op.sha256:
                problems.append(f"staged {op.staged} is damaged")
            continue
        try:
            info = live.stat()
        except FileNotFoundError:
            problems.append(f"staged {op.staged} is missing")
            continue
        if info.st_ino != op.inode or info.st_size != op.size:
            problems.append(f"staged {op.staged} is missing")
    return problems


def _roll_back(root: Path, intent: Intent) -> list[str]:
    """Put every previous file back; return what could not be restored."""
    lost: list[str] = []
    touched: set[Path] = set()
    for op in intent.operations:
        live = root / op.target / op.filename
        touched.add(live.parent)
        backup = root / op.backup if op.backup else None
        if backup is not None and backup.exists():
            os.replace(backup, live)
        elif not op.had_previous:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(live)
        elif op.action == "replace" and live.exists() and live.stat().st_ino != op.inode:
            pass  # never replaced: the previous file is still live
        elif op.action == "remove" and live.exists():
            pass
        else:
            lost.append(f"{op.target}/{op.filename} could not be restored")
    for directory in touched:
        if directory.is_dir():
            _fsync_dir(directory)
    return lost


def recover_publication(publish_root: Path) -> RecoveryReport:
    """Finish or undo an interrupted commit under `publish_root`, then sweep leftovers.

    Call under the publish-root lock, before anything reads the live set to decide what
    to publish. Idempotent and cheap when nothing was interrupted (a stat and two
    directory listings). Raises `RecoveryError` only for an unreadable intent record.
    """
    root = Path(publish_root).absolute()
    intent = _read_intent(root)
    action: RecoveryAction = "clean"
    problems: list[str] = []
    if intent is not None:
        problems = _roll_forward_problems(root, intent)
        if problems:
            problems += _roll_back(root, intent)
            action = "rolled_back"
        else:
            _apply(root, intent)
            action = "rolled_forward"
        _forget(root, intent)
    swept = tuple(sweep_leftovers(root))
    return RecoveryReport(action, intent.commit_id if intent else None, swept, tuple(problems))


# -- leftovers ---------------------------------------------------------------------------

_OWN_NAMES = "|".join(re.escape(n) for n in (*PUBLISHED_FILENAMES, INTENT_FILENAME))
_TEMP_NAME = re.compile(r"^\.(?:" + _OWN_NAMES + r")\..+\.tmp$")


def storage_dirs(publish_root: Path) -> list[Path]:
    """The storage directories a publication goes to: src always, dist when it exists
    (`dist/` is the agent's built copy: we never create it ourselves)."""
    root = Path(publish_root)
    targets = [root / "src" / "storage"]
    if (root / "dist").is_dir():
        targets.append(root / "dist" / "storage")
    return targets


def find_leftovers(publish_root: Path) -> list[Path]:
    """Staging folders and atomic-writer temp files left by an interrupted run."""
    root = Path(publish_root).absolute()
    found: list[Path] = []
    targets = [d for d in storage_dirs(root) if d.is_dir()]
    directories: Iterable[Path] = [*targets, root / PUBLISH_STATE_DIRNAME]
    for directory in directories:
        try:
            entries = sorted(directory.iterdir())
        except FileNotFoundError:
            continue
        for entry in entries:
            staging = entry.name.startswith(STAGING_PREFIX) and entry.is_dir()
            if staging or (_TEMP_NAME.match(entry.name) and entry.is_file()):
                found.append(entry)
    return found


def sweep_leftovers(publish_root: Path) -> list[Path]:
    """Remove what `find_leftovers` names (only when no commit is pending)."""
    swept: list[Path] = []
    for entry in find_leftovers(publish_root):
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry)
        swept.append(entry)
    return swept


@dataclass(frozen=True)
class PendingCommit:
    """What `status` reports without touching anything: an interrupted commit's intent."""

    commit_id: str | None
    record: Path
    readable: bool

    def describe(self) -> str:
        which = self.commit_id or "of unknown id (unreadable record)"
        return (
            f"publication {which} was interrupted (or is committing right now) and awaits "
            f"recovery ({self.record}); the next pipeline run completes or undoes it"
        )


def pending_commit(publish_root: Path) -> PendingCommit | None:
    """The interrupted commit under `publish_root`, if any. Reads only."""
    root = Path(publish_root).absolute()
    try:
        intent = _read_intent(root)
    except RecoveryError:
        return PendingCommit(None, intent_path(root), readable=False)
    return None if intent is None else PendingCommit(intent.commit_id, intent_path(root), True)
