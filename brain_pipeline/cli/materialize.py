"""`brain-pipeline materialize`: a Dagster run of the asset graph, checks included.

Every run that builds is a Dagster run: this command launches the selection (default:
every asset and its checks) in this process against the shared instance, so the run is
in the UI's Runs list as it happens, with its logs, failure events and re-execution, a
raising or failing blocking check blocks what is downstream exactly as in a run the UI,
the schedule or automation launches, and its Gemini step takes a slot of the
`gemini_embedding` pool. `execute_in_process` does not pass through the instance's run
queue (its run coordinator): one writer per build directory is the build directory's
lock, held for the whole run.

In front of it sits the up-to-date skip: when nothing could change since the last
successful full run, no run starts and Dagster is not even imported.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from brain_pipeline.cli import CommandError, configuration, force_refusal

if TYPE_CHECKING:
    from dagster import DagsterInstance, Definitions

    from brain_pipeline.config import BrainConfig
    from brain_pipeline.lib.runner import MaterializeOutcome


HELP = "materialise assets (default: everything) with their checks, as a Dagster run"
DESCRIPTION = """\
Launch a Dagster run of the selected assets (default: every asset) in this process,
including the checks of the selected assets, so a failing or raising blocking check
(retrieval_eval, fits_agent_string_limit) blocks publishing. The run uses the instance
the web UI uses (brain-pipeline ui) and is shown in its Runs list as it happens. Exits
non-zero when any step fails or is blocked.

Without --select, the run is skipped when nothing could change: the corpus, fixture,
configuration, code and embedding provider are those of the last successful full run,
and its build and live publication are untouched (same stat signatures). It then prints
"up to date: nothing changed since run <id> (published <when>)" and exits 0 without
starting a run. --force runs anyway; so do --select, --retry-refused, --force-publish
and --rebind. Every run forgets that record as it starts (a failed or partial run is
never followed by a skip); a successful full run launched from the UI, a schedule or
automation is recorded by the daemon's up_to_date_record sensor. At most once an hour
the skip asks the Dagster instance whether it still holds that run (not on a new
DAGSTER_HOME, not after a wipe) and reports the verified publication to it, so the
freshness policy on published_local sees it.

One writer at a time: the run holds the ledger's run lease (and the publish root's lock
when it publishes) for its whole duration. A second run waits up to locks.wait_seconds
(BRAIN_LOCK_WAIT_SECONDS) and then exits 75 naming the holder (pid, run id, host).

The command sends the run's notification itself, read from the finished run in the
instance, unless a running daemon's notification sensor sent it first: once either way.

Selection uses Dagster's asset selection syntax, e.g.:
  brain-pipeline materialize                          everything
  brain-pipeline materialize --select '*embeddings'   embeddings and everything upstream
  brain-pipeline materialize --select 'group:ingest'  discovery, chunks and the store
"""

# Exit status when another run holds the build directory or publish root (sysexits'
# EX_TEMPFAIL: try again later).
EXIT_BUSY = 75
# The inputs, the configuration or the selection cannot be used: nothing ran.
EXIT_UNUSABLE = 2
# Ctrl-C: the shell's convention for a process ended by SIGINT (128 + 2).
EXIT_INTERRUPTED = 130
EVERYTHING = "*"
TRIGGER_VARIABLE = "BRAIN_TRIGGER"
"""Names who launched the command (a cron line sets it); default: by hand, or a script."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--select",
        default=None,
        metavar="SELECTION",
        help="asset selection (Dagster syntax); default: every asset, skipped when "
        "nothing changed since the last successful full run",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="run even when nothing changed since the last successful full run",
    )
    parser.add_argument(
        "--force-publish",
        action="store_true",
        help="publish even though a blocking check failed or never judged the build "
        "(needs --reason; recorded and marked FORCED; never an empty store or one over "
        "the agent's string limit; refused where publish.allow_force is false)",
    )
    parser.add_argument(
        "--reason",
        default=None,
        metavar="TEXT",
        help="why you force this publication (with --force-publish): recorded with it",
    )
    parser.add_argument(
        "--rebind",
        action="store_true",
        help="let this Dagster instance serve the configured build directory from now on "
        "(an instance serves one build directory; runs for another are refused)",
    )
    parser.add_argument(
        "--retry-refused",
        action="store_true",
        help="send again the texts the embedding service refused (or that were skipped as "
        "too long, or kept getting invalid answers) in earlier runs; otherwise they are "
        "not re-sent until their text, the model, the dimension or embedding.too_long "
        "changes",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="say why the next run cannot be skipped, and show Dagster's own step logs",
    )


def note(message: str) -> None:
    """One line of the command's own on stderr."""
    print(f"brain-pipeline materialize: {message}", file=sys.stderr, flush=True)


def _refuse(problems: Iterable[object | None]) -> None:
    """Stop before any work, one line per unusable input (exit 2); None is no problem."""
    lines = [str(problem) for problem in problems if problem is not None]
    if lines:
        raise CommandError("\n".join(lines), EXIT_UNUSABLE)


