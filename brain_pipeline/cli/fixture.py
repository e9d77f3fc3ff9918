"""`brain-pipeline fixture`: keep the labelled fixture alive (check, repair, label)."""

from __future__ import annotations

import argparse
import shlex
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain_pipeline.cli import CommandError

if TYPE_CHECKING:  # annotations only: the core is imported inside run()
    from brain_pipeline.config import BrainConfig
    from brain_pipeline.corpus.store import Chunk
    from brain_pipeline.evaluation.fixture.model import Fixture
    from brain_pipeline.evaluation.fixture.repair import RepairProposal
    from brain_pipeline.evaluation.store_search import OpenedStore

HELP = "start, check, repair and extend the labelled retrieval fixture"
DESCRIPTION = """\
The fixture lists questions a learner asks and the chunk ids that answer them; the
blocking evaluation scores retrieval on it. Chunk ids are content hashes: editing a
labelled paragraph changes its id and the evaluation fails with "stale fixture".

  fixture label     show BM25 and hybrid candidates for a query; --add ID... labels them
                    (creates the fixture file when there is none), --remove ID... unlabels
  fixture find      the ids of paragraphs containing a piece of text (by text, not rank)
  fixture show      the full text and provenance of chunk ids
  fixture check     list every stale label: query, area, the old text and its source
                    file (from the chunk history); exit 1 when any
  fixture repair    propose a replacement for each stale label; --write applies the
                    safe ones to the fixture file (layout kept, backup <file>.bak)

No `materialize` is needed first: unless --store is given, each command brings the build
directory's store up to date with the corpus (the pipeline's own cached ingest steps).
A label is stale when its id is not a live chunk of its query's area (a file moved to
another area counts; a query whose area was renamed follows its labels). Old texts come
from the chunk history in the build directory, then from the published store
(<publish root>/src/storage/knowledge-store.json), then from any --old-store given.
"""

EXIT_STALE = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Everything after `fixture` is parsed in `run`, so building the top-level parser
    does not import the evaluation core (numpy) for every other command."""
    parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.usage = "brain-pipeline fixture {label,find,show,check,repair} ... (see --help)"


def build_parser() -> argparse.ArgumentParser:
    """The full `brain-pipeline fixture` parser (imports the repair defaults for its help)."""
    from brain_pipeline.evaluation.fixture.repair import MARGIN, MIN_SIMILARITY, SPLIT_GAIN
    from brain_pipeline.evaluation.fixture.similarity import SCORE_HELP

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
    check.set_defaults(_action=_check, _needs_labels=True)

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
        "--follow-moves",
        action="store_true",
        help="also move queries whose labels all live in another area when their own "
        "area still exists (a renamed area is followed without it)",
    )
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
    repair.set_defaults(_action=_repair, _needs_labels=True)

    label = sub.add_parser(
        "label",
        help="show BM25 + hybrid candidates for a query; --add labels them",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="""\
