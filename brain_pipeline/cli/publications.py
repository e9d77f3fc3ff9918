"""`brain-pipeline publications`: every publication and rollback, newest first."""

from __future__ import annotations

import argparse
import sys

HELP = "list the publications (and rollbacks) recorded in the build directory"
DESCRIPTION = """\
List every publication recorded in the build directory's publication history
(state/publications.json), newest first: its id (for `rollback --to`), when, what
triggered it, the store sha256, the evaluation headline, whether it reached S3, and
the run. Rollbacks are publications too ("rollback to #N"). A held publication (after
a rollback) is named at the end. Exit 0, or 2 when the history cannot be read.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--build-dir", metavar="DIR", help="build directory (default: config)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from brain_pipeline.config import ConfigError, load_config
    from brain_pipeline.publishing.publication_log import HistoryError, read_history
    from brain_pipeline.state.layout import StateLayout

    try:
        build_dir = Path(args.build_dir) if args.build_dir else load_config().build_dir
        history = read_history(StateLayout.of(build_dir))
    except (ConfigError, HistoryError) as exc:
        print(f"brain-pipeline publications: {exc}", file=sys.stderr)
        return 2
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
        print(f"no publications recorded in {build_dir}")
        return 0
    for pub in pubs:
        marker = "*" if live is not None and pub.id == live.id else " "
        print(f"{marker} {pub.describe()}")
    if hold is not None:
        print(f"HELD: {hold.describe()}")
    return 0
