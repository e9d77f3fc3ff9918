"""Checks a person should look at: WARN unless the agent would break.

They read the build directory's records (no re-computation) and never block, except
`fits_agent_string_limit`: a store the agent's Node.js loader cannot read must not go
out, so past the limit it fails with ERROR severity and blocks everything downstream.
Dagster's blocking acts only inside its run, so its verdict is also recorded under the
digest of the store and limit it judged (`record_blocking_verdict`), where the publish
gate of any later run looks for it (`BLOCKING_CHECK_KEYS`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from brain_pipeline.config import BrainConfig, memory_of
from brain_pipeline.corpus.agent_limits import size_verdict, string_limit
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.records import (
    AssetRecord,
    ChunksFacts,
    StoreFacts,
    facts_of,
    read_record,
    store_facts,
)
from brain_pipeline.steps.ingest import PER_AREA_COLUMNS, PROBLEM_COLUMNS
from brain_pipeline.steps.report import CheckVerdict, Table
from brain_pipeline.utils.digest import value_digest

FRESHNESS_MARGIN = timedelta(hours=2)


def _record(cfg: BrainConfig, asset: str) -> AssetRecord | None:
    return read_record(memory_of(cfg), asset)


def _warn(description: str, metadata: dict[str, Any] | None = None) -> CheckVerdict:
    return CheckVerdict(False, "WARN", description, dict(metadata or {}))


def _missing(asset: str) -> CheckVerdict:
    return _warn(f"{asset} has no record in the build directory yet")


def _chunks(cfg: BrainConfig) -> ChunksFacts | None:
    record = _record(cfg, "knowledge_chunks")
    return None if record is None else facts_of(ChunksFacts, record)


def corpus_problems(cfg: BrainConfig) -> CheckVerdict:
    chunks = _chunks(cfg)
    if chunks is None:
        return _missing("knowledge_chunks")
    count, rows = chunks.problem_count, list(chunks.problems)
    return CheckVerdict(
        count == 0,
        "WARN",
        "no problem files" if not count else f"{count} file(s) need a look",
        {
            "problem_files": count,
            "files": Table(PROBLEM_COLUMNS, rows),
        },
    )


def _store(cfg: BrainConfig) -> StoreFacts | None:
    return store_facts(memory_of(cfg))


def no_empty_area(cfg: BrainConfig) -> CheckVerdict:
    store = _store(cfg)
    if store is None:
        return _missing("knowledge_store")
    per_area = dict(store.chunks_per_area)
    chunks = _chunks(cfg)
    # An area with no ingestible file never reaches the store's per-area counts: the
    # chunk record names it, with what it holds, so it cannot vanish silently.
    holdings = dict(chunks.empty_areas) if chunks else {}
    for area in holdings:
        per_area.setdefault(area, 0)
    empty = sorted(area for area, count in per_area.items() if not count)
    described = [f"{a} (holds {holdings[a]})" if a in holdings else a for a in empty]
    return CheckVerdict(
        not empty,
        "WARN",
        (
            "every area has chunks"
            if not empty
            else f"area(s) with nothing the ingest reads (.md, .txt, roadmap .json): "
            f"{'; '.join(described)}"
        ),
        {
            "empty_areas": len(empty),
            "areas": Table(PER_AREA_COLUMNS, [[a, n] for a, n in per_area.items()]),
        },
    )


def fits_agent_string_limit(cfg: BrainConfig) -> CheckVerdict:
    store = _store(cfg)
    if store is None:
        return _missing("knowledge_store")
    return string_limit_verdict(cfg, int(store.utf16_units))


def string_limit_verdict(cfg: BrainConfig, units: int) -> CheckVerdict:
    """`fits_agent_string_limit`'s verdict on a store of `units` UTF-16 code units: one
    rule for a build's store and for an archived one a rollback would put live again."""
    verdict = size_verdict(units, string_limit(cfg.publish.agent_string_limit))
    return CheckVerdict(
        verdict.level == "ok",
        "ERROR" if verdict.level == "block" else "WARN",
        verdict.message,
        {
            "utf16_units": verdict.units,
            "limit": verdict.limit,
            "share_of_limit": round(verdict.fraction, 4),
        },
    )


