"""The health checks (their verdicts: `steps.health`): WARN unless the agent would break;
`fits_agent_string_limit` blocks a store the agent's loader could not read."""

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import dagster as dg

from brain_pipeline.config import BrainConfig
from brain_pipeline.defs.resources import BrainSettings
from brain_pipeline.lib.code_location import location_config
from brain_pipeline.lib.steps import CORPUS, check_result, latest_corpus_observation
from brain_pipeline.steps import health
from brain_pipeline.steps.report import CheckVerdict


def _record_check(
    asset: str,
    name: str,
    description: str,
    verdict: Callable[[BrainConfig], CheckVerdict],
    *,
    blocking: bool = False,
) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=asset, name=name, blocking=blocking, description=description)
    def _check(settings: BrainSettings) -> dg.AssetCheckResult:
        return check_result(verdict(settings.load()))

    return _check


HEALTH_CHECKS = [
    _record_check(
        "knowledge_chunks",
        "corpus_problems",
        "WARN when files were skipped for a cause (binary, too large, unreadable) or are "
        "malformed (roadmap JSON that does not parse, over-long paragraphs): they are "
        "reported, never published silently.",
        health.corpus_problems,
    ),
    _record_check(
        "knowledge_store",
        "no_empty_area",
        "WARN when an area of the corpus produced no chunks (the agent knows nothing there).",
        health.no_empty_area,
    ),
    _record_check(
        "knowledge_store",
        "fits_agent_string_limit",
        "Counts knowledge-store.json in UTF-16 code units, as V8 does when the agent reads it "
        "into one string: WARN past 80 % of Node's 536,870,888 limit, ERROR (blocking "
        "publishing) past it.",
        health.fits_agent_string_limit,
        blocking=True,
    ),
    _record_check(
        "embeddings",
        "embedding_coverage",
        "WARN when some live chunks have no vector (hybrid retrieval misses them).",
        health.embedding_coverage,
    ),
    _record_check(
        "embeddings",
        "embedding_gaps",
        "WARN listing every live chunk without a vector (refused by the service, too long "
        "and skipped, invalid answers, not embedded yet) or with a vector of a truncated "
        "head: source file, heading, chunk id, reason. Such chunks stay lexical; refusals "
        "are not re-sent until the text, model, dimension or too_long policy changes "
        "(`brain-pipeline materialize --retry-refused` sends them again).",
        health.embedding_gaps,
    ),
    _record_check(
        "published_local",
        "vectors_reach_agent",
        "WARN when embeddings.bin is withheld from the agent (its model is not "
        "publish.agent_query_model): the agent then ranks lexically only.",
        health.vectors_reach_agent,
    ),
]


def build_freshness_check(cfg: BrainConfig, clock: Any = None) -> dg.AssetChecksDefinition:
    """`published_store_is_current`: the latest corpus, published within the promised age."""
    now = clock or (lambda: datetime.now(UTC))
    allowed = health.freshness_allowance(cfg, datetime.now(UTC))

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
        observed, _ = latest_corpus_observation(context.instance)
        return check_result(
            health.published_store_is_current(settings.load(), observed, now(), allowed)
        )

    return published_store_is_current


@dg.definitions
def health_definitions() -> dg.Definitions:
    """The WARN checks: corpus problems, coverage, limits, and the publication's currency."""
    return dg.Definitions(
        asset_checks=[build_freshness_check(location_config()), *HEALTH_CHECKS]
    )
