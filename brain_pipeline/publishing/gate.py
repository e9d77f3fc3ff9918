"""Whether a build may be published: the one rule, without any Dagster in it.

The orchestration layer reads the latest result of the blocking retrieval-evaluation
check for the data about to go out and asks `publish_decision`. Keeping the rule here
makes it testable on its own and identical for every caller (assets, CLI).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Decision:
    """`allowed` and the sentence that explains it; `forced` when `force` overrode a refusal."""

    allowed: bool
    reason: str
    forced: bool = False


def publish_decision(
    latest_check_passed: bool | None, *, force: bool, store_chunk_count: int
) -> Decision:
    """Allow publishing only a non-empty store whose latest evaluation passed.

    `latest_check_passed` is None when the evaluation never ran on this data. `force`
    overrides a failed or missing evaluation (and says so loudly) but never an empty
    store: publishing zero chunks would blank the agent's knowledge, which no
    evaluation result can justify.
    """
    if store_chunk_count <= 0:
        return Decision(False, "refusing to publish an empty store (0 chunks)")
    if latest_check_passed is True:
        return Decision(True, "the latest retrieval evaluation of this data passed")
    problem = (
        "the retrieval evaluation has not run on this data"
        if latest_check_passed is None
        else "the latest retrieval evaluation of this data failed"
    )
    if force:
        reason = f"FORCED PUBLISH: {problem}; publishing anyway because force is set"
        log.warning(reason)
        return Decision(True, reason, forced=True)
    return Decision(False, f"refusing to publish: {problem} (set force to override)")