def string_limit_key(cfg: BrainConfig, store_sha256: str) -> str:
    """What `fits_agent_string_limit` judges: this store, against this limit."""
    limit = string_limit(cfg.publish.agent_string_limit)
    return value_digest({"store_sha256": store_sha256, "limit": limit})


BLOCKING_CHECK_KEYS: dict[str, Callable[[BrainConfig, str], str]] = {
    "fits_agent_string_limit": string_limit_key,
}
"""Every blocking check of the build, but `retrieval_eval` (whose verdict is its own
record's), with how to digest what it judges from the sha256 of the store it judged.
The publish gate requires a passing verdict under that key for the store it publishes;
a test pins that every blocking check in the definitions is here or is `retrieval_eval`."""


NOT_OVERRIDABLE = frozenset({"fits_agent_string_limit"})
"""Blocking checks whose failure `force` does not override: the agent cannot load such a
store, so publishing it would break the agent, not merely serve worse answers."""


def record_blocking_verdict(
    cfg: BrainConfig,
    check: str,
    verdict: CheckVerdict,
    run_id: str | None,
    *,
    measured: bool = True,
) -> None:
    """Keep a blocking check's verdict under the key of the store it judged (the one the
    store's record stamped), so a later run's publish gate can tell whether these bytes
    passed. Without a store record nothing was judged and nothing is kept. `measured` is
    False for the failure of a check that raised: `force` may override that one."""
    record = _record(cfg, "knowledge_store")
    stamp = record.outputs.get(cfg.layout.store_file.name) if record is not None else None
    if stamp is None:
        return
    severity = "PASS" if verdict.passed else verdict.severity
    from brain_pipeline.evaluation.service import judgement_memory
    from brain_pipeline.state.ledger import Verdict

    judgement_memory(cfg).ledger.record_verdict(
        Verdict(
            check=check,
            data=stamp.sha256,
            rule=BLOCKING_CHECK_KEYS[check](cfg, stamp.sha256),
            severity=severity,
            description=verdict.description,
            overridable=not (measured and check in NOT_OVERRIDABLE),
            run_id=run_id,
        )
    )


def embedding_coverage(cfg: BrainConfig) -> CheckVerdict:
    record = _record(cfg, "embeddings")
    if record is None:
        return _missing("embeddings")
    coverage = float(record.facts.get("coverage", 0.0))
    if cfg.effective_provider() == "none":
        return CheckVerdict(
            True,
            "WARN",
            f"provider 'none': vectors kept from earlier runs cover {coverage:.1f} %",
            {"coverage_percent": coverage},
        )
    return CheckVerdict(
        coverage >= 100.0,
        "WARN",
        f"{coverage:.2f} % of live chunks have a vector",
        {"coverage_percent": coverage, "missing": int(record.facts.get("missing", 0))},
    )


def vectors_reach_agent(cfg: BrainConfig) -> CheckVerdict:
    from brain_pipeline.publishing.local import live_manifest

    manifest = live_manifest(cfg.publish_root())
    if manifest is None:
        return _warn("nothing is published")
    if manifest.embeddings is not None:
        return CheckVerdict(
            True,
            "WARN",
            f"the agent gets {manifest.vectors_count} vectors from {manifest.embedding_model}",
        )
    return _warn(f"vectors withheld: {manifest.embeddings_note}; the agent runs lexical only")


def freshness_allowance(cfg: BrainConfig, now: datetime) -> timedelta:
    """How old a publication may be: the schedule's longest gap plus a margin."""
    from brain_pipeline.publishing.freshness import schedule_period

    return schedule_period(cfg.schedule.cron, cfg.schedule.timezone, now) + FRESHNESS_MARGIN


