"""`brain-pipeline fixture`: keep the labelled fixture alive (check, repair, label)."""

from __future__ import annotations

import argparse
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: the core is imported inside run()
    from brain_pipeline.config import BrainConfig
    from brain_pipeline.corpus.store import Chunk
    from brain_pipeline.evaluation.fixture import Fixture
    from brain_pipeline.state.layout import StateLayout

HELP = "check, repair and extend the labelled retrieval fixture"
DESCRIPTION = """\
Chunk ids are content hashes: editing a labelled paragraph changes its id and the
blocking evaluation fails with "stale fixture". These commands explain and repair that.

  fixture check     list every stale label: query, area, the old text and its source
                    file (from the chunk history); exit 1 when any
  fixture repair    propose a replacement for each stale label; --write applies the
                    safe ones to the fixture file (layout kept, backup <file>.bak)
  fixture label     show BM25 and hybrid candidates for a query; --add ID... labels them

A label is stale when its id is not a live chunk of its query's area (a file moved to
another area counts). Old texts come from the chunk history in the build directory,
then from the published store (<publish root>/src/storage/knowledge-store.json), then
from any --old-store given.
"""

EXIT_STALE = 1
EXIT_UNUSABLE = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Everything after `fixture` is parsed in `run`, so building the top-level parser
    does not import the evaluation core (numpy) for every other command."""
    parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.usage = "brain-pipeline fixture {check,repair,label} ... (see --help)"


def build_parser() -> argparse.ArgumentParser:
    """The full `brain-pipeline fixture` parser (imports the repair defaults for its help)."""
    from brain_pipeline.evaluation.repair import MARGIN, MIN_SIMILARITY, SCORE_HELP, SPLIT_GAIN

    parser = argparse.ArgumentParser(
        prog="brain-pipeline fixture",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="fixture_command", metavar="ACTION")
    sub.required = True

    def common(child: argparse.ArgumentParser) -> None:
        child.add_argument("--store", metavar="DIR", help="store directory (default: build dir)")
        child.add_argument("--fixture", metavar="FILE", help="fixture (default: from the config)")
        child.add_argument("--json", action="store_true", help="machine-readable output")

    def old_store(child: argparse.ArgumentParser) -> None:
        child.add_argument(
            "--old-store",
            metavar="FILE",
            action="append",
            default=[],
            help="an older knowledge-store.json to read old texts from (repeatable)",
        )

    check = sub.add_parser(
        "check",
        help="list stale labels with their old text; exit 1 when any",
        description="List every stale label with its query, area, old text (from the chunk "
        "history) and source file. Exit 0 when none, 1 when any, 2 on unusable inputs.",
    )
    common(check)
    old_store(check)
    check.set_defaults(_action=_check)

    repair = sub.add_parser(
        "repair",
        help="propose (and with --write apply) replacements for stale labels",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="\n\n".join(
            textwrap.fill(paragraph, width=88)
            for paragraph in (
                "For each stale label, rank the live chunks of its old source file (then of "
                "its area, picked by BM25 over the old text, for moved files or when nothing "
                f"in the file is close) by {SCORE_HELP}.",
                "A replacement is applied only when its coverage is at least --min-similarity "
                f"(default {MIN_SIMILARITY}), it is ahead of the second candidate by at least "
                f"--margin (default {MARGIN}), and no two candidates together cover the old "
                f"text while each adds at least {SPLIT_GAIN} of it (a split paragraph goes to "
                "a person). Everything else is listed with its top three candidates and never "
                "applied.",
                "--write replaces the ids in the fixture's text (its hand-written layout is "
                'kept), adds one line to its "$comment" list saying what was remapped, keeps '
                "the previous file as <file>.bak and writes atomically. Exit 0 when no stale "
                "label remains, 1 when some need a person, 2 on unusable inputs.",
            )
        ),
    )
    common(repair)
    old_store(repair)
    repair.add_argument("--write", action="store_true", help="apply the safe replacements")
    repair.add_argument(
        "--min-similarity",
        type=float,
        default=MIN_SIMILARITY,
        metavar="X",
        help=f"minimum coverage to apply a replacement (default {MIN_SIMILARITY})",
    )
    repair.add_argument(
        "--margin",
        type=float,
        default=MARGIN,
        metavar="X",
        help=f"required lead over the second candidate (default {MARGIN})",
    )
    repair.set_defaults(_action=_repair)

    label = sub.add_parser(
        "label",
        help="show BM25 + hybrid candidates for a query; --add labels them",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="""\
