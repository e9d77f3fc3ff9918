"""`brain-pipeline status`: what is live for the agent, and whether it is still current.

Exit codes, one table for the whole project (scripts and monitoring rely on them; when
several apply, the first in this order wins: 4, 1, 3, 5, 6, 2):

| code | meaning                                                                     |
|------|-----------------------------------------------------------------------------|
| 0    | live and current: every copy matches its manifest, the corpus is unchanged  |
|      | (or the manifest predates corpus digests), and with `--s3` the bucket  |
|      | holds the same set (manifest, named objects and fixed names, by SHA-256)    |
| 1    | nothing published under the publish root                                    |
| 2    | stale: the corpus changed (content hashes) since the live set was built     |
| 3    | a copy does not match its manifest (missing, edited or unreadable files)    |
| 4    | a publication commit was interrupted and is pending recovery; the next      |
|      | pipeline run completes or undoes it (status only reports, never recovers)   |
| 5    | `--s3` only: the bucket differs from the local set or cannot be reached     |
|      | within `publish.s3.deadline_seconds`                                        |
| 6    | the corpus cannot be read (missing, not a folder, unreadable): whether the  |
|      | live set is current is unknown                                              |
| 64   | the configuration cannot be read (no publish root known)                    |

argparse's own usage errors (an unknown flag) exit 2 before anything is checked.
`status` is read-only: it never writes, sweeps or recovers anything.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from brain_pipeline.cli import CommandError, configuration

HELP = "show what is published (from manifest.json) and whether it is stale"
DESCRIPTION = """\
Show what is live for the agent, read from <publish root>/src/storage/manifest.json:
when it was published, chunks per area, vector model and coverage, the evaluation
verdict it was published on (and whether the publication was forced), evaluation
figures, artifact sha256s, whether the src and dist copies match the manifest, and
whether the corpus has changed since (content hashes; mtimes alone do not count).

With --s3, also compare the bucket's manifest, the objects it names and the fixed
names (knowledge-store.json, embeddings.bin) with the local set by SHA-256, within
publish.s3.deadline_seconds.

Exit status (when several apply, the first of 4, 1, 3, 5, 6, 2 wins):
  0  live and current
  1  nothing published
  2  stale: the corpus changed since publication
  3  a copy does not match its manifest
  4  a publication commit is pending recovery (the next run finishes it)
  5  --s3: the bucket differs or cannot be reached
  6  the corpus cannot be read: currency unknown
  64 the configuration cannot be read
