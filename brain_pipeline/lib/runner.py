"""Materialise a selection in-process with its checks, for the CLI and tests."""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg

from brain_pipeline.config import ConfigError
from brain_pipeline.embedding.progress import shown_by_sink
from brain_pipeline.lib.dagster_private import event_data
from brain_pipeline.lib.instance import in_process_run_tags
from brain_pipeline.lib.steps import CORPUS, EVAL_FIXTURE, PUBLISH_ASSETS
from brain_pipeline.steps import run_summary as summary
from brain_pipeline.steps.trigger import TRIGGER_TAG
from brain_pipeline.utils.markdown import md_undefanged
from brain_pipeline.utils.terminal import printable


class _StepFormatter(logging.Formatter):
    """`  step_name         message`: what a person at a terminal needs, no run ids."""

    def format(self, record: logging.LogRecord) -> str:
        meta = getattr(record, "dagster_meta", None) or {}
        step = meta.get("step_key") or ""
        message = meta.get("orig_message") or record.getMessage()
        level = "" if record.levelno < logging.WARNING else record.levelname.lower()
        # corpus paths and text in a message must not drive the terminal (above a
        # progress bar the line bypasses the command's escaping stream)
        return printable(summary.step_line(str(step), str(message), level))


#: Dagster events the run summary states in one line each (with the root cause), so
#: their log lines (tracebacks, "Execution of step ... failed") would only repeat it.
_SUMMARISED_EVENTS = frozenset(
    {
        dg.DagsterEventType.STEP_FAILURE,
        dg.DagsterEventType.RUN_FAILURE,  # its value is still "PIPELINE_FAILURE"
        dg.DagsterEventType.STEP_SKIPPED,
    }
)


class _SummarisedElsewhere(logging.Filter):
    """Drop what the summary says better: a failed first step is one summary line, not
    a cascade of "Dependencies for step ... Not executing." (Dagster logs those as plain
    errors, without an event, one per downstream step; `-v` still shows them)."""

    def filter(self, record: logging.LogRecord) -> bool:
        meta = getattr(record, "dagster_meta", None) or {}
        event = meta.get("dagster_event") or getattr(record, "dagster_event", None)
        if isinstance(event, dg.DagsterEvent) and event.event_type in _SUMMARISED_EVENTS:
            return False
        message = str(meta.get("orig_message") or record.getMessage())
        return not message.rstrip().endswith("Not executing.")


class _ShownByTheBar(logging.Filter):
    """Drop a step's periodic progress line while a terminal's bar shows the same figures
    (the run's event log keeps the lines; only the console skips them)."""

    def filter(self, record: logging.LogRecord) -> bool:
        meta = getattr(record, "dagster_meta", None) or {}
        return not shown_by_sink(str(meta.get("orig_message") or record.getMessage()))


@dg.logger(
    config_schema={"log_level": dg.Field(str, is_required=False, default_value="INFO")},
    description="One concise line per message the assets log, for the command line.",
)
def concise_console_logger(init_context: dg.InitLoggerContext) -> logging.Logger:
    level = init_context.logger_config["log_level"]
    logger = logging.Logger("brain_pipeline.run", level=level)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_StepFormatter())
    handler.addFilter(_SummarisedElsewhere())
    handler.addFilter(_ShownByTheBar())
    logger.addHandler(handler)
    return logger


def with_concise_console(
    job: dg.JobDefinition, run_config: dict[str, Any]
) -> tuple[dg.JobDefinition, dict[str, Any]]:
    """`job` and `run_config` logging through `concise_console_logger` at INFO: the steps'
    own lines (progress, warnings) without Dagster's per-event debug output."""
    logger = {"concise": {"config": {"log_level": "INFO"}}}
    return job.with_logger_defs({"concise": concise_console_logger}), {
        **run_config,
        "loggers": logger,
    }


class SelectionError(ValueError):
    """The --select string does not parse or names no asset; the message lists the assets."""


@dataclass
class MaterializeOutcome:
    success: bool
    run_id: str
    lines: list[str] = field(default_factory=list)
    failed_checks: list[str] = field(default_factory=list)
    interrupted: str | None = None
    """Set when Ctrl-C stopped the run: the line to print (what the checkpoint holds)."""


#: What a step raised when Ctrl-C stopped it (Dagster wraps KeyboardInterrupt in its own).
_INTERRUPTS = ("KeyboardInterrupt", "EmbeddingCancelled", "DagsterExecutionInterruptedError")