def published_store_is_current(
    cfg: BrainConfig, observed_digest: str | None, now: datetime, allowed: timedelta
) -> CheckVerdict:
    """The agent serves the latest observed corpus, published within the promised age."""
    from brain_pipeline.publishing.freshness import assess
    from brain_pipeline.publishing.local import live_manifest

    manifest = live_manifest(cfg.publish_root())
    published = manifest.corpus_digest if manifest else None
    verdict = assess(
        published_at=manifest.published_at if manifest else None,
        published_digest=published,
        observed_digest=observed_digest,
        now=now,
        allowed_age=allowed,
    )
    return CheckVerdict(
        verdict.current,
        "WARN",
        verdict.reason,
        {
            "age_hours": round(verdict.age.total_seconds() / 3600, 2) if verdict.age else -1.0,
            "allowed_hours": round(allowed.total_seconds() / 3600, 2),
            "digests": Table(
                [("which", "string"), ("corpus_digest", "string")],
                [["published", published or "—"], ["observed", observed_digest or "—"]],
            ),
        },
    )


GAP_COLUMNS = [
    ("source", "string"),
    ("heading", "string"),
    ("chunk_id", "string"),
    ("reason", "string"),
]


def embedding_gap_rows(cfg: BrainConfig) -> list[list[str]]:
    """Every live chunk without a vector or with a truncated one: source, heading, id,
    reason. Remembered gaps (refused, skipped, invalid answers, truncated) come from the
    build state; other chunks lacking a vector (provider `none`, a partial build) are
    found by comparing the store with embeddings.bin."""
    from brain_pipeline.embedding.gaps import read_gaps

    memory = memory_of(cfg)
    gaps = read_gaps(memory)
    rows = [[g.source, g.heading, g.chunk_id, g.describe()] for g in gaps.values()]
    record = _record(cfg, "embeddings")
    missing = int(record.facts.get("missing", 0)) if record else 0
    if missing > sum(1 for g in gaps.values() if not g.has_vector):
        rows += _unexplained_missing(memory.layout, set(gaps))
    return sorted(rows)


def _unexplained_missing(layout: StateLayout, explained: set[str]) -> list[list[str]]:
    from brain_pipeline.corpus.store import heading_text
    from brain_pipeline.corpus.store_reader import open_store_view
    from brain_pipeline.embedding.store_file import read_embeddings

    if not layout.store_file.exists():
        return []
    stored = read_embeddings(layout.embeddings_file)
    have = set(stored.ids) if stored is not None else set()
    view = open_store_view(layout.store_file, layout)
    return [
        [c.source, heading_text(c.heading), c.id, "no vector yet (partial build or provider none)"]
        for c in view.all_chunks()
        if c.id not in have and c.id not in explained
    ]


def embedding_gaps(cfg: BrainConfig) -> CheckVerdict:
    """WARN listing the chunks the agent ranks lexically only, or by their head only."""
    record = _record(cfg, "embeddings")
    if record is None:
        return _missing("embeddings")
    rows = embedding_gap_rows(cfg)
    without = sum(1 for row in rows if not row[3].startswith("truncated"))
    truncated = len(rows) - without
    return CheckVerdict(
        not rows,
        "WARN",
        gap_summary(without, truncated, rows),
        {"without_vector": without, "truncated": truncated, "chunks": Table(GAP_COLUMNS, rows)},
    )


def gap_summary(without: int, truncated: int, rows: list[list[str]]) -> str:
    """One line: how many chunks lack a vector or are truncated, and the first named."""
    if not without and not truncated:
        return "every live chunk has a vector of its whole text"
    first = rows[0]
    return (
        f"{without} chunk(s) without a vector, {truncated} truncated; first: {first[0]} "
        f"[{first[2]}] {first[3]}"
    )
