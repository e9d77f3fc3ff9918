"""`brain-pipeline search`: ask a built store what the agent would retrieve."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from brain_pipeline.cli import CommandError, configuration

if TYPE_CHECKING:  # annotations only: the core is imported inside run()
    from brain_pipeline.retrieval.hybrid import Retriever

HELP = "search a built store as the agent does (hybrid or lexical)"
DESCRIPTION = """\
Print the passages the agent would retrieve for QUERY in AREA, each under a provenance
line `--- passage N — source § heading ---`.

Hybrid search embeds the query with the configured provider, but only when that provider
made the store's embeddings.bin; otherwise (and whenever the dense side fails) it answers
with BM25 and says why on stderr.

Batch mode: --queries FILE.jsonl (one {"qid", "query", "area"} per line, "-" for stdin)
prints one {"qid", "ids", "scores"} line per query on stdout.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", nargs="?", help="the question to search for")
    parser.add_argument("--area", help="the area to search (required for a single query)")
    parser.add_argument("--store", metavar="DIR", help="store directory (default: build dir)")
    parser.add_argument(
        "--mode", choices=("hybrid", "lexical"), help="default: retrieval.mode from the config"
    )
    parser.add_argument("--limit", type=int, default=10, metavar="N", help="passages (default 10)")
    parser.add_argument("--queries", metavar="FILE", help="batch of JSON-lines queries")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _note(message: str) -> None:
    print(f"note: {message}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from brain_pipeline.embedding.factory import choose_query_embedder
    from brain_pipeline.evaluation.store_search import (
        BatchFormatError,
        StoreNotFoundError,
        open_store,
    )
    from brain_pipeline.retrieval.hybrid import Retriever

    if (args.query is None) == (args.queries is None):
        raise CommandError("give either QUERY or --queries FILE")
    if args.query is not None and not args.area:
        raise CommandError("--area is required with a QUERY")
    if args.limit < 1:
        raise CommandError("--limit must be at least 1")
    cfg = configuration()
    try:
        opened = open_store(args.store or cfg.build_dir, build_dir=cfg.build_dir)
    except (StoreNotFoundError, ValueError) as exc:
        raise CommandError(exc) from None
    for warning in opened.warnings:
        print(f"warning: {warning}", file=sys.stderr)

    mode = args.mode or cfg.retrieval.mode
    embed, model = None, None
    if mode == "hybrid":
        choice = choose_query_embedder(cfg, opened.embeddings)
        if choice.note:
            _note(f"searching lexically: {choice.note}")
            mode = "lexical"
        embed, model = choice.embed, choice.model
    # The memory-mapped store and cached BM25 indexes: one query decodes only its hits.
    retriever = Retriever(opened.source(), opened.embeddings, embed, query_model=model)

    try:
        if args.queries is not None:
            return _batch(retriever, args, mode)
    except (BatchFormatError, OSError) as exc:
        raise CommandError(exc) from None
    return _single(retriever, args, mode)


def _single(retriever: Retriever, args: argparse.Namespace, mode: str) -> int:
    import json

    from brain_pipeline.evaluation.store_search import hits_as_json, render_passages

    if args.area not in retriever.areas():
        known = ", ".join(retriever.areas()) or "(none: the store is empty)"
        raise CommandError(f"no area {args.area!r}; areas: {known}")
    result = retriever.search(args.query, args.area, limit=args.limit, mode=mode)
    if result.fallback:
        _note(f"hybrid fell back to BM25: {result.fallback}")
    if args.json:
        answer = {
            "query": args.query,
            "area": args.area,
            "mode": result.mode,
            "fallback": result.fallback,
            "hits": hits_as_json(result.hits),
        }
        print(json.dumps(answer, ensure_ascii=False, indent=2))
    elif result.hits:
        print(render_passages(result.hits))
    else:
        _note("no passage matches")
    return 0


def _batch(retriever: Retriever, args: argparse.Namespace, mode: str) -> int:
    import json
    from collections import Counter
    from pathlib import Path

    from brain_pipeline.evaluation.store_search import parse_batch, run_batch

    if args.queries == "-":
        queries = parse_batch(sys.stdin, "<stdin>", args.area)
    else:
        with Path(args.queries).open(encoding="utf-8") as handle:
            queries = parse_batch(handle, args.queries, args.area)
    unknown = sorted({q.area for q in queries} - set(retriever.areas()))
    if unknown:
        _note(f"area(s) not in the store, answered with no ids: {', '.join(unknown)}")
    fallbacks: Counter[str] = Counter()
    for line, fallback in run_batch(retriever, queries, mode, args.limit):
        if fallback:
            fallbacks[fallback] += 1
        print(json.dumps(line, ensure_ascii=False))
    for reason, count in fallbacks.most_common():
        _note(f"hybrid fell back to BM25 for {count}/{len(queries)} queries: {reason}")
    return 0