def _interruption(event: dg.DagsterEvent) -> str | None:
    """The line for a step that Ctrl-C stopped, or None for any other failure."""
    data = event_data(event) if event.is_step_failure else None
    error = data.error if data else None
    while error is not None:
        if (error.cls_name or "") in _INTERRUPTS:
            message = (error.message or "").strip().splitlines()
            text = message[0] if message else ""
            head, _, rest = text.partition(": ")
            text = rest if head.endswith(error.cls_name or "") else text
            return text if text.startswith("interrupted") else "interrupted"
        error = error.cause or error.context
    return None


def _is_check_step_verdict(event: dg.DagsterEvent) -> bool:
    """A check step's own success, or its failure *because* its check failed: both repeat
    the evaluation line (`check  name: FAILED why`), so neither gets a line of its own."""
    if event.is_step_success:
        return True
    if not event.is_step_failure:
        return False
    data = event_data(event)
    error = data.error if data else None
    return error is not None and (error.cls_name or "") == "DagsterAssetCheckFailedError"


def _error_line(error: Any) -> str:
    """One error of a chain as one line, `Name: message` without the module path."""
    text = " ".join(line.strip() for line in (error.message or "").strip().splitlines())
    name = error.cls_name or ""
    head, sep, rest = text.partition(": ")
    if sep and name and (head == name or head.endswith("." + name)):
        text = rest if name == "Failure" else f"{name}: {rest}"  # drop the module path
    elif name and not sep and text.endswith(name):
        text = name  # an exception raised without a message
    return text.strip()


def error_cause(error: Any) -> str:
    """What a failed step (or resource) raised, in one line: the run summary's and the
    notification's cause.

    Dagster wraps whatever a step raised in `DagsterExecutionStepExecutionError: Error
    occurred while executing op ...`, which says nothing. The line shows instead the
    exception the step's code raised and, when that one was itself caused by another,
    the innermost cause (`FileNotFoundError: [Errno 2] No such file or directory: '/x'`)
    — found by walking the error's `.cause` chain (and `.context` past Dagster's own
    wrappers). A `dg.Failure` shows its description only: it was written for people,
    and what caused it may carry details (request bodies, keys) that must stay out.
    """
    framework = error
    while framework.cls_name and framework.cls_name.startswith("Dagster"):
        nested = framework.cause or framework.context
        if nested is None:
            break
        framework = nested
    raised = framework  # what the step's code raised
    if raised.cls_name == "Failure":
        return _error_line(raised) or "failed"
    root = raised
    while root.cause is not None:
        root = root.cause
    outer, inner = _error_line(raised), _error_line(root)
    if root is raised or not inner:
        return outer or "failed"
    if not outer or inner.endswith(outer):
        return inner
    return f"{outer} (caused by {inner})"


def _describe(
    event: dg.DagsterEvent,
    *,
    lexical: bool = False,
    evaluation: dg.AssetCheckEvaluation | None = None,
) -> str | None:
    """One summary line per step outcome and check (`evaluation`: the check evaluation
    an ASSET_CHECK_EVALUATION event reports); a failure names its root cause
    (`error_cause`). Tracebacks stay in Dagster's own logs (`-v`). The lines' shapes are
    `steps.run_summary`'s, shared with runs made without Dagster.
    """
    kind = event.event_type
    if kind == dg.DagsterEventType.STEP_SUCCESS:
        return summary.ok_line(str(event.step_key))
    if kind == dg.DagsterEventType.STEP_FAILURE:
        data = event_data(event)
        reason = error_cause(data.error) if data and data.error else "failed"
        if data and data.error and "DagsterExecutionLoadInputError" in (data.error.cls_name or ""):
            reason = (
                "an upstream asset was never materialised in this instance; select it too, "
                "e.g. --select '*" + str(event.step_key) + "'"
            )
        return summary.failed_line(str(event.step_key), reason)
    if kind == dg.DagsterEventType.STEP_SKIPPED:
        return f"  skipped  {event.step_key}"
    if kind == dg.DagsterEventType.RESOURCE_INIT_FAILURE:
        # Before any step: e.g. the build directory's lock cannot be created or taken.
        error = getattr(event_data(event), "error", None)
        return summary.failed_line("run start", error_cause(error) if error else "resources failed")
    if kind == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
        name = getattr(getattr(evaluation, "asset_check_key", None), "name", event.step_key)
        return summary.check_line(
            str(name),
            passed=getattr(evaluation, "passed", None),
            severity=getattr(getattr(evaluation, "severity", None), "value", "ERROR"),
            # Written as defanged Markdown for the UI (lib.steps.check_result); plain here.
            description=md_undefanged(getattr(evaluation, "description", None) or ""),
            metadata=getattr(evaluation, "metadata", None) or {},
            lexical=lexical,
        )
    return None


