"""May this build be published, and why: the one rule, without any Dagster in it.

Every blocking check records its verdict keyed by exactly what it judged: the
evaluation (`evaluation.verdict.judge`) in its record, keyed by all its inputs, the
others in the ledger's `verdicts`, keyed by the store they judged. Both publish steps read
back the verdicts for the bytes they are about to publish and ask `decide`. Nothing here
re-judges a threshold: a verdict's severity is its check's answer, and this module adds
only what publishing itself knows, the store's size and `force`.

The rule:

- an empty store is never published, whatever the verdicts and `force` (zero chunks
  would blank the agent's knowledge), nor data a check that is not `overridable` failed
  (a store too long for the agent's loader would break the agent);
- the data is published when every blocking check passed (PASS or WARN) on it; a WARN's
  warnings travel in the reason;
- a blocking check that failed on this data, or has no verdict on it (it never ran on
  these bytes, in this run or any other, or its record is unreadable), refuses, naming the
  check and what to run, unless `force` is set; a forced publication says so in its
  reason, which the caller logs once.

Force is one deliberate act a person answers for, so it is never anonymous nor a
standing setting: a request to force needs a `reason` (recorded with the publication,
shown by `publications`, `status`, the UI and the notification), and a deployment whose
UI anyone can reach turns it off with `publish.allow_force: false` (open-source Dagster
has no authentication, so a Launchpad config is no proof of who asked). `force_refusal`
says, before any work, whether a request to force may go on; `decide` asks it again.

Dagster blocks only inside the run a check ran in; this rule holds whatever the run
selected (a CLI `--select`, a UI launch, a re-execution, automation, a backfill).

`decide` reads the evaluation's verdict through `VerdictLike` (severity, failures,
warnings and `headline()`), so this package does not import the evaluation package.
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


EVALUATION_CHECK = "retrieval_eval"
RUN_CHECKS = "run `brain-pipeline materialize`, whose run checks the build before it publishes"
"""What to run when a blocking check never judged the data: a whole run."""


@dataclass(frozen=True)
class CheckOutcome:
    """A blocking check's verdict on the data about to be published."""

    check: str
    severity: str | None
    """PASS, WARN, ERROR; None when the check never judged this data."""
    description: str = ""
    overridable: bool = True
    """False when publishing data this check failed would break the agent: `force` does
    not override such a failure (as it does not an empty store)."""


@dataclass(frozen=True)
class Decision:
    """`allowed` and the sentence that explains it; `forced` when `force` overrode a refusal."""

    allowed: bool
    reason: str
    forced: bool = False
    force_reason: str = ""
    """The person's reason for forcing (set when `forced`)."""
    overrode: str = ""
    """What the force overrode: the failed or missing blocking checks (set when `forced`)."""

    def forced_record(self) -> dict[str, str] | None:
        """What the history, the metadata and the notification keep of a forced decision."""
        if not self.forced:
            return None
        return {"reason": self.force_reason, "overrode": self.overrode}


FORCE_OFF = (
    "force is turned off in this deployment (publish.allow_force: false): only data that "
    "passed its blocking checks is published; fix what failed, or ask whoever runs the "
    "deployment"
)
FORCE_NEEDS_REASON = "force needs a reason, recorded with the publication"


def force_refusal(
    force: bool, reason: str | None, *, allow_force: bool, how: str = "set `reason`"
) -> str | None:
    """Why a request to force may not go on (one line, `how` says where the reason goes),
    or None: checked before any work, in every launch path."""
    if not force:
        return None
    if not allow_force:
        return FORCE_OFF
    if not (reason or "").strip():
        return f"{FORCE_NEEDS_REASON}: {how}"
    return None


def decide(
    verdict: VerdictLike | None,
    *,
    force: bool,
    store_chunk_count: int,
    checks: Sequence[CheckOutcome] = (),
    reason: str = "",
    allow_force: bool = True,
) -> Decision:
    """Publish or not, and why, from every blocking check's verdict on this data (see the
    module docstring).

    `verdict` is the evaluation's, None when no evaluation of exactly these inputs is
    recorded; `checks` are the other blocking checks'. `reason` is why a person forces;
    `allow_force` is `publish.allow_force`.
    """
    if store_chunk_count <= 0:
        return Decision(False, "refusing to publish an empty store (0 chunks)")
    unloadable = [c for c in checks if not c.overridable and _problem(c) and c.severity]
    if unloadable:
        problem = _short("; ".join(str(_problem(c)) for c in unloadable))
        return Decision(False, f"refusing to publish: {problem} (force does not override it)")
    problems = [found for check in checks if (found := _problem(check))]
    evaluated = verdict is not None and verdict.severity in ("PASS", "WARN")
    if verdict is None:
        problems.append(f"{EVALUATION_CHECK} has not run on this data ({RUN_CHECKS})")
    elif not evaluated:
        failures = "; ".join(verdict.failures) or verdict.headline()
        problems.append(f"{EVALUATION_CHECK} failed on this data: {failures}")
    if not problems:
        passed = ", ".join([EVALUATION_CHECK, *(check.check for check in checks)])
        reason = f"every blocking check passed on this data ({passed})"
        warnings = list(verdict.warnings) if verdict is not None else []
        warnings += [c.description for c in checks if c.severity == "WARN"]
        if warnings:
            reason += " with warnings: " + "; ".join(warnings)
        return Decision(True, _short(reason))
    problem = _short("; ".join(problems))
    if force:
        refused = force_refusal(force, reason, allow_force=allow_force)
        if refused is not None:
            return Decision(False, f"refusing to publish: {problem}; {refused}")
        why = reason.strip()
        return Decision(
            True,
            f"FORCED PUBLISH: {problem}; publishing anyway because force is set "
            f"(reason: {_short(why)})",
            forced=True,
            force_reason=why,
            overrode=problem,
        )
    return Decision(False, f"refusing to publish: {problem} (set force to override)")


def _problem(check: CheckOutcome) -> str | None:
    """Why `check` keeps this data from being published; None when it does not."""
    if check.severity is None:
        return f"{check.check} has not run on this data ({RUN_CHECKS})"
    if check.severity in ("PASS", "WARN"):
        return None
    return f"{check.check} failed on this data: {check.description}"


def _short(reason: str) -> str:
    return reason if len(reason) <= REASON_CHARS else reason[: REASON_CHARS - 1] + "…"
