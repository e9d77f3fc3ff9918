"""The one rule for "this file is unchanged since we looked": size, mtime_ns, inode and
ctime_ns all equal.

Re-hashing a 450 MB store on every run would cost seconds, so a recorded digest is
trusted while the file's signature is the one recorded with it. Every write of ours
renames a new inode into place, which changes the inode; an edit in place changes size
or mtime; and ctime, which no user tool can set, catches an in-place edit whose mtime was
put back (`touch -d`). Anything else is hashed again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FileSignature:
    size: int
    mtime_ns: int
    inode: int
    ctime_ns: int

    @classmethod
    def of(cls, path: Path | str) -> FileSignature | None:
        """The file's signature now; None when it does not exist."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return cls(st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)

    @classmethod
    def from_list(cls, values: object) -> FileSignature | None:
        """From `as_list()`'s JSON form; None for anything else (an older record's form)."""
        if not isinstance(values, list) or len(values) != 4:
            return None
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return None
        return cls(*values)

    def as_list(self) -> list[int]:
        return [self.size, self.mtime_ns, self.inode, self.ctime_ns]

    def key(self) -> str:
        """A file-name-safe form (names the store sidecar built for these bytes)."""
        return f"{self.size}-{self.mtime_ns}-{self.inode}-{self.ctime_ns}"

    def still_matches(self, path: Path | str) -> bool:
        return FileSignature.of(path) == self


def mtime_ns(path: Path | str) -> int:
    """The file's mtime in ns, or 0 when it vanished: the sort key caches prune by (a file
    another process just removed sorts as the oldest instead of failing the prune)."""
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0
