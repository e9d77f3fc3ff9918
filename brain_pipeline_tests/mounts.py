"""A small tmpfs for disk-full tests (CI runs as root, so `mount` works there)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_tmpfs(mountpoint: Path, size: str) -> Iterator[Path]:
    """Mount a tmpfs of `size` (CI runs as root); fail with the reason when not allowed.

    Failing, not skipping: a disk-full test that silently skips would count as passing.
    """
    mountpoint.mkdir(parents=True)
    mount = shutil.which("mount")
    if mount is None:
        pytest.fail("no mount command on this machine: the disk-full tests need one")
    done = subprocess.run(
        [mount, "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mountpoint)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield mountpoint
    finally:
        done = subprocess.run(["umount", str(mountpoint)], capture_output=True, check=False)
        if done.returncode != 0:
            # Still busy (a memory map of a file on it, say): detach it now; the kernel
            # frees it when the last user lets go, so no mount outlives the test run.
            subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True, check=False)
