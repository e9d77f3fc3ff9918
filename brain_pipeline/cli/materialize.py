"""`brain-pipeline materialize`: run the asset graph in-process, checks included."""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from typing import TYPE_CHECKING

from brain_pipeline.cli.run_direct import EXIT_BUSY, EXIT_INTERRUPTED, note

if TYPE_CHECKING:
    from dagster import Definitions

    from brain_pipeline.config import BrainConfig


HELP = "materialise assets (default: everything) with their checks, in-process"
DESCRIPTION = """\
Materialise the asset graph in this process, including the checks of the selected assets
(so a failing retrieval_eval blocks publishing). Exits non-zero when any step fails or
is blocked.

Without --select, everything runs without Dagster: the same steps and checks, in the
graph's order, with a blocking check stopping what is downstream, but no Dagster
import, instance or event storage (3-4 CPU-seconds less per run on a 2-core machine).
The run's journal is kept in the build directory (state/runs/); the code location's
direct_runs sensor reports it to the Dagster instance, so the UI shows it at the
sensor's next tick. With --select (e.g. '*' for everything) the run is a Dagster run in
the instance the web UI uses, shown as it happens; so is --rebind.

Without --select, the run is skipped when nothing could change: the corpus, fixture,
configuration, code and embedding provider are those of the last successful full run,
and its build and live publication are untouched (same stat signatures). It then prints
"up to date: nothing changed since run <id> (published <when>)" and exits 0.
--force runs anyway; any --select always runs.

One writer at a time: the run holds the build directory's lock (and the publish root's
when it publishes) for its whole duration. A second run waits up to locks.wait_seconds
(BRAIN_LOCK_WAIT_SECONDS) and then exits 75 naming the holder (pid, run id, host).

Selection uses Dagster's asset selection syntax, e.g.:
  brain-pipeline materialize                          everything, without Dagster
  brain-pipeline materialize --select '*'             everything, as a Dagster run
  brain-pipeline materialize --select '*embeddings'   embeddings and everything upstream
  brain-pipeline materialize --select 'group:ingest'  discovery, chunks and the store
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--select",
        default=None,
        metavar="SELECTION",
        help="asset selection (Dagster syntax), run as a Dagster run; default: every asset, "
        "run without Dagster ('*' runs every asset as a Dagster run)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="run even when nothing changed since the last successful full run",
    )
    parser.add_argument(
        "--force-publish",
        action="store_true",
        help="publish even when the latest evaluation did not pass (logged loudly)",
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
        help="say why the next run cannot be skipped; in a Dagster run (--select), show "
        "Dagster's own step logs too",
    )


def _selects_publishing(selection: str, definitions: Definitions) -> bool:
    """Whether `selection` includes a publish asset (then the publish root is locked too).

    A selection that does not parse answers False: materialize_selection then reports it
    before anything runs.
    """
    from brain_pipeline.lib.runner import SelectionError, resolve_selection, selects_publishing

    try:
        return selects_publishing(resolve_selection(selection, definitions))
    except SelectionError:
        return False


def _refuse(problems: list[object]) -> int:
    for problem in problems:
        print(f"brain-pipeline materialize: {problem}", file=sys.stderr)
    return 2


def _nothing_to_do(cfg: BrainConfig) -> bool:
    """True (after saying so) when the last successful full run is provably current.

    Asked under the build directory's lock, without waiting: a run in progress is a
    doubt, and a doubt means a run (which then waits for the lock as usual).
    """
    from brain_pipeline.state.lock import LockBusyError, build_dir_lock, make_holder
    from brain_pipeline.steps.up_to_date import check

    try:
        with build_dir_lock(
            cfg.build_dir, wait_seconds=0, holder=make_holder("brain-pipeline materialize")
        ):
            verdict = check(cfg)
    except LockBusyError:
        return False
    if verdict.current:
        print(verdict.message(), flush=True)
    elif verdict.reason:
        note(verdict.message())
    return verdict.current


def run(args: argparse.Namespace) -> int:
    from brain_pipeline.config import ConfigError, load_config
    from brain_pipeline.preflight import Needs, check_inputs, describe_inputs

    # Preflight before Dagster is even imported: a missing corpus or fixture, a missing
    # key or an unwritable publish root is one line in well under a second, never a run
    # that embeds for minutes and then fails.
    try:
        cfg = load_config()
    except ConfigError as exc:
        print(f"brain-pipeline materialize: {exc}", file=sys.stderr)
        return 2
    if args.select is None:  # everything
        problems = check_inputs(cfg, Needs())
        if problems:
            return _refuse(list(problems))
        if not args.force and not args.rebind and _nothing_to_do(cfg):
            return 0
        if not args.rebind:  # --rebind is about the Dagster instance: a Dagster run
            from brain_pipeline.cli.run_direct import run_direct

            return run_direct(cfg, args)
        args.select = "*"
    from brain_pipeline.cli.instance_setup import configured_instance

    if configured_instance("materialize") is None:
        return 2
    from brain_pipeline.lib.instance import open_instance, reap_dead_runs, reaped_message
    from brain_pipeline.lib.runner import (
        SelectionError,
        materialize_selection,
        selected_asset_names,
    )
    from brain_pipeline.state.layout import StateLayout
    from brain_pipeline.state.lock import LockBusyError, hold_run_locks, make_holder
    from brain_pipeline.steps.up_to_date import current_inputs, record_successful_run
    from brain_pipeline.steps.up_to_date import forget as forget_last_run

    run_id = str(uuid.uuid4())
    inputs_at_start = current_inputs(cfg, StateLayout.of(cfg.build_dir), run_id)
    holder = make_holder(f"brain-pipeline materialize --select {args.select}", run_id)
    started = time.monotonic()
    from brain_pipeline.definitions import build_definitions

    definitions = build_definitions(config=cfg)
    if args.select != "*":
        try:
            names = selected_asset_names(args.select, definitions)
        except SelectionError as exc:
            print(f"brain-pipeline materialize: bad --select: {exc}", file=sys.stderr)
            return 2
        problems = check_inputs(cfg, Needs.for_assets(names))
        if problems:
            return _refuse(list(problems))
    note(describe_inputs(cfg))
    publishes = _selects_publishing(args.select, definitions)
    try:
        with hold_run_locks(
            cfg.build_dir,
            cfg.publish_root() if publishes else None,
            wait_seconds=cfg.locks.wait_seconds,
            holder=holder,
            on_wait=note,
        ):
            forget_last_run(StateLayout.of(cfg.build_dir))  # proven again only by success
            instance = open_instance()
            if args.rebind:
                from brain_pipeline.lib.steps import rebind_build_dir

                before = rebind_build_dir(instance, cfg.build_dir)
                note(f"this instance now serves {cfg.build_dir} (it served {before or 'none'})")
            for dead in reap_dead_runs(instance):
                note(reaped_message(dead))
            if args.retry_refused:
                from brain_pipeline.cli.run_direct import forget_refusals

                forget_refusals(cfg.build_dir)
            from brain_pipeline.cli.progress_bar import progress_for

            # A bar for long steps on a terminal; plain periodic lines otherwise.
            with progress_for(sys.stderr):
                outcome = materialize_selection(
                    args.select,
                    definitions=definitions,
                    instance=instance,
                    force_publish=args.force_publish,
                    verbose=args.verbose,
                    echo=print,
                    run_id=run_id,
                    provider_label=cfg.provider_label(),
                    lexical=cfg.effective_provider() == "none",
                    build_dir=cfg.build_dir,
                )
            if outcome.success and outcome.interrupted is None and args.select == "*":
                # Still under the run's locks: what is recorded is what this run left.
                why_not = record_successful_run(cfg, outcome.run_id, inputs_at_start)
                if why_not and args.verbose:
                    note(f"the next run cannot be skipped: {why_not}")
    except LockBusyError as exc:
        note(str(exc))
        return EXIT_BUSY
    except SelectionError as exc:
        print(f"brain-pipeline materialize: bad --select: {exc}", file=sys.stderr)
        return 2
    if outcome.interrupted is not None:
        note(outcome.interrupted)
        return EXIT_INTERRUPTED
    print(
        f"{'succeeded' if outcome.success else 'FAILED'}: run {outcome.run_id} "
        f"in {time.monotonic() - started:.1f}s (see it in the UI: brain-pipeline ui)",
        file=sys.stderr,
    )
    return 0 if outcome.success else 1
