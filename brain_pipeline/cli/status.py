"""`brain-pipeline status`: what is live for the agent, and whether it is still current."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HELP = "show what is published (from manifest.json) and whether it is stale"
DESCRIPTION = """\
Show what is live for the agent, read from <publish root>/src/storage/manifest.json:
when it was published, chunks per area, vector model and coverage, evaluation
figures, artifact sha256s, whether the src and dist copies match the manifest, and
whether the corpus has changed since (content hashes; mtimes alone do not count).

Exit status: 0 published and consistent, 1 nothing published (or the manifest is
unreadable), 3 a published copy does not match its manifest.
"""

EXIT_NOTHING_PUBLISHED = 1
EXIT_COPY_MISMATCH = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root",
        type=Path,
        help="publish root (holds src/storage and dist/storage); default: from the config",
    )
    parser.add_argument(
        "--corpus", type=Path, help="corpus to compare against; default: from the config"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _resolve_paths(args: argparse.Namespace) -> tuple[Path, Path | None, str | None]:
    """Publish root and corpus root; config is only consulted for what was not given."""
    root: Path | None = args.root
    corpus: Path | None = args.corpus
    note: str | None = None
    if root is None or corpus is None:
        from brain_pipeline.config import ConfigError, CorpusNotFoundError, load_config

        try:
            cfg = load_config()
        except ConfigError as exc:
            if root is None:
                raise SystemExit(f"brain-pipeline status: {exc}") from None
            return root, corpus, f"configuration unreadable: {exc}"
        if root is None:
            root = cfg.publish_root()
        if corpus is None:
            try:
                corpus = cfg.corpus_root()
            except CorpusNotFoundError as exc:
                note = str(exc).splitlines()[0]
    return root, corpus, note


def _report(args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    from brain_pipeline.publishing.local import inspect_publication
    from brain_pipeline.publishing.manifest import compare_corpus

    root, corpus_root, corpus_note = _resolve_paths(args)
    publication = inspect_publication(root)
    if publication.manifest is None:
        message = publication.error or f"nothing published yet under {root}"
        return {"root": str(root), "published": False, "message": message}, EXIT_NOTHING_PUBLISHED
    manifest = publication.manifest
    corpus = compare_corpus(manifest.corpus_fingerprint, corpus_root)
    report = {
        "root": str(root),
        "published": True,
        "manifest": manifest.to_dict(),
        "copies": {
            str(c.directory): {"matches": c.matches, "problems": list(c.problems)}
            for c in publication.copies
        },
        "corpus": {
            "state": corpus.state,
            "root": str(corpus_root) if corpus_root else None,
            "recorded": manifest.corpus_fingerprint,
            "current": corpus.current,
            "detail": corpus_note if corpus_root is None and corpus_note else corpus.detail,
        },
    }
    return report, 0 if publication.consistent else EXIT_COPY_MISMATCH


def _render(report: dict[str, Any]) -> str:
    if not report["published"]:
        return str(report["message"])
    m = report["manifest"]
    run = f" (run {m['run_id']})" if m.get("run_id") else ""
    lines = [f"Published {m['published_at']}{run} under {report['root']}"]
    lines.append(f"Chunks: {m['chunk_count']}")
    width = max((len(a) for a in m["chunks_per_area"]), default=0)
    lines += [f"  {area:<{width}}  {n}" for area, n in sorted(m["chunks_per_area"].items())]
    if m.get("embeddings"):
        lines.append(
            f"Vectors: {m['embedding_model']} x {m['embedding_dimension']}, "
            f"{m['vectors_count']} vectors, coverage {m['vector_coverage']:.1%}"
        )
    else:
        lines.append(f"Vectors: none ({m.get('embeddings_note') or 'not published'})")
    if m.get("evaluation"):
        lines.append("Evaluation:")
        lines += [f"  {k}: {_figure(v)}" for k, v in _flat(m["evaluation"])]
    lines.append("Files:")
    for art in (m.get("embeddings"), m["store"]):
        if art:
            lines.append(f"  {art['filename']}  {art['size']} bytes  sha256 {art['sha256']}")
    lines.append("Copies:")
    for directory, check in report["copies"].items():
        state = (
            "matches manifest" if check["matches"] else "MISMATCH: " + "; ".join(check["problems"])
        )
        lines.append(f"  {directory}: {state}")
    corpus = report["corpus"]
    if corpus["state"] == "changed":
        lines.append(f"Corpus: CHANGED since publication ({corpus['root']}); re-run the pipeline")
    elif corpus["state"] == "unchanged":
        lines.append(f"Corpus: unchanged since publication ({corpus['root']})")
    else:
        lines.append(f"Corpus: unknown ({corpus['detail']})")
    return "\n".join(lines)


def _flat(data: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key in sorted(data):
        value = data[key]
        if isinstance(value, dict):
            rows += _flat(value, f"{prefix}{key}.")
        else:
            rows.append((f"{prefix}{key}", value))
    return rows


def run(args: argparse.Namespace) -> int:
    report, code = _report(args)
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        stream = sys.stderr if code == EXIT_NOTHING_PUBLISHED else sys.stdout
        print(_render(report), file=stream)
    return code


def _figure(value: object) -> str:
    """Counts as integers, rates to three decimals; anything else as it is."""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.3f}"
    return str(value)