def observations_for(keys: AbstractSet[dg.AssetKey]) -> set[dg.AssetKey]:
    """The observations a selection starts from, so every run reads a fresh observation.

    Chunking reads the corpus snapshot this run observed; the evaluation's lineage names
    the fixture version it read; the currency check compares with this run's corpus.
    """
    names = {key.to_user_string() for key in keys}
    wanted: set[dg.AssetKey] = set()
    if names & {"knowledge_chunks", "published_local"}:
        wanted.add(CORPUS)
    if "embeddings" in names:
        wanted.add(EVAL_FIXTURE)
    return wanted


def resolve_selection(selection: str, definitions: dg.Definitions) -> set[dg.AssetKey]:
    """The asset keys `selection` names (SelectionError, listing the assets, if none)."""
    graph = definitions.resolve_asset_graph()
    known = ", ".join(sorted(k.to_user_string() for k in graph.get_all_asset_keys()))
    with warnings.catch_warnings():
        # Parsing '*' touches a beta parameter inside Dagster itself; not our concern.
        warnings.simplefilter("ignore", category=dg.BetaWarning)
        try:
            keys = set(dg.AssetSelection.from_string(selection).resolve(graph))
        except dg.DagsterError as exc:
            said = " ".join(str(exc).split()).rstrip(".")  # Dagster's is several lines
            raise SelectionError(f"{selection!r}: {said}. Assets: {known}") from None
    if not keys:
        raise SelectionError(f"the selection {selection!r} matches no asset. Assets: {known}")
    return keys


def selected_asset_names(selection: str, definitions: dg.Definitions) -> list[str]:
    """The asset names a run of `selection` runs, its observations included (what the
    preflight checks the inputs of)."""
    keys = resolve_selection(selection, definitions)
    return sorted(k.to_user_string() for k in keys | observations_for(keys))


def selects_publishing(keys: AbstractSet[dg.AssetKey]) -> bool:
    return any(key.to_user_string() in PUBLISH_ASSETS for key in keys)


def materialize_selection(
    selection: str = "*",
    *,
    definitions: dg.Definitions,
    instance: dg.DagsterInstance | None = None,
    force_publish: bool = False,
    force_reason: str = "",
    verbose: bool = False,
    echo: Callable[[str], None] | None = None,
    run_id: str | None = None,
    provider_label: str | None = None,
    lexical: bool = False,
    build_dir: Path | None = None,
    trigger: str | None = None,
) -> MaterializeOutcome:
    """Run the implicit asset job over `selection`, checks of the selected assets included.

    Dagster includes the checks of selected assets, so a failing blocking check stops the
    publish steps of the same run exactly as a UI launch or the schedule would.
    `build_dir` (for the run's build-directory tag) comes from the caller's configuration
    when it has read it already; otherwise the settings resource reads it. `trigger` says who
    launched the run (`steps.trigger.TRIGGER_TAG`; default: by hand). `force_publish`
    sets the publish assets' `force` config with `force_reason` as its `reason`.
    """
    defs = definitions
    keys = resolve_selection(selection, defs)
    keys = keys | observations_for(keys)
    job = defs.resolve_implicit_global_asset_job_def()
    run_config: dict[str, Any] = {}
    if not verbose:
        job, run_config = with_concise_console(job, run_config)
    publish_keys = {dg.AssetKey(name) for name in PUBLISH_ASSETS}
    if force_publish:
        run_config["ops"] = {
            key.to_python_identifier(): {"config": {"force": True, "reason": force_reason}}
            for key in keys & publish_keys
        }
    settings: Any = (defs.resources or {}).get("settings")
    try:
        # The settings resource knows the build directory (the run's build-directory tag).
        if build_dir is None and hasattr(settings, "load"):
            build_dir = settings.load().build_dir
    except ConfigError:
        build_dir = None  # the assets report the configuration error themselves
    result = job.execute_in_process(
        instance=instance or dg.DagsterInstance.get(),
        asset_selection=sorted(keys, key=lambda k: k.to_user_string()),
        run_config=run_config,
        raise_on_error=False,
        run_id=run_id,
        tags={
            "launched_by": "brain-pipeline materialize",
            "selection": selection,
            **({TRIGGER_TAG: trigger} if trigger else {}),
            # pid/host: tells a dead run from a live one; build dir: which directory it wrote.
            **in_process_run_tags(build_dir),
        },
    )
    outcome = MaterializeOutcome(success=result.success, run_id=result.run_id)
    outcome.interrupted = next(filter(None, map(_interruption, result.all_events)), None)
    if outcome.interrupted is not None:
        echo = None  # Ctrl-C: the caller says what was saved, in one line
    if echo is not None:
        echo(summary.header(provider_label))

    def say(line: str) -> None:
        outcome.lines.append(line)
        if echo is not None:
            echo(line)

    # A check's own step succeeding says nothing its evaluation line did not: one line per
    # check. An asset's step that evaluates its checks too stored the asset even when a
    # blocking one failed (Dagster then fails the step): it is `ok`, the check line says
    # what blocked the rest.
    check_event = dg.DagsterEventType.ASSET_CHECK_EVALUATION
    materialisation = dg.DagsterEventType.ASSET_MATERIALIZATION
    evaluated = {e.step_key for e in result.all_events if e.event_type == check_event}
    materialised = {e.step_key for e in result.all_events if e.event_type == materialisation}
    check_steps = evaluated - materialised
    # The check evaluations, in the order of their events among all_events.
    evaluations = iter(result.get_asset_check_evaluations())
    for event in result.all_events:
        evaluation = next(evaluations, None) if event.event_type == check_event else None
        if event.step_key in check_steps and _is_check_step_verdict(event):
            continue
        if event.step_key in materialised and _is_check_step_verdict(event):
            line: str | None = summary.ok_line(str(event.step_key))
        else:
            line = _describe(event, lexical=lexical, evaluation=evaluation)
        if line is None:
            continue
        say(line)
        if line.startswith("  check") and "FAILED" in line:
            outcome.failed_checks.append(line.strip())
    finished = {e.step_key for e in result.all_events if e.step_key and e.is_step_event}
    for key in sorted(keys, key=lambda k: k.to_user_string()):
        step = key.to_python_identifier()
        if step not in finished:
            say(summary.blocked_line(step))
    return outcome


