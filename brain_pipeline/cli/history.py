"""`brain-pipeline history ID`: what a chunk id was, and when it was last live."""

from __future__ import annotations

import argparse

from brain_pipeline.cli import BUILD_DIR_HELP, CommandError, configuration

HELP = "explain a chunk id from the chunk history (text, provenance, when live)"
DESCRIPTION = """\
Print what chunk ID was: its area, source file, heading and text, when it was first
written to a store and when it was last live, from the chunk history kept in the ledger
(state.ledger: every worker sharing it sees the same history; by default the build
directory's own). Exit 0 when found, 1 when the history does not know the id, 2 when
the configuration or the ledger is unusable.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", metavar="ID", help="a chunk id (12 hex digits)")
    parser.add_argument("--build-dir", metavar="DIR", help=BUILD_DIR_HELP)
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    import json

    from brain_pipeline.config import memory_of
    from brain_pipeline.corpus.chunk_history import HistoryError, lookup, stats
    from brain_pipeline.corpus.jscompat import json_stringify
    from brain_pipeline.state.blobs import BlobError
    from brain_pipeline.state.ledger import LedgerError

    cfg = configuration(args)
    try:
        memory = memory_of(cfg)
        entry = lookup(memory, args.id.strip().lower())
    except (ValueError, HistoryError, LedgerError, BlobError) as exc:
        raise CommandError(exc) from None
    if entry is None:
        known = stats(memory)
        raise CommandError(
            f"{args.id} is not in the chunk history of {cfg.build_dir} "
            f"({known['ids']} ids from {known['stores']} recorded store(s))",
            1,
        )
    if args.json:
        try:
            text = json.dumps(entry.to_dict(), indent=2, ensure_ascii=False)
        except RecursionError:  # a roadmap title nested thousands deep, kept as a heading
            text = json_stringify(entry.to_dict(), "  ")
        print(text)
        return 0
    heading = f" § {entry.heading_text}" if entry.heading_text else ""
    live = "live in the latest recorded store" if entry.live_in_latest else "no longer live"
    print(f"{entry.id}  {entry.area}: {entry.source}{heading}")
    print(f"first seen {entry.first_seen}, last live {entry.last_seen} ({live})")
    print()
    print(entry.text)
    return 0
