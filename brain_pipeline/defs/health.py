"""Checks a person should look at: WARN unless the agent would break.

They read the build directory's records (no re-computation) and never block, except
`fits_agent_string_limit`: a store the agent's Node.js loader cannot read must not go
out, so past the limit it fails with ERROR severity and blocks everything downstream.
"""

from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg

from brain_pipeline.config import BrainConfig
from brain_pipeline.corpus.agent_limits import size_verdict
from brain_pipeline.defs.resources import BrainSettings
from brain_pipeline.lib.steps import CORPUS, layout_for, table
from brain_pipeline.publishing.freshness import schedule_period
from brain_pipeline.state.records import AssetRecord, read_record

FRESHNESS_MARGIN = timedelta(hours=2)


def _facts(cfg: BrainConfig, asset: str) -> AssetRecord | None:
    return read_record(layout_for(cfg), asset)


def _missing(asset: str) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=False,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"{asset} has no record in the build directory yet",
    )


@dg.asset_check(
    asset="knowledge_chunks",
    name="corpus_problems",
    description=(
        "WARN when files were skipped for a cause (binary, too large, unreadable) or are "
        "malformed (roadmap JSON that does not parse, over-long paragraphs): they are "
        "reported, never published silently."
    ),
)
def corpus_problems(settings: BrainSettings) -> dg.AssetCheckResult:
    record = _facts(settings.load(), "knowledge_chunks")
    if record is None:
        return _missing("knowledge_chunks")
    rows: list[list[Any]] = list(record.facts.get("problems") or [])
    count = int(record.facts.get("problem_count", len(rows)))
    return dg.AssetCheckResult(
        passed=count == 0,
        severity=dg.AssetCheckSeverity.WARN,
        description="no problem files" if not count else f"{count} file(s) need a look",
        metadata={
            "problem_files": count,
            "files": table([("file", "string"), ("reason", "string"), ("detail", "string")], rows),
        },
    )


@dg.asset_check(
    asset="knowledge_store",
    name="no_empty_area",
    description=(
        "WARN when an area of the corpus produced no chunks (the agent knows nothing there)."
    ),
)
def no_empty_area(settings: BrainSettings) -> dg.AssetCheckResult:
    record = _facts(settings.load(), "knowledge_store")
    if record is None:
        return _missing("knowledge_store")
    per_area: dict[str, int] = dict(record.facts.get("chunks_per_area") or {})
    empty = sorted(area for area, count in per_area.items() if not count)
    return dg.AssetCheckResult(
        passed=not empty,
        severity=dg.AssetCheckSeverity.WARN,
        description="every area has chunks" if not empty else f"empty area(s): {', '.join(empty)}",
        metadata={
            "empty_areas": len(empty),
            "areas": table(
                [("area", "string"), ("chunks", "int")], [[a, n] for a, n in per_area.items()]
            ),
        },
    )


@dg.asset_check(
    asset="knowledge_store",
    name="fits_agent_string_limit",
    blocking=True,
    description=(
        "Counts knowledge-store.json in UTF-16 code units, as V8 does when the agent reads it "
        "into one string: WARN past 80 % of Node's 536,870,888 limit, ERROR (blocking "
        "publishing) past it."
    ),
)
def fits_agent_string_limit(settings: BrainSettings) -> dg.AssetCheckResult:
    record = _facts(settings.load(), "knowledge_store")
    if record is None:
        return _missing("knowledge_store")
    verdict = size_verdict(int(record.facts.get("utf16_units", 0)))
    blocks = verdict.level == "block"
    severity = dg.AssetCheckSeverity.ERROR if blocks else dg.AssetCheckSeverity.WARN
    return dg.AssetCheckResult(
        passed=verdict.level == "ok",
        severity=severity,
        description=verdict.message,
        metadata={
            "utf16_units": verdict.units,
            "limit": verdict.limit,
            "share_of_limit": round(verdict.fraction, 4),
        },
    )


