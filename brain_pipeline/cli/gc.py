"""`brain-pipeline gc`: keep the build directory's caches bounded."""

from __future__ import annotations

import argparse

from brain_pipeline.cli import BUILD_DIR_HELP, CommandError, configuration

HELP = "drop cache entries and blobs nothing kept reaches"
DESCRIPTION = """\
The build directory's state/ keeps caches keyed by content: a corpus snapshot per
observed version, chunks per file hash, indexes per chunk digest. Each edit adds
entries; this removes those that neither the current build nor the published store
still uses. The chunk history (used to repair fixture labels) is kept. Then the blobs
(state.blobs, shared by every worker) that nothing kept reaches go: kept publications
(publish.keep_generations), current records, baselines, the newest evaluation and the
vector packs are walked in the ledger; everything else (older evaluation outcomes and
candidates, former baselines, pruned generations) and stale temporary files are
removed. Takes the run lease, so it never races a run. Snapshots are also pruned by
every run.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--build-dir", metavar="DIR", help=BUILD_DIR_HELP)


def run(args: argparse.Namespace) -> int:
    from brain_pipeline.config import memory_of
    from brain_pipeline.corpus.gc import collect, tree_bytes
    from brain_pipeline.publishing.local import inspect_publication
    from brain_pipeline.publishing.publication_log import HistoryError
    from brain_pipeline.state.lock import LockBusyError, make_holder
    from brain_pipeline.state.run_lease import run_lease
    from brain_pipeline.steps.publications import collect_blobs

    cfg = configuration(args)
    manifest = inspect_publication(cfg.publish_root()).manifest
    memory = memory_of(cfg)
    layout = memory.layout
    try:
        with run_lease(
            memory.ledger,
            run_id=None,
            wait_seconds=cfg.locks.wait_seconds,
            holder=make_holder("brain-pipeline gc"),
        ):
            report = collect(
                layout,
                variant=cfg.ingest_limits().cache_variant,
                published_digest=manifest.corpus_digest if manifest else None,
            )
            report.blobs = collect_blobs(memory, cfg.publish.keep_generations)
            report.bytes_after = tree_bytes(layout.state_dir)
    except LockBusyError as exc:
        raise CommandError(exc, 75) from None
    except HistoryError as exc:  # never guess what is kept: no blob was deleted
        raise CommandError(f"blobs not collected: {exc}") from None
    print(report.summary())
    return 0
