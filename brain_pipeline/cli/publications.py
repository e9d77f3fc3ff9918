"""`brain-pipeline publications`: every publication and rollback, newest first."""

from __future__ import annotations

import argparse

from brain_pipeline.cli import BUILD_DIR_HELP, CommandError, configuration

HELP = "list the publications (and rollbacks) recorded in the ledger"
DESCRIPTION = """\
List every publication recorded in the publication history (kept in the ledger,
state.ledger, so every worker sharing it lists the same), newest first: its id (for
`rollback --to`), when, what triggered it, the store sha256, the evaluation headline,
whether it reached S3, and the run. Rollbacks are publications too ("rollback to
#N"). A held publication (after a rollback) is named at the end. Exit 0, or 2 when
the history cannot be read.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--build-dir", metavar="DIR", help=BUILD_DIR_HELP)
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    import json

    from brain_pipeline.config import ConfigError, memory_of
    from brain_pipeline.publishing.publication_log import HistoryError, read_history
    from brain_pipeline.state.blobs import BlobError
    from brain_pipeline.state.ledger import LedgerError

    cfg = configuration(args)
    try:
        history = read_history(memory_of(cfg))
    except (ConfigError, HistoryError, LedgerError, BlobError) as exc:
        raise CommandError(exc) from None
    pubs = list(reversed(history.publications()))
    hold = history.hold()
    live = history.live()
    if args.json:
        payload = {
            "publications": [p.to_dict() for p in pubs],
            "live": live.id if live else None,
            "hold": hold.publication if hold else None,
        }
        print(json.dumps(payload, indent=2, sort_keys=True))
        return 0
    if not pubs:
        print(f"no publications recorded in {cfg.build_dir}")
        return 0
    for pub in pubs:
        marker = "*" if live is not None and pub.id == live.id else " "
        print(f"{marker} {pub.describe()}")
    if hold is not None:
        print(f"HELD: {hold.describe()}")
    return 0