def _nothing_to_do(cfg: BrainConfig, now: float | None = None) -> bool:
    """True (after saying so) when the last successful full run is provably current.

    Asked under the ledger's run lease, without waiting: a run in progress is a
    doubt, and a doubt means a run (which then waits for the lock as usual). Dagster is
    imported only when the instance is due to be asked again (`UpToDate.consult_due`,
    at most once an hour): whether it still holds the recorded run. The skip writes
    nothing there (no materialisation, no observation, no run).
    """
    from brain_pipeline.config import memory_of
    from brain_pipeline.state.lock import LockBusyError, make_holder
    from brain_pipeline.state.run_lease import run_lease
    from brain_pipeline.steps.up_to_date import check

    now = time.time() if now is None else now
    ledger = memory_of(cfg).ledger
    try:
        with run_lease(
            ledger, run_id=None, wait_seconds=0, holder=make_holder("brain-pipeline materialize")
        ):
            verdict = check(cfg)
            if verdict.current and verdict.consult_due(now):
                from brain_pipeline.defs.up_to_date import consult_instance

                verdict = consult_instance(cfg, verdict, now)
    except LockBusyError:
        return False
    if verdict.current:
        print(verdict.message(), flush=True)
    elif verdict.reason:
        note(verdict.message())
    return verdict.current


def asks_for_work(args: argparse.Namespace) -> str | None:
    """The flag that makes a run wanted even when nothing changed, if any: the skip is
    never taken over a request."""
    if args.force:
        return None  # --force needs no explaining
    if args.retry_refused:
        return "--retry-refused asks for a run"
    if args.force_publish:
        return "--force-publish asks for a run"
    if args.rebind:
        return "--rebind asks for a run"
    return None


def forget_refusals(cfg: BrainConfig) -> None:
    """`--retry-refused`: drop the remembered refusals (in the ledger), under the ledger's
    run lease, so this run's embedding step sends those texts again."""
    from brain_pipeline.config import memory_of
    from brain_pipeline.embedding.gaps import forget_refusals as forget

    forgotten = forget(memory_of(cfg))
    note(f"--retry-refused: {forgotten} refused text(s) will be sent again")


def launched_by() -> str:
    """Who started this command, for the run's trigger: BRAIN_TRIGGER (e.g. set in a cron
    line) when set, else by hand at a terminal, else a script without one."""
    named = os.environ.get(TRIGGER_VARIABLE, "").strip()
    if named:
        return named
    if sys.stdin is not None and sys.stdin.isatty():
        return "brain-pipeline materialize, by hand at a terminal"
    return "brain-pipeline materialize, from a script or cron (no terminal)"


def run(args: argparse.Namespace) -> int:
    from brain_pipeline.preflight import Needs, check_inputs

    # Preflight before Dagster is even imported: a missing corpus or fixture, a missing
    # key or an unwritable publish root is one line in well under a second, never a run
    # that embeds for minutes and then fails.
    cfg = configuration()
    how = '--force-publish --reason "why this build must go out"'
    refused = force_refusal(
        cfg, args.force_publish, args.reason, flag="--force-publish", what="publication", how=how
    )
    _refuse([refused])
    if args.select is None:  # everything
        _refuse(check_inputs(cfg, Needs()))
        wanted = asks_for_work(args)
        if wanted is not None:
            note(f"running: {wanted}")
        elif not args.force and _nothing_to_do(cfg):
            return 0
        args.select = EVERYTHING
    return _launch(cfg, args)


