"""`brain-pipeline materialize` without --select: the whole plan in this process,
without Dagster (`steps.direct_run`), under the same locks a Dagster run takes.

Why not a Dagster run: at the user's scale (5-19k chunks) a re-run after one edit is
well under a second of work, and a Dagster run adds 3-4 CPU-seconds (importing
it, opening the instance, storing each event). The run's journal goes to
`state/runs/`; the code location's `direct_runs` sensor reports it to the instance,
so the UI, lineage and automation learn of it at their next tick. `--select '*'` is
the same run as a Dagster run, shown in the UI as it happens.
"""

from __future__ import annotations

import logging
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

    from brain_pipeline.config import BrainConfig
    from brain_pipeline.steps.run_journal import RunJournal

# Exit status when another run holds the build directory or publish root (sysexits'
# EX_TEMPFAIL: try again later); materialize's, whichever kind of run it makes.
EXIT_BUSY = 75
# Ctrl-C: the shell's convention for a process ended by SIGINT (128 + 2).
EXIT_INTERRUPTED = 130


def note(message: str) -> None:
    """One line of `materialize`'s own (either kind of run) on stderr."""
    print(f"brain-pipeline materialize: {message}", file=sys.stderr, flush=True)


class ConsoleStepLog:
    """`  step_name                  message`, as a Dagster run's concise console lines.

    A periodic progress line is left out while a terminal's bar shows the same figures.
    """

    def __init__(self, step: str) -> None:
        self.step = step

    def _print(self, level: str, message: str) -> None:
        from brain_pipeline.embedding.progress import shown_by_sink
        from brain_pipeline.steps.run_summary import step_line

        if not shown_by_sink(message):
            print(step_line(self.step, message, level), file=sys.stderr, flush=True)

    def info(self, msg: str) -> None:
        self._print("", msg)

    def warning(self, msg: str) -> None:
        self._print("warning", msg)


class _DamageToStderr(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        from brain_pipeline.utils.damage import print_report

        print_report(record.getMessage())


@contextmanager
def damage_reports_on_stderr() -> Iterator[None]:
    """The core's damage WARN lines (`utils.damage`) on stderr for the run's duration,
    once: a process that loaded the Dagster layer has its handler already (it prints
    on stderr outside a Dagster step)."""
    from brain_pipeline.utils.damage import log

    handler = None if log.handlers else _DamageToStderr(level=logging.WARNING)
    if handler is not None:
        log.addHandler(handler)
    try:
        yield
    finally:
        if handler is not None:
            log.removeHandler(handler)


def forget_refusals(build_dir: Path) -> None:
    """`--retry-refused` (either kind of run): drop the remembered refusals, under the
    build directory's lock, so this run's embedding step sends those texts again."""
    from brain_pipeline.embedding.gaps import forget_refusals as forget
    from brain_pipeline.state.layout import StateLayout

    forgotten = forget(StateLayout.of(build_dir).embedding_gaps)
    note(f"--retry-refused: {forgotten} refused text(s) will be sent again")


def run_direct(cfg: BrainConfig, args: argparse.Namespace) -> int:
    """Run the plan; print the run summary; the exit status of a Dagster run's."""
    from brain_pipeline.embedding.factory import embedder_for
    from brain_pipeline.preflight import describe_inputs
    from brain_pipeline.state.layout import StateLayout
    from brain_pipeline.state.lock import LockBusyError, hold_run_locks, make_holder
    from brain_pipeline.steps.direct_run import RunContext, run_plan
    from brain_pipeline.steps.publish import upload_to_s3
    from brain_pipeline.steps.run_journal import write_journal
    from brain_pipeline.steps.run_summary import header, journal_lines
    from brain_pipeline.steps.up_to_date import current_inputs, record_successful_run
    from brain_pipeline.steps.up_to_date import forget as forget_last_run

    run_id = str(uuid.uuid4())
    layout = StateLayout.of(cfg.build_dir)
    inputs_at_start = current_inputs(cfg, layout, run_id)
    started = time.monotonic()
    note(describe_inputs(cfg))
    context = RunContext(
        cfg=cfg,
        run_id=run_id,
        log_for=ConsoleStepLog,
        make_embedder=embedder_for,
        upload=upload_to_s3,
        force_publish=args.force_publish,
    )
    try:
        with hold_run_locks(
            cfg.build_dir,
            cfg.publish_root(),
            wait_seconds=cfg.locks.wait_seconds,
            holder=make_holder("brain-pipeline materialize", run_id),
            on_wait=note,
        ):
            forget_last_run(layout)  # proven again only by success
            if args.retry_refused:
                forget_refusals(cfg.build_dir)
            from brain_pipeline.cli.progress_bar import progress_for

            with progress_for(sys.stderr), damage_reports_on_stderr():
                journal = run_plan(context)
            try:
                write_journal(layout, journal)
            except OSError as exc:  # e.g. a full disk: the run's work stands, say so
                note(f"could not keep this run's journal ({exc}); the UI will not show it")
            if journal.succeeded:
                # Still under the run's locks: what is recorded is what this run left.
                why_not = record_successful_run(cfg, run_id, inputs_at_start)
                if why_not and args.verbose:
                    note(f"the next run cannot be skipped: {why_not}")
    except LockBusyError as exc:
        note(str(exc))
        return EXIT_BUSY
    _notify(cfg, journal)
    if journal.interrupted is not None:
        note(journal.interrupted)
        return EXIT_INTERRUPTED
    lexical = cfg.effective_provider() == "none"
    print(header(cfg.provider_label()))
    for line in journal_lines(journal, lexical=lexical):
        print(line)
    print(
        f"{'succeeded' if journal.succeeded else 'FAILED'}: run {run_id} "
        f"in {time.monotonic() - started:.1f}s (without Dagster; the UI shows it once its "
        "direct_runs sensor has reported it: brain-pipeline ui)",
        file=sys.stderr,
    )
    return 0 if journal.succeeded else 1


def _notify(cfg: BrainConfig, journal: RunJournal) -> None:
    """Tell the configured channel about a blocked, failed or recovered run: no Dagster
    run-status sensor sees a run made without Dagster. A channel that is down is one
    line here; it never changes the run's exit status."""
    from brain_pipeline.state.layout import StateLayout
    from brain_pipeline.steps.notify_run import notify_direct_run

    line = notify_direct_run(cfg, StateLayout.of(cfg.build_dir), journal)
    if line:
        note(line)
