"""May this build be published, and why: the one rule, without any Dagster in it.

The evaluation judges once (`evaluation.verdict.judge`) and its record keeps the
`EvaluationVerdict` for exactly the inputs it evaluated; both publish steps read that verdict back
and ask `decide`. Nothing here re-judges a threshold or re-runs the comparison with the
baseline: the verdict's severity is the evaluation's answer, and this module adds only
what publishing itself knows, the store's size and `force`.

The rule:

- an empty store is never published, whatever the verdict and `force` (zero chunks would
  blank the agent's knowledge);
- a verdict of PASS or WARN is published (a WARN's warnings travel in the reason);
- an ERROR verdict, or none at all (the evaluation never ran on these bytes, or its
  record is unreadable), is refused unless `force` is set, and a forced publication says
  so in its reason, which the caller logs once.

`decide` reads the verdict through `VerdictLike` (severity, failures, warnings and
`headline()`), so this package does not import the evaluation package.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

REASON_CHARS = 1500
"""Longest list of failures or warnings a reason quotes (a step failure stays readable)."""


class VerdictLike(Protocol):
    """What the gate reads of `evaluation.verdict.EvaluationVerdict`."""

    @property
    def severity(self) -> str: ...
    @property
    def failures(self) -> Sequence[str]: ...
    @property
    def warnings(self) -> Sequence[str]: ...
    def headline(self) -> str: ...


@dataclass(frozen=True)
class Decision:
    """`allowed` and the sentence that explains it; `forced` when `force` overrode a refusal."""

    allowed: bool
    reason: str
    forced: bool = False


def decide(verdict: VerdictLike | None, *, force: bool, store_chunk_count: int) -> Decision:
    """Publish or not, and why, from the evaluation's verdict (see the module docstring).

    `verdict` is None when no evaluation of exactly these inputs is recorded.
    """
    if store_chunk_count <= 0:
        return Decision(False, "refusing to publish an empty store (0 chunks)")
    if verdict is not None and verdict.severity in ("PASS", "WARN"):
        reason = "the retrieval evaluation of this data passed"
        if verdict.severity == "WARN":
            reason += " with warnings: " + "; ".join(verdict.warnings)
        return Decision(True, _short(reason))
    if verdict is None:
        problem = "the retrieval evaluation has not run on this data"
    else:
        failures = "; ".join(verdict.failures) or verdict.headline()
        problem = _short(f"the retrieval evaluation of this data failed: {failures}")
    if force:
        return Decision(
            True,
            f"FORCED PUBLISH: {problem}; publishing anyway because force is set",
            forced=True,
        )
    return Decision(False, f"refusing to publish: {problem} (set force to override)")


def _short(reason: str) -> str:
    return reason if len(reason) <= REASON_CHARS else reason[: REASON_CHARS - 1] + "…"
