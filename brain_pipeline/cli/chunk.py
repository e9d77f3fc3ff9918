"""`brain-pipeline chunk`: build knowledge-store.json from a corpus, without Dagster."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from brain_pipeline.cli import CommandError, configuration

if TYPE_CHECKING:
    from brain_pipeline.corpus.junk import IngestLimits

HELP = "chunk a corpus into knowledge-store.json (no Dagster, no embeddings)"

DESCRIPTION = """\
Walk CORPUS_DIR (every top-level folder is an area), split its Markdown/text files
into paragraphs and its roadmap JSON into statements, de-duplicate by content id and
write knowledge-store.json exactly as the original ingest script did. The file is
replaced atomically and left untouched when its bytes would not change.

Binary files and files over corpus.max_file_bytes are skipped, paragraphs over
corpus.max_paragraph_chars are kept; each is reported. A one-line summary and any
problems (malformed roadmaps, unreadable or junk files, refused symlinks, ...) go to
stderr. Exit status: 0 on success, 2 when the corpus is missing or the configuration
is unusable. With CORPUS_DIR the configuration is not read: the limits are the
defaults or the options below.
"""

DEFAULT_OUTPUT = "knowledge-store.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "corpus",
        metavar="CORPUS_DIR",
        nargs="?",
        help="corpus root (default: the corpus configured in corpus_config.yaml)",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="OUT.json",
        default=DEFAULT_OUTPUT,
        help=f"where to write the store (default: ./{DEFAULT_OUTPUT})",
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="print only the summary, not each problem"
    )
    parser.add_argument(
        "--max-file-bytes",
        type=int,
        metavar="N",
        help="skip larger files (default: corpus.max_file_bytes, 10,000,000)",
    )
    parser.add_argument(
        "--max-paragraph-chars",
        type=int,
        metavar="N",
        help="report longer paragraphs (default: corpus.max_paragraph_chars, 20,000)",
    )


def _limits(args: argparse.Namespace, configured: IngestLimits) -> IngestLimits:
    """The configured junk limits, with the command line's overrides."""
    from brain_pipeline.corpus.junk import IngestLimits

    return IngestLimits(
        args.max_file_bytes if args.max_file_bytes is not None else configured.max_file_bytes,
        args.max_paragraph_chars
        if args.max_paragraph_chars is not None
        else configured.max_paragraph_chars,
    )


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    from brain_pipeline.corpus.discovery import CorpusNotFoundError
    from brain_pipeline.corpus.file_chunks import ingest_corpus
    from brain_pipeline.corpus.junk import DEFAULT_LIMITS
    from brain_pipeline.utils.atomic import write_if_changed

    # With CORPUS_DIR the configuration (slower to import) is not needed.
    cfg = configuration() if args.corpus is None else None
    try:
        if cfg is None:
            root, limits = Path(args.corpus), _limits(args, DEFAULT_LIMITS)
        else:
            root, limits = cfg.corpus_root(), _limits(args, cfg.ingest_limits())
    except ValueError as exc:  # a limit that is not positive
        raise CommandError(exc) from None
    except Exception as exc:  # no corpus configured: say it plainly, no traceback
        raise CommandError(f"no corpus: {exc}") from None
    try:
        result = ingest_corpus(root, limits)
    except CorpusNotFoundError as exc:
        raise CommandError(exc) from None
    output = Path(args.output)
    changed = write_if_changed(output, result.store_bytes())
    if not args.quiet:
        for source, reason in result.problems:
            print(f"  problem: {source}: {reason}", file=sys.stderr)
    elapsed = time.perf_counter() - started
    print(
        f"chunk: {result.files_seen} files, {len(result.chunks)} chunks, "
        f"{result.duplicates_collapsed} duplicates collapsed, {len(result.problems)} problems, "
        f"{elapsed:.2f}s -> {output}{'' if changed else ' (unchanged)'}",
        file=sys.stderr,
    )
    return 0