def _launch(cfg: BrainConfig, args: argparse.Namespace) -> int:
    from brain_pipeline.config import memory_of
    from brain_pipeline.preflight import Needs, check_inputs, describe_inputs
    from brain_pipeline.state.lock import LockBusyError, make_holder
    from brain_pipeline.state.run_lease import hold_run_locks

    run_id = str(uuid.uuid4())
    holder = make_holder(f"brain-pipeline materialize --select {args.select}", run_id)
    started = time.monotonic()
    from brain_pipeline.cli.instance_setup import location_and_instance

    definitions, instance = location_and_instance(cfg)
    from brain_pipeline.lib.instance import reap_dead_runs, reaped_message, run_is_over
    from brain_pipeline.lib.runner import (
        SelectionError,
        materialize_selection,
        resolve_selection,
        selected_asset_names,
        selects_publishing,
    )

    # Every run this command launches: the same definitions, instance, console and tags.
    launch = functools.partial(
        materialize_selection,
        definitions=definitions,
        instance=instance,
        force_reason=args.reason or "",
        verbose=args.verbose,
        echo=print,
        provider_label=cfg.provider_label(),
        lexical=cfg.effective_provider() == "none",
        build_dir=cfg.build_dir,
    )
    forced: MaterializeOutcome | None = None
    try:
        if args.select != EVERYTHING:
            names = selected_asset_names(args.select, definitions)
            _refuse(check_inputs(cfg, Needs.for_assets(names)))
        note(describe_inputs(cfg))
        # The publish root is locked too when the selection publishes.
        publishes = selects_publishing(resolve_selection(args.select, definitions))
        with hold_run_locks(
            memory_of(cfg).ledger,
            cfg.publish_root() if publishes else None,
            run_id=run_id,
            wait_seconds=cfg.locks.wait_seconds,
            holder=holder,
            finished=run_is_over(instance),
            on_wait=note,
        ):
            if args.rebind:
                from brain_pipeline.lib.steps import rebind_build_dir

                before = rebind_build_dir(instance, cfg)
                note(f"this instance now serves {cfg.build_dir} (it served {before or 'none'})")
            for dead in reap_dead_runs(instance):
                note(reaped_message(dead))
                _notify(instance, dead.run_id, cfg)  # a killed run is a failed run
            if args.retry_refused:
                forget_refusals(cfg)
            from brain_pipeline.cli.progress_bar import progress_for

            # A bar for long steps on a terminal; plain periodic lines otherwise.
            with progress_for(sys.stderr):
                outcome = launch(
                    args.select,
                    force_publish=args.force_publish,
                    run_id=run_id,
                    trigger=launched_by(),
                )
            if outcome.interrupted is None:
                # Still under the run's locks: what is recorded is what this run left (the
                # run's resource wrote it as pending; the sensor does this for other runs).
                from brain_pipeline.defs.up_to_date import confirm_finished_run

                why_not = confirm_finished_run(instance, outcome.run_id, cfg)
                if why_not and args.verbose:
                    note(f"the next run cannot be skipped: {why_not}")
                forced = _force_past_blocked_checks(args, definitions, launch, outcome)
    except LockBusyError as exc:
        raise CommandError(exc, EXIT_BUSY) from None
    except SelectionError as exc:
        raise CommandError(f"bad --select: {exc}", EXIT_UNUSABLE) from None
    _notify(instance, outcome.run_id, cfg)
    if forced is not None:
        _notify(instance, forced.run_id, cfg)
        outcome = forced
    if outcome.interrupted is not None:
        note(outcome.interrupted)
        return EXIT_INTERRUPTED
    print(
        f"{'succeeded' if outcome.success else 'FAILED'}: run {outcome.run_id} "
        f"in {time.monotonic() - started:.1f}s (see it in the UI: brain-pipeline ui)",
        file=sys.stderr,
    )
    return 0 if outcome.success else 1


def blocked_only_by_checks(outcome: MaterializeOutcome) -> list[str]:
    """The failed blocking checks when they alone kept the publish steps of `outcome`
    from running (no step failed of its own, a publish step was blocked); [] otherwise."""
    from brain_pipeline.lib.steps import PUBLISH_ASSETS
    from brain_pipeline.steps import run_summary as summary

    failed_steps = [line for line in outcome.lines if line.startswith(summary.failed_line("", ""))]
    blocked = [name for name in PUBLISH_ASSETS if summary.blocked_line(name) in outcome.lines]
    if outcome.success or outcome.interrupted is not None or failed_steps or not blocked:
        return []
    return list(outcome.failed_checks)


def _force_past_blocked_checks(
    args: argparse.Namespace,
    definitions: Definitions,
    launch: Callable[..., MaterializeOutcome],
    outcome: MaterializeOutcome,
) -> MaterializeOutcome | None:
    """`--force-publish` in one command: the run built and checked everything and only its
    failed blocking checks kept the publish steps from running (Dagster blocks them inside
    the run, whatever the config says), so a publish-only run with force and the reason
    follows, through the same launch; the gate there still refuses what force never
    overrides. None when there is nothing to force."""
    if not args.force_publish:
        return None
    overridden = blocked_only_by_checks(outcome)
    if not overridden:
        return None
    from brain_pipeline.lib.runner import resolve_selection
    from brain_pipeline.lib.steps import PUBLISH_ASSETS

    selected = {key.to_user_string() for key in resolve_selection(args.select, definitions)}
    publish = [name for name in sorted(PUBLISH_ASSETS) if name in selected]
    note(
        f"--force-publish: run {outcome.run_id} was blocked by "
        f"{'; '.join(' '.join(c.split()) for c in overridden)}; publishing anyway "
        f"(reason: {args.reason}) in a publish-only run"
    )
    return launch(
        " or ".join(f"key:{name}" for name in publish),
        force_publish=True,
        trigger=f"{launched_by()} (--force-publish after run {outcome.run_id})",
    )


def _notify(instance: DagsterInstance, run_id: str, cfg: BrainConfig) -> None:
    """The run's one notification (`defs.notify`): sent here unless a notification
    sensor already has it (the run's lease and delivery record make it once); then any
    earlier run's message that is due to be tried again (an endpoint that was down),
    so they go out without a daemon too. A channel that is down is one line here; it
    never changes the exit status."""
    if not cfg.notify.configured:
        return
    from brain_pipeline.defs.notify import notify_finished_run, redeliver_due

    line = notify_finished_run(instance, run_id, cfg)
    for said in ([line] if line else []) + redeliver_due(instance, cfg):
        note(said)