Show the union of the BM25 and hybrid top lists for QUERY in AREA (rank in each, id,
source § heading, first lines) so a person can judge which passages answer it.
--add ID... labels those ids as relevant: the existing query (same text and area) is
extended, otherwise a new query is appended; when the fixture file does not exist it is
created with this first query. --remove ID... unlabels ids (a query left with none is
removed). The file's layout is kept, the previous file is kept as <file>.bak, and the
write is atomic. Hybrid embeds the query only when the configured provider made the
store's vectors; otherwise both lists are BM25's.""",
    )
    common(label)
    label.add_argument("query", help="the question, as a learner would ask it")
    label.add_argument("--area", required=True, help="the area the query is asked in")
    label.add_argument("--limit", type=int, default=20, metavar="N", help="per list (default 20)")
    label.add_argument("--add", nargs="+", metavar="ID", help="label these ids as relevant")
    label.add_argument("--remove", nargs="+", metavar="ID", help="unlabel these ids")
    label.set_defaults(_action=_label)

    find = sub.add_parser(
        "find",
        help="ids of the paragraphs containing TEXT (case and line breaks ignored)",
        description="List the live chunks whose text contains TEXT (case, spaces and line "
        "breaks ignored): the way to the id of an answer you know is there but that neither "
        "list of `fixture label` showed.",
    )
    common(find)
    find.add_argument("text", help="a piece of the paragraph's text")
    find.add_argument("--area", help="only this area (default: every area)")
    find.add_argument("--limit", type=int, default=20, metavar="N", help="at most (default 20)")
    find.set_defaults(_action=_find)

    show = sub.add_parser(
        "show",
        help="the full text, source and labels of chunk ids",
        description="Print each chunk's area, source § heading, full text and the queries "
        "that label it; an id no longer live is shown from the chunk history. Exit 1 when "
        "an id is unknown.",
    )
    common(show)
    show.add_argument("ids", nargs="+", metavar="ID", help="chunk ids")
    show.set_defaults(_action=_show)
    return parser


@dataclass
class _Inputs:
    cfg: BrainConfig
    chunks: list[Chunk]
    fixture: Fixture
    fixture_path: Path
    store: OpenedStore
    """The store the chunks were read from, its vectors and their warnings with it."""
    fallback_stores: list[Path]

    def proposal(self, **options: Any) -> RepairProposal:
        """What `fixture repair` proposes for these inputs (`check` lists the same labels)."""
        from brain_pipeline.evaluation.fixture.repair import propose_for_build

        return propose_for_build(
            self.cfg.layout,
            self.chunks,
            self.fixture,
            fallback_stores=self.fallback_stores,
            **options,
        )


START_HINT = 'brain-pipeline fixture label "QUESTION" --area AREA'


def _start_message(fixture: Fixture, path: Path) -> str | None:
    """One line for check/repair when there is nothing to check yet (never "materialize")."""
    if fixture.queries:
        return None
    state = "does not exist yet" if not path.exists() else "has no query yet"
    return (
        f"{path} {state}: start it with `{START_HINT}` (AREA: a top-level folder of the "
        "corpus; no materialize needed)"
    )


def _inputs(args: argparse.Namespace) -> _Inputs:
    """Configuration, live chunks and fixture; raises ValueError/OSError on unusable inputs.

    The fixture may be missing or empty here (labelling starts it); check and repair
    say how to start one. Unless --store names another store, the build directory's
    store is first brought up to date with the corpus, so no `materialize` is needed.
    """
    from brain_pipeline.config import load_config
    from brain_pipeline.evaluation.fixture.model import load_fixture_if_any
    from brain_pipeline.evaluation.store_search import open_store
    from brain_pipeline.publishing.local import live_store_file
    from brain_pipeline.steps.refresh_store import BUILT, UPDATED, refresh_build_store

    cfg = load_config()
    fixture_path = Path(args.fixture) if args.fixture else cfg.evaluation.fixture
    fixture = load_fixture_if_any(fixture_path)
    start = _start_message(fixture, fixture_path)
    if start and getattr(args, "_needs_labels", False):
        raise ValueError(start)  # before building anything: one line, at once
    published = live_store_file(cfg.publish_root())
    if not args.store:
        refreshed = refresh_build_store(cfg)
        if refreshed.note:
            print(f"note: {refreshed.note}", file=sys.stderr)
        elif refreshed.status in (BUILT, UPDATED):
            print(
                f"note: {refreshed.status} {refreshed.store_file} from the corpus", file=sys.stderr
            )
    # The same store lookup (and missing-store message) as `search` and `eval`.
    opened = open_store(args.store or cfg.build_dir, build_dir=cfg.build_dir)
    fallbacks = [published, *(Path(p) for p in getattr(args, "old_store", []) or [])]
    return _Inputs(
        cfg=cfg,
        chunks=opened.view.all_chunks(),
        fixture=fixture,
        fixture_path=fixture_path,
        store=opened,
        fallback_stores=fallbacks,
    )


def run(args: argparse.Namespace) -> int:
    from brain_pipeline.evaluation.fixture.labeling import LabelError
    from brain_pipeline.steps.refresh_store import StoreRefreshError

    args = build_parser().parse_args(args.rest)
    try:
        inputs = _inputs(args)
    except (StoreRefreshError, ValueError, OSError) as exc:
        raise CommandError(exc) from None
    try:
        return int(args._action(args, inputs))
    except LabelError as exc:  # a request the store cannot answer (no such area, ...)
        raise CommandError(exc) from None


def _check(args: argparse.Namespace, inputs: _Inputs) -> int:
    import json

    from brain_pipeline.corpus.store import heading_text
    from brain_pipeline.evaluation.fixture.repair_render import proposal_dict

    proposal = inputs.proposal()
    if proposal.foreign is not None:
        if args.json:
            print(json.dumps({"fixture": str(inputs.fixture_path), **proposal_dict(proposal)}))
        else:
            print("\n".join(proposal.next_steps()))
        return EXIT_STALE
    rows: list[dict[str, Any]] = []
    for s in proposal.stale:
        was = proposal.old.get(s.id)
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
                {
                    "fixture": str(inputs.fixture_path),
                    "stale": rows,
                    "next_steps": proposal.next_steps() if rows else [],
                },
                indent=2,
                ensure_ascii=False,
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
                _print_text(row["old_text"])
            if row["live_in"]:
                print(f"  still live in area {', '.join(row['live_in'])}")
        print(f"\n{proposal.summary()}; next:")
        for step in proposal.next_steps():
            print(f"  {step}")
    return EXIT_STALE if rows else 0


def _repair(args: argparse.Namespace, inputs: _Inputs) -> int:
    from brain_pipeline.evaluation.fixture.edit import FixtureEditError
    from brain_pipeline.evaluation.fixture.repair import write_repair
    from brain_pipeline.evaluation.fixture.repair_render import proposal_json, proposal_text

    if not 0.0 < args.min_similarity <= 1.0:
        raise CommandError("--min-similarity must be in (0, 1]")
    if not 0.0 <= args.margin <= 1.0:
        raise CommandError("--margin must be in [0, 1]")
    proposal = inputs.proposal(
        min_similarity=args.min_similarity, margin=args.margin, follow_moves=args.follow_moves
    )
    print(proposal_json(proposal) if args.json else proposal_text(proposal))
    if proposal.foreign is not None:
        return EXIT_STALE
    if not proposal.rows:
        return 0
    if not args.write:
        if not args.json:
            print("\nnext:")
            for step in proposal.next_steps():
                print(f"  {step}")
        return EXIT_STALE
    try:
        written = write_repair(inputs.fixture_path, proposal, _today())
    except (FixtureEditError, OSError) as exc:
        raise CommandError(f"nothing written: {exc}") from None
    if written.remaps or written.moves:
        print(
            f"\nwrote {inputs.fixture_path}: remapped {len(written.remaps)} id(s), moved "
            f"{len(written.moves)} query(ies) to their labels' area; previous version kept "
            f"as {written.backup}",
            file=sys.stderr,
        )
    human = [step for step in proposal.next_steps() if not step.startswith("apply ")]
    if human:
        print(f"{len(proposal.for_human)} stale label(s) need a person:", file=sys.stderr)
        for step in human:
            print(f"  {step}", file=sys.stderr)
    return EXIT_STALE if proposal.for_human else 0


def _today() -> str:
    """The date a fixture edit records in its "$comment" line (UTC, so every machine
    writes the same day for the same moment)."""
    from datetime import UTC, datetime

    return datetime.now(UTC).strftime("%Y-%m-%d")


def _label(args: argparse.Namespace, inputs: _Inputs) -> int:
    from brain_pipeline.embedding.factory import choose_query_embedder
    from brain_pipeline.evaluation.fixture.edit import FixtureEditError
    from brain_pipeline.evaluation.fixture.labeling import LabelError, edit_labels, label_candidates

    if args.add or args.remove:
        try:
            edited = edit_labels(
                inputs.fixture_path,
                args.query,
                args.area,
                inputs.chunks,
                add=args.add or (),
                remove=args.remove or (),
                when=_today(),
            )
        except (LabelError, FixtureEditError, OSError) as exc:
            raise CommandError(f"nothing written: {exc}") from None
        kept = f"; previous version kept as {edited.backup}" if edited.backup else ""
        print(f"{inputs.fixture_path}: {edited.message}{kept}")
        if edited.created and inputs.fixture_path != inputs.cfg.evaluation.fixture:
            print(
                f"note: the evaluation reads {inputs.cfg.evaluation.fixture}; point "
                f"evaluation.fixture (or BRAIN_EVAL_FIXTURE) at {inputs.fixture_path}",
                file=sys.stderr,
            )
        return 0
    embeddings = inputs.store.embeddings
    for warning in inputs.store.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    choice = choose_query_embedder(inputs.cfg, embeddings)
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
    print(found.to_json() if args.json else found.to_text())
    if not args.json:
        query = shlex.quote(args.query)
        area = shlex.quote(args.area)
        print(f"\nlabel: brain-pipeline fixture label {query} --area {area} --add ID ...")
        print("read one: brain-pipeline fixture show ID")
        print(f'not listed: brain-pipeline fixture find "A PIECE OF ITS TEXT" --area {area}')
    return 0


def _find(args: argparse.Namespace, inputs: _Inputs) -> int:
    import json
    from dataclasses import asdict

    from brain_pipeline.evaluation.fixture.labeling import find_by_text

    found = find_by_text(inputs.chunks, args.text, args.area, args.limit)
    if args.json:
        print(json.dumps([asdict(f) for f in found], indent=2, ensure_ascii=False))
        return 0 if found else 1
    where = f"area {args.area}" if args.area else "any area"
    if not found:
        print(
            f"no chunk of {where} contains {args.text!r}: try a shorter piece of the "
            "paragraph, or search by meaning with `brain-pipeline fixture label`",
            file=sys.stderr,
        )
        return 1
    for f in found:
        heading = f" § {f.heading}" if f.heading else ""
        print(f"{f.id}  {f.area}  {f.source}{heading}")
        print(f"    {f.excerpt}")
    more = " (the first; raise --limit for more)" if len(found) == args.limit else ""
    print(f"\n{len(found)} chunk(s) of {where} contain it{more}.")
    return 0


def _print_text(text: str) -> None:
    """A chunk's text, each line behind a bar (escaped: a CR must not start a line)."""
    from brain_pipeline.utils.terminal import printable

    for line in printable(text).splitlines():
        print(f"  | {line}")