"""

EXIT_CURRENT = 0
EXIT_NOTHING_PUBLISHED = 1
EXIT_STALE = 2
EXIT_COPY_MISMATCH = 3
EXIT_PENDING_RECOVERY = 4
EXIT_BUCKET_DIFFERS = 5
EXIT_CORPUS_UNREADABLE = 6
EXIT_CONFIG = 64


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root",
        type=Path,
        help="publish root (holds src/storage and dist/storage); default: from the config",
    )
    parser.add_argument(
        "--corpus", type=Path, help="corpus to compare against; default: from the config"
    )
    parser.add_argument(
        "--s3",
        action="store_true",
        help="also compare the bucket (publish.s3.*) with the local publication",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _resolve_paths(args: argparse.Namespace) -> tuple[Path, Path | None, str | None, Any]:
    """Publish root, corpus root, a note, and the config (None when not needed)."""
    root: Path | None = args.root
    corpus: Path | None = args.corpus
    note: str | None = None
    cfg: Any = None
    if root is None or corpus is None or args.s3:
        from brain_pipeline.config import CorpusNotFoundError

        try:
            cfg = configuration()
        except CommandError as exc:
            if root is None or args.s3:
                raise  # needed: exit 64 (EXIT_CONFIG), said in the report
            return root, corpus, f"configuration unreadable: {exc}", None
        if root is None:
            root = cfg.publish_root()
        if corpus is None:
            try:
                corpus = cfg.corpus_root()
            except CorpusNotFoundError as exc:
                note = str(exc).splitlines()[0]
    return root, corpus, note, cfg


def _check_s3(cfg: Any, manifest: Any) -> dict[str, Any]:
    """Compare the configured bucket with the local manifest (reads only, bounded)."""
    s3 = cfg.publish.s3
    if not s3.bucket:
        return {
            "checked": False,
            "matches": False,
            "problems": ["no bucket configured (publish.s3.bucket / S3_BUCKET_NAME)"],
        }
    from brain_pipeline.publishing.s3 import inspect_s3
    from brain_pipeline.publishing.s3_client import S3Protection, S3Timeouts

    check = inspect_s3(
        manifest,
        bucket=s3.bucket,
        prefix=s3.prefix,
        region=s3.region,
        endpoint_url=s3.endpoint_url,
        include_embeddings=s3.include_embeddings,
        timeouts=S3Timeouts.from_settings(s3),
        protection=S3Protection.from_settings(s3),
    )
    return {
        "checked": True,
        "location": check.location,
        "reachable": check.reachable,
        "matches": check.matches,
        "problems": list(check.problems),
    }


def _report(args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    from brain_pipeline.publishing.local import inspect_publication
    from brain_pipeline.publishing.manifest import compare_corpus

    try:
        root, corpus_root, corpus_note, cfg = _resolve_paths(args)
    except CommandError as exc:
        return {"published": None, "message": f"brain-pipeline status: {exc}"}, EXIT_CONFIG
    publication = inspect_publication(root)
    pending = (
        {"commit": publication.pending.commit_id, "message": publication.pending.describe()}
        if publication.pending is not None
        else None
    )
    if publication.manifest is None:
        message = publication.error or f"nothing published yet under {root}"
        if pending is not None:
            message = f"{message}; {pending['message']}"
            code = EXIT_PENDING_RECOVERY
        else:
            code = EXIT_COPY_MISMATCH if publication.error else EXIT_NOTHING_PUBLISHED
        empty = {"root": str(root), "published": False, "message": message, "pending": pending}
        if cfg is not None:
            empty["notifications"] = _undelivered_notifications(cfg)
        return empty, code
    manifest = publication.manifest
    corpus = compare_corpus(
        manifest.corpus_digest,
        corpus_root,
        cfg.build_dir if cfg is not None else None,
        cfg.ingest_limits() if cfg is not None else None,
    )
    report: dict[str, Any] = {
        "root": str(root),
        "published": True,
        "pending": pending,
        "manifest": manifest.to_dict(),
        "copies": {
            str(c.directory): {"matches": c.matches, "problems": list(c.problems)}
            for c in publication.copies
        },
        "corpus": {
            "state": corpus.state,
            "root": str(corpus_root) if corpus_root else None,
            "recorded": manifest.corpus_digest,
            "current": corpus.current,
            "detail": corpus_note if corpus_root is None and corpus_note else corpus.detail,
        },
    }
    report["verdict"] = _published_verdict(cfg, manifest) if cfg is not None else None
    if cfg is not None:
        report["embedding_gaps"] = _embedding_gaps(cfg)
    if args.s3:
        report["s3"] = _check_s3(cfg, manifest)
    if cfg is not None:
        report["history"] = _history(cfg)
        report["notifications"] = _undelivered_notifications(cfg)
    return report, _exit_code(report, publication.consistent)


# ---- notifications not delivered (issue 40): a separate block, read-only --------------


def _undelivered_notifications(cfg: Any) -> list[dict[str, Any]]:
    """Run messages no endpoint accepted: given up (`failed`) or still being retried
    (`pending`), newest first, from the ledger's delivery records."""
    from brain_pipeline.config import memory_of
    from brain_pipeline.publishing.run_alerts import alerts_ledger, undelivered

    return [
        {"run_id": r.run_id, "state": r.state, "tries": r.tries, "message": r.describe()}
        for r in undelivered(alerts_ledger(memory_of(cfg)))
    ]


def _notification_lines(report: dict[str, Any]) -> list[str]:
    return [f"notification: {n['message']}" for n in report.get("notifications") or []]


def _history(cfg: Any) -> dict[str, Any]:
    """The live publication's id and the rollback hold, from the shared history."""
    from brain_pipeline.config import memory_of
    from brain_pipeline.publishing.publication_log import HistoryError, read_history
    from brain_pipeline.state.ledger import LedgerError

    try:
        history = read_history(memory_of(cfg))
    except (HistoryError, LedgerError) as exc:
        return {"live": None, "hold": None, "error": str(exc)}
    live = history.live()
    hold = history.hold()
    return {
        "live": live.to_dict() if live else None,
        "hold": {"publication": hold.publication, "since": hold.when, "message": hold.describe()}
        if hold
        else None,
        "error": None,
    }


