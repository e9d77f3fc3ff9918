"""`brain-pipeline materialize`: run the asset graph in-process, checks included."""

from __future__ import annotations

import argparse
import sys
import time

HELP = "materialise assets (default: everything) with their checks, in-process"
DESCRIPTION = """\
Materialise the asset graph in this process, including the checks of the selected assets
(so a failing retrieval_eval blocks publishing), in the same Dagster instance the web UI
uses. Exits non-zero when any step fails or is blocked.

Selection uses Dagster's asset selection syntax, e.g.:
  brain-pipeline materialize                          everything
  brain-pipeline materialize --select '*embeddings'   embeddings and everything upstream
  brain-pipeline materialize --select 'group:ingest'  discovery, chunks and the store
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--select",
        default="*",
        metavar="SELECTION",
        help="asset selection (Dagster syntax); default: '*' (every asset)",
    )
    parser.add_argument(
        "--force-publish",
        action="store_true",
        help="publish even when the latest evaluation did not pass (logged loudly)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="show Dagster's own step logs")


def run(args: argparse.Namespace) -> int:
    from brain_pipeline.cli.instance_setup import configured_instance

    if configured_instance("materialize") is None:
        return 2
    from brain_pipeline.defs.runner import SelectionError, materialize_selection

    started = time.monotonic()
    try:
        outcome = materialize_selection(
            args.select, force_publish=args.force_publish, verbose=args.verbose, echo=print
        )
    except SelectionError as exc:
        print(f"brain-pipeline materialize: bad --select: {exc}", file=sys.stderr)
        return 2
    print(
        f"{'succeeded' if outcome.success else 'FAILED'}: run {outcome.run_id} "
        f"in {time.monotonic() - started:.1f}s (see it in the UI: brain-pipeline ui)",
        file=sys.stderr,
    )
    return 0 if outcome.success else 1
