"""Resolve the corpus, walk its areas in the original order, and describe every file.

The walk order decides which copy of a duplicated paragraph survives de-duplication and
so which `source` the store names; it must match the original script: areas in name
order, each walked depth-first with files and folders interleaved by name (code-point
order, i.e. UTF-8 byte order), symlinks followed. Where the original crashed or
escaped the corpus (dangling links, undecodable names, links leaving the root or
looping) the entry is reported and skipped instead.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from brain_pipeline.corpus.junk import (
    DEFAULT_LIMITS,
    REASON_BINARY,
    REASON_TOO_LARGE,
    IngestLimits,
    binary_content,
    too_large,
)
from brain_pipeline.utils.digest import sha256_hex
from brain_pipeline.utils.file_signature import FileSignature

TEXT_SUFFIXES = (".md", ".txt")
ROADMAP_SUFFIX = ".json"
ROADMAP_PREFIX = "formatted-"
ROADMAP_PATH_MARK = "roadmaps"
RAW_FOLDER = "raw"

# Reasons an entry is skipped. Those in PROBLEM_REASONS point at something wrong.
REASON_IGNORED = "not a text or roadmap file"
REASON_ROOT_FILE = "file directly in the corpus root"
REASON_RAW = "raw folder"
REASON_DUPLICATE = "same file reached twice"
REASON_DANGLING = "dangling symbolic link"
REASON_OUTSIDE = "symbolic link leaves the corpus root"
REASON_LOOP = "symbolic link loop"
REASON_BAD_NAME = "name is not valid UTF-8"
REASON_SPECIAL = "not a regular file"
REASON_UNREADABLE = "unreadable"

STATUS_TEXT = "text"
STATUS_ROADMAP = "roadmap"
STATUS_SKIPPED = "skipped"


class CorpusNotFoundError(FileNotFoundError):
    """No corpus where one was looked for: a root that is missing or not a directory (the
    walk), or none configured or found (`BrainConfig.corpus_root`, whose message says
    what to set). One class, so a caller catching it catches both."""

    def __init__(self, message: str, path: Path | str | None = None) -> None:
        super().__init__(errno.ENOENT, message, None if path is None else str(path))
        self.message = message
        self.path = None if path is None else Path(path)

    def __str__(self) -> str:
        return self.message if self.path is None else f"{self.message}: {self.path}"


@dataclass(frozen=True, slots=True)
class CorpusFile:
    """A text or roadmap file the walk found; `path` goes through the walked names."""

    area: str
    source: str
    path: str
    kind: str  # STATUS_TEXT | STATUS_ROADMAP
    size: int
    mtime_ns: int
    inode: int = 0  # with ctime_ns: known when the walk found it, 0 when rebuilt from a snapshot
    ctime_ns: int = 0

    @property
    def signature(self) -> FileSignature:
        """The file as the walk saw it, for the one "unchanged since we looked" rule."""
        return FileSignature(self.size, self.mtime_ns, self.inode, self.ctime_ns)


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """One line of the manifest: a file read (text/roadmap) or an entry skipped, and why."""

    area: str
    source: str
    status: str
    reason: str | None = None
    detail: str | None = None
    problem: bool = False
    size: int | None = None
    sha256: str | None = None
    mtime_ns: int | None = None

    def with_outcome(
        self, status: str, reason: str | None, detail: str | None, problem: bool
    ) -> ManifestEntry:
        """This file's line with what chunking found (a skip, a reason worth telling).

        Direct construction, not `dataclasses.replace`: every file of every run passes
        here, and replace costs several times more.
        """
        return ManifestEntry(
            self.area,
            self.source,
            status,
            reason,
            detail,
            problem,
            self.size,
            self.sha256,
            self.mtime_ns,
        )


@dataclass(frozen=True, slots=True)
class _Refusal:
    """Why an entry cannot be followed (a dangling link, a link leaving the root, ...)."""

    reason: str
    detail: str


def classify_name(name: str, source: str) -> str | None:
    """Classify a regular file as "text", "roadmap" or None from its name and corpus path.

    Deliberate deviation: `roadmaps` is looked for in the corpus-relative path, not the
    absolute one, so where the corpus is stored cannot change the output.
    """
    if name.endswith(TEXT_SUFFIXES):
        return STATUS_TEXT
    if name.endswith(ROADMAP_SUFFIX) and (
        name.startswith(ROADMAP_PREFIX) or ROADMAP_PATH_MARK in source
    ):
        return STATUS_ROADMAP
    return None


def describe_holdings(sources: Iterable[str], *, shown: int = 4) -> str:
    """What a set of files is, by suffix, most common first: `12 .rst, 3 .png, 1 other`.

    Said when an area yields nothing, so the person sees why (the files are of a kind
    the ingest does not read) instead of the area silently vanishing.
    """
    kinds: Counter[str] = Counter()
    for source in sources:
        name = source.rsplit("/", 1)[-1]
        suffix = os.path.splitext(name)[1]
        kinds[suffix or "no suffix"] += 1
    if not kinds:
        return "no files"
    ranked = kinds.most_common()
    parts = [f"{count} {kind}" for kind, count in ranked[:shown]]
    rest = sum(count for _, count in ranked[shown:])
    if rest:
        parts.append(f"{rest} other")
    return ", ".join(parts)


def resolve_root(root: Path | str) -> str:
    """The real path of the corpus root, or CorpusNotFoundError naming what was given."""
    try:
        st = os.stat(root)
    except OSError:
        raise CorpusNotFoundError("corpus directory does not exist", root) from None
    if not stat.S_ISDIR(st.st_mode):
        raise CorpusNotFoundError("corpus directory is not a directory", root)
    return os.path.realpath(root)


def _printable(name: str) -> str:
    """An undecodable file name made printable (invalid bytes as \\xNN)."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def _valid_name(name: str) -> bool:
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _sorted_entries(path: str) -> list[os.DirEntry[str]]:
    with os.scandir(path) as it:
        entries = list(it)
    entries.sort(key=lambda e: e.name)  # code-point order == UTF-8 byte order
    return entries


