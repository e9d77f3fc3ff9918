"""What a step reports, in plain values the Dagster layer turns into metadata.

Numbers stay numbers (the UI plots them across runs), text stays text; the three shapes
below say what a value is when its Python type cannot: a table with a schema, markdown,
and a link to a Dagster run. A pandas DataFrame is a table too (its dtypes are the
schema). `lib.steps.to_metadata` is the one converter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from brain_pipeline.state.records import AssetRecord


@dataclass(frozen=True)
class Table:
    """Rows under (name, type) columns; type is one of string, int, float, bool."""

    columns: list[tuple[str, str]]
    rows: list[list[Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Markdown:
    text: str


@dataclass(frozen=True)
class RunLink:
    """The Dagster run with this id (e.g. the run whose check passed these bytes)."""

    run_id: str


@dataclass(frozen=True)
class StepResult:
    """A materialisation: its data version, what it shows, and the record it kept (or
    found current): the small typed reference the hand-off gives the next step."""

    data_version: str
    metadata: dict[str, Any]
    record: AssetRecord | None = None


@dataclass
class CheckVerdict:
    """An asset check's outcome: pass or fail, how badly, why, and what it shows."""

    passed: bool
    severity: Literal["ERROR", "WARN"]
    description: str
    metadata: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """To log, in this order, last: what a person reads at the end of the run page."""
