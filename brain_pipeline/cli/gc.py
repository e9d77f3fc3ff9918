"""`brain-pipeline gc`: keep the build directory's caches bounded."""

from __future__ import annotations

import argparse
import sys

HELP = "drop cache entries (snapshots, chunk cache rows, indexes) no live record names"
DESCRIPTION = """\
The build directory's state/ keeps caches keyed by content: a corpus snapshot per
observed version, chunks per file hash, indexes per chunk digest. Each edit adds
entries; this removes those that neither the current build nor the published store
still uses. The chunk history (used to repair fixture labels) is kept. Takes the build
directory's lock, so it never races a run. Snapshots are also pruned by every run.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--build-dir", metavar="DIR", help="build directory (default: config)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from brain_pipeline.config import ConfigError, load_config, memory_of
    from brain_pipeline.corpus.gc import collect
    from brain_pipeline.publishing.local import inspect_publication
    from brain_pipeline.state.layout import StateLayout
    from brain_pipeline.state.lock import LockBusyError, make_holder
    from brain_pipeline.state.run_lease import run_lease

    try:
        cfg = load_config()
    except ConfigError as exc:
        print(f"brain-pipeline gc: {exc}", file=sys.stderr)
        return 2
    layout = StateLayout.of(Path(args.build_dir) if args.build_dir else cfg.build_dir)
    manifest = inspect_publication(cfg.publish_root()).manifest
    try:
        with run_lease(
            memory_of(cfg.model_copy(update={"build_dir": layout.build_dir})).ledger,
            run_id=None,
            wait_seconds=cfg.locks.wait_seconds,
            holder=make_holder("brain-pipeline gc"),
        ):
            report = collect(
                layout,
                variant=cfg.ingest_limits().cache_variant,
                published_digest=manifest.corpus_digest if manifest else None,
            )
    except LockBusyError as exc:
        print(f"brain-pipeline gc: {exc}", file=sys.stderr)
        return 75
    print(report.summary())
    return 0