def _published_verdict(cfg: Any, manifest: Any) -> dict[str, Any] | None:
    """The evaluation verdict the live store was published on, and the gate's decision,
    as `published_local` recorded them in the build directory; None when that record is
    of other bytes (or missing, or written before verdicts were kept)."""
    from brain_pipeline.config import memory_of
    from brain_pipeline.evaluation.service import stored_verdict
    from brain_pipeline.state.records import read_record

    record = read_record(memory_of(cfg), "published_local")
    if record is None or record.facts.get("store_sha256") != manifest.store.sha256:
        return None
    verdict = stored_verdict(record.facts)
    if verdict is None:
        return None
    return {
        **verdict.to_dict(),
        "headline": verdict.headline(),
        "decision": record.facts.get("decision"),
        "forced": bool(record.facts.get("forced")),
    }
def _embedding_gaps(cfg: Any) -> dict[str, int]:
    """How many chunks of the last build have no vector, or a truncated one."""
    from brain_pipeline.config import memory_of
    from brain_pipeline.embedding.gaps import read_gaps

    gaps = read_gaps(memory_of(cfg))
    truncated = sum(1 for g in gaps.values() if g.has_vector)
    return {"without_vector": len(gaps) - truncated, "truncated": truncated}


def _exit_code(report: dict[str, Any], consistent: bool) -> int:
    """The one table (see the module docstring), most severe first."""
    if report.get("pending"):
        return EXIT_PENDING_RECOVERY
    if not consistent:
        return EXIT_COPY_MISMATCH
    if "s3" in report and not report["s3"]["matches"]:
        return EXIT_BUCKET_DIFFERS
    corpus = report["corpus"]
    if corpus["state"] == "unknown" and corpus["recorded"] is not None:
        return EXIT_CORPUS_UNREADABLE  # never "live and current" on a corpus not read
    if corpus["state"] == "changed":
        return EXIT_STALE
    return EXIT_CURRENT


def _render(report: dict[str, Any]) -> str:
    if not report["published"]:
        return "\n".join([str(report["message"]), *_notification_lines(report)])
    m = report["manifest"]
    run = f" (run {m['run_id']})" if m.get("run_id") else ""
    lines = []
    if report.get("pending"):
        lines.append(f"PENDING RECOVERY: {report['pending']['message']}")
    lines.append(f"Published {m['published_at']}{run} under {report['root']}")
    history = report.get("history") or {}
    if history.get("live"):
        live = history["live"]
        how = f", a rollback to #{live['restores']}" if live.get("restores") else ""
        lines.append(f"Publication: #{live['id']}{how} (brain-pipeline publications)")
        if live.get("forced"):  # a person overrode its blocking checks: said, with why
            forced = live["forced"]
            lines.append(
                f"FORCED: published over {forced.get('overrode') or 'its blocking checks'} "
                f"(reason: {forced.get('reason') or 'none given'})"
            )
    if history.get("hold"):
        lines.append(f"HELD: {history['hold']['message']}")
    if history.get("error"):
        lines.append(f"Publication history: {history['error']}")
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
    verdict = report.get("verdict")
    if verdict:
        lines.append(f"Verdict: {verdict['severity']}: {verdict['headline']}")
        if verdict.get("forced"):
            lines.append(f"  {verdict['decision']}")
    gaps = report.get("embedding_gaps")
    if gaps and (gaps["without_vector"] or gaps["truncated"]):
        lines.append(
            f"  last build: {gaps['without_vector']} chunk(s) without a vector (refused, "
            f"skipped or invalid), {gaps['truncated']} truncated; they stay lexical or "
            "head-only (the embedding_gaps check lists them; materialize --retry-refused)"
        )
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
    elif corpus["recorded"] is None:
        lines.append(f"Corpus: unknown ({corpus['detail']})")
    else:
        lines.append(f"Corpus: CANNOT BE READ, currency unknown ({corpus['detail']})")
    s3 = report.get("s3")
    if s3 is not None:
        if s3["matches"]:
            lines.append(f"S3: {s3['location']} holds the same set")
        elif s3.get("checked") and not s3["reachable"]:
            lines.append(f"S3: UNREACHABLE: {'; '.join(s3['problems'])}")
        else:
            lines.append(f"S3: DIFFERS: {'; '.join(s3['problems'])}")
    lines += _notification_lines(report)
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
        stream = sys.stderr if code in (EXIT_NOTHING_PUBLISHED, EXIT_CONFIG) else sys.stdout
        print(_render(report), file=stream)
    return code


def _figure(value: object) -> str:
    """Counts as integers, rates to three decimals; anything else as it is."""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.3f}"
    return str(value)
