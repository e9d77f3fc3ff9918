"""The journal of a run made without Dagster: what each step of the plan did.

`brain-pipeline materialize` runs the plan (`steps.plan`) in its own process when it
can, without importing Dagster (`steps.direct_run`). What Dagster would have stored as
the run's events is written here instead, one JSON file per run under
`state/runs/`, atomically, when the run ends. The code location's `direct_runs`
sensor later reports each journal to the instance as materialisations, observations
and check evaluations, so the UI, lineage and automation learn of the run; the
command line reads the journal for `status` and notifications.

Metadata stays in the plain values steps report (`steps.report`); the three shapes a
JSON value cannot say (`Table`, `Markdown`, `RunLink`) are tagged on the way out and
rebuilt on the way in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from brain_pipeline.state.layout import StateLayout
from brain_pipeline.steps.report import Markdown, RunLink, Table
from brain_pipeline.utils.atomic import atomic_write_bytes
from brain_pipeline.utils.damage import set_aside

JOURNAL_FORMAT = 1
KEEP_JOURNALS = 200
"""Journals kept (oldest dropped first): the sensor reads them within a tick or two."""

StepKind = Literal["observation", "asset", "check"]
StepStatus = Literal["ok", "failed", "blocked", "nothing"]
"""ok: done (a check: evaluated); failed: raised; blocked: not run because an upstream
step or blocking check failed; nothing: ran and materialised nothing (S3 unconfigured)."""

_KIND = "__kind__"
_NAME = re.compile(r"^\d{8}T\d{12}Z-[0-9a-f-]{36}\.json$")


@dataclass
class StepEntry:
    """One node of the plan in one run."""

    name: str
    kind: StepKind
    status: StepStatus
    asset: str | None = None
    """For a check: the asset it checks."""
    data_version: str | None = None
    code_version: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    """A failed step's one line (a StepFailure's message; never a traceback)."""
    passed: bool | None = None
    severity: str | None = None
    blocking: bool = False
    description: str | None = None


@dataclass
class RunJournal:
    """A whole run: who started it, when, and what each step did (in order)."""

    run_id: str
    started_at: str
    """ISO 8601, UTC."""
    finished_at: str
    launched_by: str
    trigger: str
    succeeded: bool
    steps: list[StepEntry] = field(default_factory=list)
    interrupted: str | None = None
    format: int = JOURNAL_FORMAT

    def step(self, name: str) -> StepEntry | None:
        return next((entry for entry in self.steps if entry.name == name), None)

    def file_name(self) -> str:
        """`<finished, compact UTC>-<run id>.json`: names sort in the order runs ended."""
        finished = datetime.fromisoformat(self.finished_at).astimezone(UTC)
        return f"{finished:%Y%m%dT%H%M%S%f}Z-{self.run_id}.json"


def to_plain(value: Any) -> Any:
    """A metadata value as JSON (the three report shapes tagged, a DataFrame a table)."""
    if isinstance(value, Table):
        return {_KIND: "table", "columns": [list(c) for c in value.columns], "rows": value.rows}
    if isinstance(value, Markdown):
        return {_KIND: "markdown", "text": value.text}
    if isinstance(value, RunLink):
        return {_KIND: "run", "run_id": value.run_id}
    if hasattr(value, "dtypes") and hasattr(value, "itertuples"):
        return to_plain(_frame_table(value))
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def from_plain(value: Any) -> Any:
    """The inverse of `to_plain` (a DataFrame comes back as a `Table`)."""
    if isinstance(value, dict):
        kind = value.get(_KIND)
        if kind == "table":
            return Table([(str(n), str(t)) for n, t in value["columns"]], list(value["rows"]))
        if kind == "markdown":
            return Markdown(str(value["text"]))
        if kind == "run":
            return RunLink(str(value["run_id"]))
        return {k: from_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_plain(v) for v in value]
    return value


def _frame_table(frame: Any) -> Table:
    kinds = {"i": "int", "u": "int", "f": "float", "b": "bool"}
    columns = [(str(name), kinds.get(frame[name].dtype.kind, "string")) for name in frame.columns]
    rows = [[_scalar(v) for v in row] for row in frame.itertuples(index=False)]
    return Table(columns, rows)


def _scalar(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def write_journal(layout: StateLayout, journal: RunJournal) -> Path:
    """Write `journal` atomically and drop the oldest past KEEP_JOURNALS."""
    data = asdict(journal)
    # From the entries themselves: `asdict` has already flattened a Table, Markdown or
    # RunLink (dataclasses) into an untagged dict that would come back as a plain dict.
    for entry, plain in zip(journal.steps, data["steps"], strict=True):
        plain["metadata"] = to_plain(entry.metadata)
    path = layout.run_journal_dir / journal.file_name()
    atomic_write_bytes(path, json.dumps(data, indent=1, sort_keys=True).encode("utf-8"))
    for old in journal_paths(layout)[:-KEEP_JOURNALS]:
        old.unlink(missing_ok=True)
    return path


def journal_paths(layout: StateLayout) -> list[Path]:
    """Every journal file, oldest first (temporary files and strangers ignored)."""
    directory = layout.run_journal_dir
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if _NAME.match(p.name))


def read_journal(path: Path) -> RunJournal | None:
    """The journal at `path`; None when it is gone, or damaged (then set aside, reported)."""
    try:
        data = json.loads(path.read_bytes())
        steps = [
            StepEntry(**{**entry, "metadata": from_plain(entry.get("metadata") or {})})
            for entry in data.pop("steps")
        ]
        return RunJournal(**data, steps=steps)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        set_aside(path, what="run journal", consequence="that run stays unreported", cause=exc)
        return None


def journals_after(layout: StateLayout, cursor: str | None) -> Iterator[tuple[str, RunJournal]]:
    """(file name, journal) of every journal whose name sorts after `cursor`, in order."""
    for path in journal_paths(layout):
        if cursor is not None and path.name <= cursor:
            continue
        journal = read_journal(path)
        if journal is not None:
            yield path.name, journal


def latest_journal(layout: StateLayout) -> RunJournal | None:
    for path in reversed(journal_paths(layout)):
        journal = read_journal(path)
        if journal is not None:
            return journal
    return None