@dataclass
class CorpusWalk:
    """Iterate the corpus in store order, yielding CorpusFile or skipped ManifestEntry.

    `areas` fills up as the walk proceeds. Only symlinks cost a `stat`/`realpath`;
    plain entries are classified from the directory listing itself.
    """

    root: Path
    areas: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.root_real = resolve_root(self.root)
        self._prefix = self.root_real.rstrip(os.sep) + os.sep
        self._seen_files: dict[tuple[int, int], str] = {}

    def __iter__(self) -> Iterator[CorpusFile | ManifestEntry]:
        self.areas.clear()
        self._seen_files.clear()  # "reached twice" is per walk: iterating again starts afresh
        root_st = os.stat(self.root_real)
        for entry in _sorted_entries(self.root_real):
            name = entry.name
            if not _valid_name(name):
                yield self._skip("", _printable(name), REASON_BAD_NAME, problem=True)
                continue
            st = self._stat(entry)
            if isinstance(st, _Refusal):
                yield self._skip("", name, st.reason, problem=True, detail=st.detail)
            elif stat.S_ISDIR(st.st_mode):
                self.areas.append(name)
                yield from self._walk_area(entry.path, name, (root_st.st_dev, root_st.st_ino), st)
            else:
                yield self._skip("", name, REASON_ROOT_FILE)

    def _skip(
        self,
        area: str,
        source: str,
        reason: str,
        *,
        problem: bool = False,
        detail: str | None = None,
    ) -> ManifestEntry:
        return ManifestEntry(area, source, STATUS_SKIPPED, reason, detail or None, problem)

    def _inside(self, real: str) -> bool:
        return real == self.root_real or real.startswith(self._prefix)

    def _stat(self, entry: os.DirEntry[str]) -> os.stat_result | _Refusal:
        """Stat following links; a refusal (reason, detail) when it cannot be followed."""
        if not entry.is_symlink():
            try:
                return entry.stat(follow_symlinks=False)
            except OSError as exc:
                return _Refusal(REASON_UNREADABLE, exc.strerror or str(exc))
        try:
            st = os.stat(entry.path)
        except FileNotFoundError:
            return _Refusal(REASON_DANGLING, os.readlink(entry.path))
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return _Refusal(REASON_LOOP, os.readlink(entry.path))
            return _Refusal(REASON_UNREADABLE, exc.strerror or str(exc))
        if not self._inside(os.path.realpath(entry.path)):
            return _Refusal(REASON_OUTSIDE, os.readlink(entry.path))
        return st

    def _walk_area(
        self, area_path: str, area: str, root_key: tuple[int, int], area_st: os.stat_result
    ) -> Iterator[CorpusFile | ManifestEntry]:
        area_key = (area_st.st_dev, area_st.st_ino)
        ancestors = {root_key, area_key}
        try:
            listing = _sorted_entries(area_path)
        except OSError as exc:
            yield self._skip(area, area, REASON_UNREADABLE, problem=True, detail=exc.strerror)
            return
        stack: list[tuple[Iterator[os.DirEntry[str]], str, tuple[int, int]]] = [
            (iter(listing), area, area_key)
        ]
        while stack:
            entries, prefix, key = stack[-1]
            for entry in entries:
                name = entry.name
                if not _valid_name(name):
                    source = f"{prefix}/{_printable(name)}"
                    yield self._skip(area, source, REASON_BAD_NAME, problem=True)
                    continue
                source = f"{prefix}/{name}"
                if not entry.is_symlink() and entry.is_file(follow_symlinks=False):
                    yield self._file(entry, area, source, None)
                    continue
                st = self._stat(entry)
                if isinstance(st, _Refusal):
                    yield self._skip(area, source, st.reason, problem=True, detail=st.detail)
                    continue
                if not stat.S_ISDIR(st.st_mode):
                    yield self._file(entry, area, source, st)
                    continue
                if name == RAW_FOLDER:
                    yield self._skip(area, source, REASON_RAW)
                    continue
                child_key = (st.st_dev, st.st_ino)
                if child_key in ancestors:
                    yield self._skip(area, source, REASON_LOOP, problem=True)
                    continue
                try:
                    children = _sorted_entries(entry.path)
                except OSError as exc:
                    detail = exc.strerror or ""
                    yield self._skip(area, source, REASON_UNREADABLE, problem=True, detail=detail)
                    continue
                ancestors.add(child_key)
                stack.append((iter(children), source, child_key))
                break
            else:
                stack.pop()
                ancestors.discard(key)

    def _file(
        self, entry: os.DirEntry[str], area: str, source: str, st: os.stat_result | None
    ) -> CorpusFile | ManifestEntry:
        """Classify a non-directory; only text/roadmap candidates need a stat."""
        kind = classify_name(entry.name, source)
        if st is not None and not stat.S_ISREG(st.st_mode):
            return self._skip(area, source, REASON_SPECIAL, problem=kind is not None)
        if kind is None:
            return self._skip(area, source, REASON_IGNORED)
        if st is None:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                return self._skip(
                    area, source, REASON_UNREADABLE, problem=True, detail=exc.strerror
                )
        key = (st.st_dev, st.st_ino)
        first = self._seen_files.setdefault(key, source)
        if first != source:
            return self._skip(area, source, REASON_DUPLICATE, detail=f"same file as {first}")
        return CorpusFile(
            area, source, entry.path, kind, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns
        )


