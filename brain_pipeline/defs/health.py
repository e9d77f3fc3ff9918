"""The health checks (their verdicts: `steps.health`): WARN unless the agent would break;
`fits_agent_string_limit` blocks a store the agent's loader could not read.

The checks that read what their asset's step just wrote are declared on the asset
(`check_specs`) and evaluated at the end of its step (`step_check_results`): the same
checks in the UI, the same blocking (Dagster fails the step after storing the asset, so
nothing downstream runs), without a step of their own each (six steps, and their start,
output and success events, fewer per run). A check that raises is reported as a failed
evaluation at its own severity, so a raising blocking check blocks and a raising WARN
check does not. `published_store_is_current` stays a check of its own: it compares with
the corpus as observed since, and is worth running alone.
"""

import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import dagster as dg

from brain_pipeline.config import BrainConfig
from brain_pipeline.defs.resources import BrainSettings
from brain_pipeline.lib.code_location import location_config
from brain_pipeline.lib.steps import CORPUS, check_result, latest_corpus_observation
from brain_pipeline.steps import health
from brain_pipeline.steps.report import CheckVerdict


@dataclass(frozen=True)
class StepCheck:
    """A check evaluated at the end of its asset's step; its verdict is the function of
    `steps.health` named like the check."""

    asset: str
    name: str
    description: str
    blocking: bool = False

    @property
    def spec(self) -> dg.AssetCheckSpec:
        return dg.AssetCheckSpec(
            name=self.name, asset=self.asset, description=self.description, blocking=self.blocking
        )

    def judge(self, cfg: BrainConfig, log: Any = None) -> tuple[CheckVerdict, bool]:
        """The verdict, and whether the check measured anything: one that raises is a
        failed verdict at the check's severity, that measured nothing."""
        try:
            verdict: Callable[[BrainConfig], CheckVerdict] = getattr(health, self.name)
            return verdict(cfg), True
        except Exception as exc:
            if log is not None:
                log.error(f"{self.name} could not run:\n{traceback.format_exc()}")
            return CheckVerdict(
                False,
                "ERROR" if self.blocking else "WARN",
                f"the check could not run: {type(exc).__name__}: {exc}",
            ), False


STEP_CHECKS = (
    StepCheck(
        "knowledge_chunks",
        "corpus_problems",
        "WARN when files were skipped for a cause (binary, too large, unreadable) or are "
        "malformed (roadmap JSON that does not parse, over-long paragraphs): they are "
        "reported, never published silently.",
    ),
    StepCheck(
        "knowledge_store",
        "no_empty_area",
        "WARN when an area of the corpus produced no chunks (the agent knows nothing there).",
    ),
    StepCheck(
        "knowledge_store",
        "fits_agent_string_limit",
        "Counts knowledge-store.json in UTF-16 code units, as V8 does when the agent reads it "
        "into one string: WARN past 80 % of Node's 536,870,888 limit, ERROR (blocking "
        "publishing) past it.",
        blocking=True,
    ),
    StepCheck(
        "embeddings",
        "embedding_coverage",
        "WARN when some live chunks have no vector (hybrid retrieval misses them).",
    ),
    StepCheck(
        "embeddings",
        "embedding_gaps",
        "WARN listing every live chunk without a vector (refused by the service, too long "
        "and skipped, invalid answers, not embedded yet) or with a vector of a truncated "
        "head: source file, heading, chunk id, reason. Such chunks stay lexical; refusals "
        "are not re-sent until the text, model, dimension or too_long policy changes "
        "(`brain-pipeline materialize --retry-refused` sends them again).",
    ),
    StepCheck(
        "published_local",
        "vectors_reach_agent",
        "WARN when embeddings.bin is withheld from the agent (its model is not "
        "publish.agent_query_model): the agent then ranks lexically only.",
    ),
)


def step_check_specs(asset: str) -> list[dg.AssetCheckSpec]:
    """The checks `asset`'s step evaluates (for its decorator's `check_specs`)."""
    return [check.spec for check in STEP_CHECKS if check.asset == asset]


def step_check_results(
    asset: str, cfg: BrainConfig, log: Any = None, run_id: str | None = None
) -> list[dg.AssetCheckResult]:
    """Every check of `asset`, evaluated now (after its step wrote its outputs). A
    blocking check's verdict is also kept in the build directory under the digest of
    what it judged: the publish gate of any later run reads it there."""
    results = []
    for check in STEP_CHECKS:
        if check.asset != asset:
            continue
        verdict, measured = check.judge(cfg, log)
        if check.blocking:
            health.record_blocking_verdict(cfg, check.name, verdict, run_id, measured=measured)
        results.append(check_result(verdict, check_name=check.name))
    return results


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
    """The publication's currency (the other health checks are their assets' specs)."""
    return dg.Definitions(asset_checks=[build_freshness_check(location_config())])
