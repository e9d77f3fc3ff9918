"""`brain-pipeline bench`: retrieval quality and speed on a BEIR-layout collection."""

from __future__ import annotations

import argparse
import sys

from brain_pipeline.cli import CommandError, configuration

HELP = "benchmark retrieval on a BEIR-layout dataset (e.g. SciFact)"
DESCRIPTION = """\
Index a BEIR-layout collection (corpus.jsonl, queries.jsonl, qrels.tsv) with each
document as `title + " " + text`, run its judged queries and print nDCG@10, Recall@10,
Recall@100, MRR@10, index build seconds and queries per second. Lexical queries/s are
warm: the median of 3 timed passes over the queries (top 100, one at a time) after a
warm-up pass; dense and hybrid time the one pass that gives the @10 figures.

Dense and hybrid embed the documents with the configured provider (the local model when
no Gemini key is set) and cache the vectors in <build dir>/bench/<dataset>/embeddings.bin,
so a second run embeds nothing.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", metavar="DATASET_DIR", help="BEIR-layout directory")
    parser.add_argument(
        "--mode",
        choices=("lexical", "hybrid", "dense"),
        default="lexical",
        help="retrieval mode (default lexical)",
    )
    parser.add_argument("--split", default="test", help="qrels/queries split (default test)")
    parser.add_argument(
        "--provider",
        choices=("local", "gemini"),
        help="embedder for dense/hybrid (default: the configured one, else local)",
    )
    parser.add_argument(
        "--cache",
        metavar="FILE",
        help="document vectors file (default <build dir>/bench/<dataset>/embeddings.bin)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")


def _progress(done: int, total: int) -> None:
    print(f"\rembedding documents: {done}/{total}", end="", file=sys.stderr, flush=True)
    if done >= total:
        print(file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from brain_pipeline.evaluation.beir import BeirFormatError, load_beir, run_bench
    from brain_pipeline.retrieval.vectors import EMBEDDINGS_FILENAME

    try:
        dataset = load_beir(args.dataset, args.split)
    except (BeirFormatError, OSError) as exc:
        raise CommandError(exc) from None

    embedder = None
    cache = None
    embedding_errors: tuple[type[Exception], ...] = ()
    if args.mode != "lexical":
        from brain_pipeline.embedding.factory import embedder_for
        from brain_pipeline.embedding.protocol import EmbeddingError

        embedding_errors = (EmbeddingError,)
        cfg = configuration()
        try:
            configured = cfg.effective_provider()
            # The benchmark needs vectors: "none" means the offline model here.
            cfg.embedding.provider = args.provider or (
                configured if configured != "none" else "local"
            )
            embedder = embedder_for(cfg)
        except (EmbeddingError, ValueError) as exc:
            raise CommandError(exc) from None
        cache = (
            Path(args.cache)
            if args.cache
            else cfg.build_dir / "bench" / dataset.name / EMBEDDINGS_FILENAME
        )

    def log(message: str) -> None:
        print(message, file=sys.stderr)

    try:
        result = run_bench(
            dataset, args.mode, embedder=embedder, cache_path=cache, progress=_progress, log=log
        )
    except embedding_errors as exc:  # messages name the cause, never a key
        raise CommandError(exc, 1) from None
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.to_text())
    return 0