def walk_corpus(root: Path | str) -> CorpusWalk:
    """The corpus walk for `root` (raises CorpusNotFoundError when it is missing)."""
    return CorpusWalk(Path(root))


def read_file(found: CorpusFile, max_bytes: int) -> bytes:
    """The file's bytes (OSError when it vanished or changed kind since the walk saw it).

    Plain `os.read` calls sized from the walk's stat: about half the cost of `open()`
    with its buffered file object, which shows on a corpus of thousands of small files.
    Reading stops after `max_bytes + 1` bytes, so a file that grew past the limit since
    the walk's stat is caught without being read whole.
    """
    cap = max_bytes + 1
    fd = os.open(found.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        parts = [os.read(fd, min(found.size + 1, cap))]
        total = len(parts[0])
        while parts[-1] and total < cap:  # to the end (or the cap), even if it grew
            parts.append(os.read(fd, min(1 << 16, cap - total)))
            total += len(parts[-1])
    finally:
        os.close(fd)
    if len(parts) == 2 and not parts[1]:
        return parts[0]  # the usual case: one read, then end of file
    return b"".join(parts)


def unreadable_entry(found: CorpusFile, exc: OSError) -> ManifestEntry:
    """The manifest line of a file the walk found but that could not be read."""
    detail = exc.strerror or str(exc)
    return ManifestEntry(
        found.area, found.source, STATUS_SKIPPED, REASON_UNREADABLE, detail, True, found.size
    )


def file_entry(found: CorpusFile, sha256: str) -> ManifestEntry:
    """The manifest line of a file that was read."""
    return ManifestEntry(
        found.area,
        found.source,
        found.kind,
        size=found.size,
        sha256=sha256,
        mtime_ns=found.mtime_ns,
    )


def junk_entry(
    found: CorpusFile, reason: str, detail: str, sha256: str | None = None
) -> ManifestEntry:
    """The manifest line of a file skipped as junk (binary, too large): a problem."""
    return ManifestEntry(
        found.area,
        found.source,
        STATUS_SKIPPED,
        reason,
        detail,
        True,
        found.size,
        sha256,
        found.mtime_ns,
    )


def screen_file(found: CorpusFile, limits: IngestLimits = DEFAULT_LIMITS) -> bytes | ManifestEntry:
    """Read a file unless it is junk: its bytes, or the manifest line saying why not.

    The size limit is checked on the walk's stat before anything is read; the binary
    test on the bytes read. One rule for `discover` and the ingest, so both manifests
    agree on what was refused and on the hashes they record.
    """
    oversize = too_large(found.size, limits)
    if oversize is not None:
        return junk_entry(found, REASON_TOO_LARGE, oversize)
    try:
        data = read_file(found, limits.max_file_bytes)
    except OSError as exc:
        return unreadable_entry(found, exc)
    if len(data) > limits.max_file_bytes:  # it grew since the walk saw it
        grown = f"over {limits.max_file_bytes:,} bytes (corpus.max_file_bytes)"
        return junk_entry(found, REASON_TOO_LARGE, f"grew while being read: {grown}")
    binary = binary_content(data)
    if binary is not None:
        return junk_entry(found, REASON_BINARY, binary, sha256_hex(data))
    return data