Show the union of the BM25 and hybrid top lists for QUERY in AREA (rank in each, id,
source § heading, first lines) so a person can judge which passages answer it.
--add ID... labels those ids as relevant: the existing query (same text and area) is
extended, otherwise a new query is appended; the file's layout is kept, the previous
file is kept as <file>.bak, and the write is atomic. Hybrid embeds the query only when
the configured provider made the store's vectors; otherwise both lists are BM25's.""",
    )
    common(label)
    label.add_argument("query", help="the question, as a learner would ask it")
    label.add_argument("--area", required=True, help="the area the query is asked in")
    label.add_argument("--limit", type=int, default=20, metavar="N", help="per list (default 20)")
    label.add_argument("--add", nargs="+", metavar="ID", help="label these ids as relevant")
    label.set_defaults(_action=_label)
    return parser


def _fail(message: str) -> int:
    print(f"brain-pipeline fixture: {message}", file=sys.stderr)
    return EXIT_UNUSABLE


@dataclass
class _Inputs:
    cfg: BrainConfig
    layout: StateLayout
    chunks: list[Chunk]
    fixture: Fixture
    fixture_path: Path
    store_dir: Path
    fallback_stores: list[Path]


def _inputs(args: argparse.Namespace) -> _Inputs:
    """Configuration, live chunks and fixture; raises ValueError/OSError on unusable inputs."""
    from brain_pipeline.config import load_config
    from brain_pipeline.evaluation.fixture import load_fixture
    from brain_pipeline.evaluation.search import open_store
    from brain_pipeline.publishing.local import live_store_file
    from brain_pipeline.state.layout import StateLayout

    cfg = load_config()
    # The same store lookup (and missing-store message) as `search` and `eval`.
    opened = open_store(args.store or cfg.build_dir, build_dir=cfg.build_dir)
    fixture_path = Path(args.fixture) if args.fixture else cfg.evaluation.fixture
    fallbacks = [
        live_store_file(cfg.publish_root()),
        *(Path(p) for p in getattr(args, "old_store", []) or []),
    ]
    return _Inputs(
        cfg=cfg,
        layout=StateLayout.of(cfg.build_dir),
        chunks=opened.view.all_chunks(),
        fixture=load_fixture(fixture_path),
        fixture_path=fixture_path,
        store_dir=opened.directory,
        fallback_stores=fallbacks,
    )


def run(args: argparse.Namespace) -> int:
    from brain_pipeline.config import ConfigError
    from brain_pipeline.evaluation.fixture import FixtureError

    args = build_parser().parse_args(args.rest)
    try:
        inputs = _inputs(args)
    except (ConfigError, FixtureError, ValueError, OSError) as exc:
        return _fail(str(exc))
    return int(args._action(args, inputs))


def _check(args: argparse.Namespace, inputs: _Inputs) -> int:
    import json

    from brain_pipeline.corpus.store import heading_text
    from brain_pipeline.evaluation.repair import find_stale, old_chunk_of, old_chunks_for

    stale = find_stale(inputs.fixture, inputs.chunks)
    old = old_chunks_for(inputs.layout, (s.id for s in stale), inputs.fallback_stores)
    moved = {s.id for s in stale if s.live_in and s.id not in old}
    old.update({c.id: old_chunk_of(c) for c in inputs.chunks if c.id in moved})
    rows: list[dict[str, Any]] = []
    for s in stale:
        was = old.get(s.id)
        rows.append(
            {
                "query": s.query,
                "area": s.area,
                "id": s.id,
                "source": was.source if was else None,
                "heading": (heading_text(was.heading) or None) if was else None,
                "old_area": was.area if was else None,
                "last_seen": was.last_seen if was else None,
                "live_in": list(s.live_in),
                "old_text": was.text if was else None,
            }
        )
    if args.json:
        print(
            json.dumps(
                {"fixture": str(inputs.fixture_path), "stale": rows}, indent=2, ensure_ascii=False
            )
        )
    elif not rows:
        print(f"no stale labels: every id of {inputs.fixture_path} is live in its query's area")
    else:
        print(f"{len(rows)} stale label(s) in {inputs.fixture_path}:")
        for row in rows:
            print()
            print(f"{row['id']}  query {row['query']!r} ({row['area']})")
            if row["source"] is None:
                print("  old text unknown: not in the chunk history nor the published store")
            else:
                seen = f", last live {row['last_seen']}" if row["last_seen"] else ""
                heading = f" § {row['heading']}" if row["heading"] else ""
                print(f"  was in {row['source']}{heading} ({row['old_area']}){seen}")
                for line in str(row["old_text"]).splitlines():
                    print(f"  | {line}")
            if row["live_in"]:
                print(f"  still live in area {', '.join(row['live_in'])}: moved to another area?")
        print("\nrepair: brain-pipeline fixture repair   (--write to apply the safe ones)")
    return EXIT_STALE if rows else 0


def _repair(args: argparse.Namespace, inputs: _Inputs) -> int:
    from datetime import UTC, datetime

    from brain_pipeline.evaluation.fixture_edit import FixtureEditError
    from brain_pipeline.evaluation.repair import propose_for_build, write_repair

    if not 0.0 < args.min_similarity <= 1.0:
        return _fail("--min-similarity must be in (0, 1]")
    if not 0.0 <= args.margin <= 1.0:
        return _fail("--margin must be in [0, 1]")
    proposal = propose_for_build(
        inputs.layout,
        inputs.chunks,
        inputs.fixture,
        fallback_stores=inputs.fallback_stores,
        min_similarity=args.min_similarity,
        margin=args.margin,
    )
    print(proposal.to_json() if args.json else proposal.to_text())
    if not proposal.rows:
        return 0
    if not args.write:
        if proposal.remaps and not args.json:
            print(f"\napply the {len(proposal.remaps)} safe remap(s): {proposal.command}")
        return EXIT_STALE
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    try:
        written = write_repair(inputs.fixture_path, proposal, today)
    except (FixtureEditError, OSError) as exc:
        return _fail(f"nothing written: {exc}")
    if written.remaps:
        print(
            f"\nwrote {inputs.fixture_path}: remapped {len(written.remaps)} id(s); "
            f"previous version kept as {written.backup}",
            file=sys.stderr,
        )
    left = len(proposal.for_human)
    if left:
        print(f"{left} stale label(s) need a person (see above)", file=sys.stderr)
    return EXIT_STALE if left else 0


def _label(args: argparse.Namespace, inputs: _Inputs) -> int:
    from brain_pipeline.embedding.store_file import read_embeddings
    from brain_pipeline.evaluation.fixture_edit import FixtureEditError
    from brain_pipeline.evaluation.labeling import LabelError, add_labels, label_candidates
    from brain_pipeline.evaluation.service import choose_query_embedder
    from brain_pipeline.retrieval.vectors import EMBEDDINGS_FILENAME

    if args.add:
        try:
            added = add_labels(inputs.fixture_path, args.query, args.area, args.add, inputs.chunks)
        except (LabelError, FixtureEditError, OSError) as exc:
            return _fail(f"nothing written: {exc}")
        kept = f"; previous version kept as {added.backup}" if added.backup else ""
        print(f"{inputs.fixture_path}: {added.message}{kept}")
        return 0
    warnings: list[str] = []
    embeddings = read_embeddings(
        inputs.store_dir / EMBEDDINGS_FILENAME, warnings.append, mapped=True
    )
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    choice = choose_query_embedder(inputs.cfg, embeddings)
    try:
        found = label_candidates(
            inputs.chunks,
            args.query,
            args.area,
            fixture=inputs.fixture,
            embeddings=embeddings,
            query_embedder=choice.embed,
            query_model=choice.model,
            hybrid_note=choice.note,
            limit=args.limit,
        )
    except LabelError as exc:
        return _fail(str(exc))
    print(found.to_json() if args.json else found.to_text())
    if not args.json:
        print(
            f'\nlabel: brain-pipeline fixture label "{args.query}" --area {args.area} --add ID ...'
        )
    return 0
