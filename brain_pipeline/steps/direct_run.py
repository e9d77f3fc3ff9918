"""A run of the whole plan in this process, without Dagster: what `materialize` does.

Importing Dagster, opening its instance and storing a run's events one by one cost
3-4 CPU-seconds on a 2-core machine, while a re-run after one edit of a 19,000-
chunk corpus is well under one second of actual work. So `brain-pipeline materialize`
(no --select) walks `steps.plan.PLAN` here, calling exactly the step and check
functions the Dagster assets call, with Dagster's semantics:

- a step that raises fails; everything downstream of it is blocked;
- a check runs after its asset; a *blocking* check failing with ERROR blocks the assets
  downstream of its asset (the asset's own other checks still run);
- the run fails when a step failed or a blocking check failed.

The caller holds the run's locks (the same `hold_run_locks` a Dagster run's resource
takes). What each node did is kept in a `RunJournal`, written when the run ends; the
Dagster code location reports it to the instance later (`defs/direct_runs.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from brain_pipeline.config import BrainConfig
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.steps.plan import PLAN, Node
from brain_pipeline.steps.provenance import StepFailure, StepLog
from brain_pipeline.steps.report import CheckVerdict, StepResult
from brain_pipeline.steps.run_journal import RunJournal, StepEntry
from brain_pipeline.steps.trigger import BY_HAND

LAUNCHED_BY = "brain-pipeline materialize"

Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class RunContext:
    """What one run's steps share: configuration, identity, and the outside clients."""

    cfg: BrainConfig
    run_id: str
    log_for: Callable[[str], StepLog]
    """The log a node reports to (the CLI prefixes each line with the node's name)."""
    make_embedder: Callable[[BrainConfig], Any]
    upload: Callable[..., Any]
    force_publish: bool = False
    trigger: str = BY_HAND
    """Why the run exists (`steps.trigger`): a command is run by hand."""
    clock: Clock = _utc_now
    observed: dict[str, str] = field(default_factory=dict)
    """Data versions of this run's observations (the currency check compares with them)."""
    snapshot: Any = None

    @property
    def layout(self) -> StateLayout:
        return StateLayout.of(self.cfg.build_dir)