@dg.asset_check(
    asset="embeddings",
    name="embedding_coverage",
    description="WARN when some live chunks have no vector (hybrid retrieval misses them).",
)
def embedding_coverage(settings: BrainSettings) -> dg.AssetCheckResult:
    cfg = settings.load()
    record = _facts(cfg, "embeddings")
    if record is None:
        return _missing("embeddings")
    coverage = float(record.facts.get("coverage", 0.0))
    if cfg.effective_provider() == "none":
        return dg.AssetCheckResult(
            passed=True,
            description=f"provider 'none': vectors kept from earlier runs cover {coverage:.1f} %",
            metadata={"coverage_percent": coverage},
        )
    return dg.AssetCheckResult(
        passed=coverage >= 100.0,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"{coverage:.2f} % of live chunks have a vector",
        metadata={"coverage_percent": coverage, "missing": int(record.facts.get("missing", 0))},
    )


@dg.asset_check(
    asset="published_local",
    name="vectors_reach_agent",
    description=(
        "WARN when embeddings.bin is withheld from the agent (its model is not "
        "publish.agent_query_model): the agent then ranks lexically only."
    ),
)
def vectors_reach_agent(settings: BrainSettings) -> dg.AssetCheckResult:
    from brain_pipeline.publishing.local import live_manifest

    manifest = live_manifest(settings.load().publish_root())
    if manifest is None:
        return dg.AssetCheckResult(
            passed=False, severity=dg.AssetCheckSeverity.WARN, description="nothing is published"
        )
    if manifest.embeddings is not None:
        return dg.AssetCheckResult(
            passed=True,
            description=(
                f"the agent gets {manifest.vectors_count} vectors from {manifest.embedding_model}"
            ),
        )
    return dg.AssetCheckResult(
        passed=False,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"vectors withheld: {manifest.embeddings_note}; the agent runs lexical only",
    )


def build_freshness_check(cfg: BrainConfig, clock: Any = None) -> dg.AssetChecksDefinition:
    """`published_store_is_current`: the latest corpus, published within the promised age."""
    allowed = (
        schedule_period(cfg.schedule.cron, cfg.schedule.timezone, datetime.now(UTC))
        + FRESHNESS_MARGIN
    )
    now = clock or (lambda: datetime.now(UTC))

    @dg.asset_check(
        asset="published_local",
        name="published_store_is_current",
        additional_deps=[CORPUS],
        description=(
            "WARN when the agent serves an older corpus than the latest observed one, or when "
            f"nothing was published for longer than the schedule's period plus a margin "
            f"(now {allowed}). Dagster marks only the direct children of a changed asset "
            "stale; this check says it at the end of the graph."
        ),
    )
    def published_store_is_current(
        context: dg.AssetCheckExecutionContext, settings: BrainSettings
    ) -> dg.AssetCheckResult:
        from brain_pipeline.lib.steps import latest_corpus_observation
        from brain_pipeline.publishing.freshness import assess
        from brain_pipeline.publishing.local import live_manifest

        manifest = live_manifest(settings.load().publish_root())
        observed, _ = latest_corpus_observation(context.instance)
        verdict = assess(
            published_at=manifest.published_at if manifest else None,
            published_digest=manifest.corpus_fingerprint if manifest else None,
            observed_digest=observed,
            now=now(),
            allowed_age=allowed,
        )
        rows = [
            ["published", (manifest.corpus_fingerprint if manifest else None) or "—"],
            ["observed", observed or "—"],
        ]
        return dg.AssetCheckResult(
            passed=verdict.current,
            severity=dg.AssetCheckSeverity.WARN,
            description=verdict.reason,
            metadata={
                "age_hours": round(verdict.age.total_seconds() / 3600, 2) if verdict.age else -1.0,
                "allowed_hours": round(allowed.total_seconds() / 3600, 2),
                "digests": table([("which", "string"), ("corpus_digest", "string")], rows),
            },
        )

    return published_store_is_current


HEALTH_CHECKS = [
    corpus_problems,
    no_empty_area,
    fits_agent_string_limit,
    embedding_coverage,
    vectors_reach_agent,
]