def _show(args: argparse.Namespace, inputs: _Inputs) -> int:
    import json

    from brain_pipeline.corpus.store import heading_text
    from brain_pipeline.evaluation.fixture.stale import old_chunk_of, old_chunks_for

    live: dict[str, list[Chunk]] = {}
    for chunk in inputs.chunks:
        if chunk.id in args.ids:
            live.setdefault(chunk.id, []).append(chunk)
    past = old_chunks_for(inputs.cfg.layout, [i for i in args.ids if i not in live])
    rows: list[dict[str, Any]] = []
    for key in dict.fromkeys(args.ids):
        labels = [
            {"query": q.query, "area": q.area} for q in inputs.fixture.queries if key in q.relevant
        ]
        was = old_chunk_of(live[key][0]) if key in live else past.get(key)
        if was is None:
            rows.append({"id": key, "live": False, "unknown": True, "labelled_for": labels})
            continue
        row = {
            "id": key,
            "live": key in live,
            "areas": [c.area for c in live[key]] if key in live else [was.area],
            "source": was.source,
            "heading": heading_text(was.heading),
            "text": was.text,
            "labelled_for": labels,
        }
        rows.append(row if key in live else {**row, "last_seen": was.last_seen})
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
    else:
        for i, row in enumerate(rows):
            if i:
                print()
            if row.get("unknown"):
                print(
                    f"{row['id']}: no such chunk, live or in the history of "
                    f"{inputs.cfg.layout.build_dir}; find ids with `brain-pipeline fixture find`"
                )
                continue
            heading = f" § {row['heading']}" if row["heading"] else ""
            state = "" if row["live"] else f"  [not live; last live {row.get('last_seen')}]"
            print(f"{row['id']}  {', '.join(row['areas'])}  {row['source']}{heading}{state}")
            _print_text(row["text"])
            for label in row["labelled_for"]:
                print(f"  labelled for {label['query']!r} ({label['area']})")
    return 1 if any(row.get("unknown") for row in rows) else 0