class Interrupted(Exception):
    """Ctrl-C stopped a step; `line` says what was kept (an embedding checkpoint)."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


def run_plan(ctx: RunContext, *, on_entry: Callable[[StepEntry], None] | None = None) -> RunJournal:
    """Walk the plan; every node's outcome goes to the journal (and to `on_entry` as it
    happens). Ctrl-C ends the walk: the journal says `interrupted`, and what the steps
    saved (checkpoints, records) stays for the next run."""
    started = ctx.clock()
    journal = RunJournal(
        run_id=ctx.run_id,
        started_at=started.isoformat(),
        finished_at=started.isoformat(),
        launched_by=LAUNCHED_BY,
        trigger=ctx.trigger,
        succeeded=False,
    )
    unavailable: set[str] = set()  # failed or blocked: nothing downstream can run
    gated: set[str] = set()  # materialised, but a blocking check failed on it
    try:
        for node in PLAN:
            entry = _run_node(ctx, node, unavailable, gated)
            journal.steps.append(entry)
            if on_entry is not None:
                on_entry(entry)
    except Interrupted as stop:
        journal.interrupted = stop.line
    journal.finished_at = ctx.clock().isoformat()
    journal.succeeded = journal.interrupted is None and not any(
        _fails_run(entry) for entry in journal.steps
    )
    return journal


def _fails_run(entry: StepEntry) -> bool:
    if entry.status == "failed":
        return True
    return entry.kind == "check" and entry.blocking and _gates(entry)


def _gates(entry: StepEntry) -> bool:
    """A check result that stops what is downstream of its asset (Dagster: blocking and
    failed with ERROR severity)."""
    return entry.status == "ok" and entry.passed is False and entry.severity == "ERROR"


def _run_node(ctx: RunContext, node: Node, unavailable: set[str], gated: set[str]) -> StepEntry:
    blocked = any(dep in unavailable for dep in node.deps) or (
        node.kind != "check" and any(dep in gated for dep in node.deps)
    )
    if blocked:
        unavailable.add(node.name)
        return StepEntry(node.name, node.kind, "blocked", asset=node.asset, blocking=node.blocking)
    try:
        entry = _RUNNERS[node.name](ctx, node)
    except StepFailure as exc:
        entry = StepEntry(
            node.name, node.kind, "failed", asset=node.asset, blocking=node.blocking,
            error=str(exc), metadata=dict(exc.metadata),
        )
    except KeyboardInterrupt as exc:
        text = str(exc).strip()
        raise Interrupted(text if text.startswith("interrupted") else "interrupted") from None
    except Exception as exc:  # noqa: BLE001 - one node's failure is the node's, not the run's
        entry = StepEntry(
            node.name, node.kind, "failed", asset=node.asset, blocking=node.blocking,
            error=describe_error(exc),
        )
    if entry.status != "ok" and node.kind != "check":
        unavailable.add(node.name)
    if node.kind == "check" and node.blocking and _gates(entry) and node.asset:
        gated.add(node.asset)
    return entry


def describe_error(exc: BaseException) -> str:
    """`Type: message`, and the innermost cause when there is one (as a run summary
    shows a Dagster step's failure)."""

    def line(error: BaseException) -> str:
        text = " ".join(str(error).split())
        return f"{type(error).__name__}: {text}" if text else type(error).__name__

    root = exc
    while root.__cause__ is not None:
        root = root.__cause__
    if root is exc:
        return line(exc)
    return f"{line(exc)} (caused by {line(root)})"


def _asset(
    node: Node, result: StepResult | None, code_version: str, *, nothing: bool = False
) -> StepEntry:
    if result is None:
        return StepEntry(node.name, node.kind, "nothing" if nothing else "ok")
    return StepEntry(
        node.name, node.kind, "ok",
        data_version=result.data_version, code_version=code_version,
        metadata=dict(result.metadata),
    )


def _check(node: Node, verdict: CheckVerdict, log: StepLog) -> StepEntry:
    for warning in verdict.warnings:
        log.warning(f"{node.name}: {warning}")
    for error in verdict.errors:
        log.warning(f"{node.name}: {error}")
    return StepEntry(
        node.name, node.kind, "ok", asset=node.asset, blocking=node.blocking,
        passed=verdict.passed, severity=verdict.severity, description=verdict.description,
        metadata=dict(verdict.metadata),
    )


# The nodes, one function each: the same step and check functions the assets call.


def _corpus(ctx: RunContext, node: Node) -> StepEntry:
    from brain_pipeline.steps.ingest import observe, snapshot_facts

    ctx.snapshot = observe(ctx.cfg)
    ctx.observed[node.name] = ctx.snapshot.digest
    return StepEntry(
        node.name, node.kind, "ok", data_version=ctx.snapshot.digest,
        metadata=snapshot_facts(ctx.snapshot, str(ctx.cfg.build_dir)),
    )


def _eval_fixture(ctx: RunContext, node: Node) -> StepEntry:
    from brain_pipeline.steps.ingest import fixture_version

    version = fixture_version(ctx.cfg)
    ctx.observed[node.name] = version
    return StepEntry(
        node.name, node.kind, "ok", data_version=version,
        metadata={"path": str(ctx.cfg.evaluation.fixture)},
    )


def _knowledge_chunks(ctx: RunContext, node: Node) -> StepEntry:
    from brain_pipeline.steps.ingest import chunk_corpus, chunks_code_version
    from brain_pipeline.steps.trigger import with_trigger

    result = chunk_corpus(
        ctx.cfg, ctx.layout, ctx.snapshot, run_id=ctx.run_id, log=ctx.log_for(node.name)
    )
    return _asset(node, with_trigger(result, ctx.trigger), chunks_code_version(ctx.cfg))


def _knowledge_store(ctx: RunContext, node: Node) -> StepEntry:
    from brain_pipeline.steps.ingest import STORE_CODE_VERSION, assemble_knowledge_store

    result = assemble_knowledge_store(
        ctx.cfg, ctx.layout, run_id=ctx.run_id, log=ctx.log_for(node.name)
    )
    return _asset(node, result, STORE_CODE_VERSION)


def _embeddings(ctx: RunContext, node: Node) -> StepEntry:
    from brain_pipeline.steps.embed import embed_store, embeddings_code_version

    result = embed_store(
        ctx.cfg, ctx.layout, make_embedder=ctx.make_embedder, run_id=ctx.run_id,
        log=ctx.log_for(node.name),
    )
    return _asset(node, result, embeddings_code_version(ctx.cfg))


def _published_local(ctx: RunContext, node: Node) -> StepEntry:
    from brain_pipeline.steps.publish import PUBLISH_CODE_VERSION, publish_to_agent

    result = publish_to_agent(
        ctx.cfg, ctx.layout, force=ctx.force_publish, run_id=ctx.run_id,
        log=ctx.log_for(node.name), trigger=ctx.trigger,
    )
    return _asset(node, result, PUBLISH_CODE_VERSION)


def _published_s3(ctx: RunContext, node: Node) -> StepEntry:
    from brain_pipeline.steps.publish import PUBLISH_CODE_VERSION, publish_to_s3

    result = publish_to_s3(
        ctx.cfg, ctx.layout, force=ctx.force_publish, run_id=ctx.run_id,
        log=ctx.log_for(node.name), upload=ctx.upload,
    )
    return _asset(node, result, PUBLISH_CODE_VERSION, nothing=True)


def _retrieval_eval(ctx: RunContext, node: Node) -> StepEntry:
    from brain_pipeline.steps.evaluate import evaluate_for_check

    return _check(node, evaluate_for_check(ctx.cfg, ctx.run_id), ctx.log_for(node.name))


def _freshness(ctx: RunContext, node: Node) -> StepEntry:
    from brain_pipeline.steps.health import freshness_allowance, published_store_is_current

    now = ctx.clock()
    verdict = published_store_is_current(
        ctx.cfg, ctx.observed.get("corpus"), now, freshness_allowance(ctx.cfg, now)
    )
    return _check(node, verdict, ctx.log_for(node.name))


def _health(name: str) -> Callable[[RunContext, Node], StepEntry]:
    def run(ctx: RunContext, node: Node) -> StepEntry:
        from brain_pipeline.steps import health

        verdict: CheckVerdict = getattr(health, name)(ctx.cfg)
        return _check(node, verdict, ctx.log_for(node.name))

    return run


_RUNNERS: dict[str, Callable[[RunContext, Node], StepEntry]] = {
    "corpus": _corpus,
    "eval_fixture": _eval_fixture,
    "knowledge_chunks": _knowledge_chunks,
    "corpus_problems": _health("corpus_problems"),
    "knowledge_store": _knowledge_store,
    "no_empty_area": _health("no_empty_area"),
    "fits_agent_string_limit": _health("fits_agent_string_limit"),
    "embeddings": _embeddings,
    "retrieval_eval": _retrieval_eval,
    "embedding_coverage": _health("embedding_coverage"),
    "embedding_gaps": _health("embedding_gaps"),
    "published_local": _published_local,
    "vectors_reach_agent": _health("vectors_reach_agent"),
    "published_store_is_current": _freshness,
    "published_s3": _published_s3,
}
"""Every node of the plan (test_direct_run.py checks none is missing)."""
