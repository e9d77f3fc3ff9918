"""The assets' automation conditions, and what a run can say about the one that fired.

`knowledge_chunks` is requested by `eager()` *or* by `corpus_version_unconsumed`: the
corpus's latest observed data version is not the one the latest `knowledge_chunks`
materialisation read. The second is a state read from the instance at every evaluation,
not an event, so no timing of observations, runs and evaluations can cancel it. With
`eager()` alone, an observation that lands in the same evaluation as the previous run's
materialisation, or while that run is in progress, counts as handled by that
materialisation (its reset wins over the dependency update), and the edit is never
rebuilt. This is the one place that explains it; the README and `defs.automation` refer
here. Steps downstream join the run their input is requested in.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import dagster as dg

from brain_pipeline.lib.dagster_private import (
    EvaluationNode,
    NoCursor,
    automation_instance,
    launching_evaluation,
)
from brain_pipeline.lib.steps import latest_corpus_observation
from brain_pipeline.steps.trigger import describe_trigger

CHUNKS = dg.AssetKey("knowledge_chunks")
CONSUMED_DIGEST_METADATA = "corpus_digest"
"""Metadata of a `knowledge_chunks` materialisation: the corpus digest that run chunked."""
UNCONSUMED_LABEL = "corpus_version_unconsumed"
UPSTREAM_LABEL = "upstream_requested"


def consumed_corpus_version(instance: dg.DagsterInstance) -> str | None:
    """The corpus digest the latest `knowledge_chunks` materialisation read (None: never)."""
    entry = instance.get_latest_materialization_event(CHUNKS)
    materialization = entry.asset_materialization if entry is not None else None
    if materialization is None:
        return None
    value = materialization.metadata.get(CONSUMED_DIGEST_METADATA)
    text = getattr(value, "value", None)
    return text if isinstance(text, str) else None


def corpus_version_unconsumed(observed: str | None, consumed: str | None) -> bool:
    """A corpus version was observed that the chunks were not built from."""
    return observed is not None and observed != consumed


class CorpusVersionUnconsumed(NoCursor, dg.AutomationCondition[dg.AssetKey]):
    """True while the latest observed corpus data version differs from the one the latest
    `knowledge_chunks` materialisation read. Stateless (`NoCursor`): it reads both from the
    instance at every evaluation, so no ordering of observations, runs and evaluations can
    hide it."""

    @property
    def name(self) -> str:
        return "corpus_version_differs_from_chunks_input"

    @property
    def description(self) -> str:
        return (
            "the corpus's latest observed data version is not the one the latest "
            "knowledge_chunks materialisation read"
        )

    def evaluate(self, context: dg.AutomationContext) -> dg.AutomationResult:
        instance = automation_instance(context)
        observed, _ = latest_corpus_observation(instance)
        if corpus_version_unconsumed(observed, consumed_corpus_version(instance)):
            true_subset = context.candidate_subset
        else:
            true_subset = context.get_empty_subset()
        return dg.AutomationResult(context=context, true_subset=true_subset)


def chunks_condition() -> dg.AutomationCondition[Any]:
    """`knowledge_chunks`: eager, or a corpus version it has not read (not while it, or its
    input, is being produced, and not again after a failed run: the next observation or
    the nightly schedule retries, so a broken run is not relaunched every interval)."""
    condition = dg.AutomationCondition
    unconsumed = (
        CorpusVersionUnconsumed()
        & ~condition.in_progress()
        & ~condition.any_deps_in_progress()
        & ~condition.execution_failed()
    ).with_label(UNCONSUMED_LABEL)
    return (condition.eager() | unconsumed).with_label("eager_or_corpus_version_unconsumed")


def _with_upstream_run() -> dg.AutomationCondition[Any]:
    """Part of the run an upstream step is requested in. eager() alone can drop this too:
    when the upstream is requested in the same evaluation that sees this asset's own
    materialisation by the previous run, that reset wins and the chain stops at the
    upstream (to be resumed one interval, and one run, per step later)."""
    condition = dg.AutomationCondition
    return (
        condition.any_deps_match(condition.will_be_requested()) & ~condition.in_progress()
    ).with_label(UPSTREAM_LABEL)


def downstream_condition() -> dg.AutomationCondition[Any]:
    """The store and the vectors: eager, and always in the run that rebuilds their input."""
    return (dg.AutomationCondition.eager() | _with_upstream_run()).with_label(
        "eager_or_upstream_requested"
    )


def evaluation_condition() -> dg.AutomationCondition[Any]:
    """`retrieval_eval`, a check defined apart from its asset: in the run that rebuilds the
    vectors it judges, or after its asset or fixture changed. Without a condition of its
    own Dagster never puts it in an automation run (only the checks in an asset's
    `check_specs` join their asset), so the publish step of that run would find no
    evaluation of the new data and refuse every automated edit."""
    return downstream_condition()


def publish_condition() -> dg.AutomationCondition[Any]:
    """The publish steps: as the store and vectors, once every blocking check upstream has
    passed (or will run first in the same run, where it still blocks; `retrieval_eval`
    is requested with the vectors by `evaluation_condition`). The publish step's own gate
    refuses whatever a blocking check did not pass, in this run or before."""
    condition = dg.AutomationCondition
    return (
        (condition.eager() | _with_upstream_run()) & condition.all_deps_blocking_checks_passed()
    ).with_label("eager_or_upstream_requested_and_checks_passed")


def fired_conditions(
    instance: dg.DagsterInstance, tags: Mapping[str, str], key: dg.AssetKey
) -> list[str]:
    """The labelled conditions that were true for `key` in the automation evaluation that
    launched a run (empty for runs automation did not launch)."""
    evaluation = launching_evaluation(instance, tags, key)
    return true_labels(evaluation) if evaluation is not None else []


def run_trigger(instance: dg.DagsterInstance, tags: Mapping[str, str], key: dg.AssetKey) -> str:
    """Why the run with `tags` exists, as `key`'s `triggered_by` metadata records it."""
    return describe_trigger(tags, fired_conditions(instance, tags, key))


def true_labels(evaluation: EvaluationNode) -> list[str]:
    """Labels of the nodes that were true, outermost first (the root's own label is
    kept only when no labelled child explains it)."""

    def walk(node: EvaluationNode) -> Iterator[str]:
        if not node.true:
            return
        if node.label:
            yield node.label
        for child in node.children:
            yield from walk(child)

    labels: list[str] = []
    for child in evaluation.children:
        labels.extend(walk(child))
    if not labels and evaluation.label and evaluation.true:
        labels.append(evaluation.label)
    return list(dict.fromkeys(labels))