def _said(job: dg.JobDefinition, result: Any) -> str:
    """What a successful operation says it did: the `summary` metadata of its first
    materialisation that has one (an asset job, e.g. `rollback_job`), else its one op's
    output."""
    nodes = job.graph.node_names()
    for name in nodes:
        for materialization in result.asset_materializations_for_node(name):
            said = materialization.metadata.get("summary")
            if said is not None:
                return str(getattr(said, "value", said))
    (node,) = nodes
    return str(result.output_for_node(node))


@dataclass
class OperationOutcome:
    """How a one-op job (or an asset job such as `rollback_job`) run by the command line
    ended (`run_operation`)."""

    success: bool
    run_id: str
    output: str = ""
    """The op's output (what it says it did) when it succeeded."""
    error: str = ""
    """Its failure's description (written for people) when it failed."""
    refused: bool = False
    """The failure said nothing was changed (its `refused` metadata)."""


def run_operation(
    job_name: str,
    *,
    definitions: dg.Definitions,
    instance: dg.DagsterInstance,
    run_config: dict[str, Any],
    run_id: str,
    build_dir: Path,
    trigger: str,
) -> OperationOutcome:
    """Run the one-op job `job_name` in this process as a Dagster run of `instance`, with
    the concise console logger; its output or its failure's one line, for the caller."""
    job, run_config = with_concise_console(definitions.resolve_job_def(job_name), run_config)
    result = job.execute_in_process(
        instance=instance,
        run_config=run_config,
        raise_on_error=False,
        run_id=run_id,
        tags={TRIGGER_TAG: trigger, **in_process_run_tags(build_dir)},
    )
    if result.success:
        return OperationOutcome(True, result.run_id, output=_said(job, result))
    for event in result.all_events:
        failure = event_data(event) if event.is_step_failure else None
        if failure is not None:
            user = failure.user_failure_data
            if user is not None:
                refused = user.metadata.get("refused")
                return OperationOutcome(
                    False,
                    result.run_id,
                    error=str(user.description or "failed"),
                    refused=bool(getattr(refused, "value", refused)),
                )
            error = failure.error
            return OperationOutcome(
                False, result.run_id, error=str(error.message if error else "failed").strip()
            )
        if event.is_resource_init_failure:
            return OperationOutcome(False, result.run_id, error=_describe(event) or "failed")
    return OperationOutcome(False, result.run_id, error="the run failed")
