"""The run summary's lines, one per step outcome and check (`lib.runner` prints them).

Plain functions of plain values, so the format a person (or a script grepping for
`FAILED`) reads is decided and tested without Dagster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

BLOCKED_REASON = "not run (an upstream step or blocking check failed)"


def step_line(step: str, message: str, level: str = "") -> str:
    """`  step_name                  level: message`: a step's log line on the console
    (`level` empty for INFO, else e.g. `warning`)."""
    prefix = f"{level}: " if level else ""
    return f"  {step:<26} {prefix}{message}"


def header(provider_label: str | None) -> str:
    return f"run summary (embedding: {provider_label}):" if provider_label else "run summary:"


def ok_line(step: str) -> str:
    return f"  ok       {step}"


def failed_line(step: str, reason: str) -> str:
    return f"  FAILED   {step}: {reason}"


def blocked_line(step: str) -> str:
    return f"  blocked  {step}: {BLOCKED_REASON}"


def check_line(
    name: str,
    *,
    passed: bool | None,
    severity: str | None,
    description: str,
    metadata: Mapping[str, Any],
    lexical: bool,
) -> str:
    """`  check    name: passed|WARN why|FAILED why (nDCG@10 figures)`.

    A check that did not pass says `WARN` when its severity is WARN (it never blocks,
    and the run may well succeed) and `FAILED` only for ERROR. With no vectors
    (`lexical`), the evaluation's figure is BM25's and is called that. Metadata values
    may be plain or Dagster's (their `.value`).
    """
    shown = ("bm25.ndcg_at_10",) if lexical else ("bm25.ndcg_at_10", "hybrid.ndcg_at_10")
    figures = ", ".join(
        f"{'lexical BM25' if lexical else key.split('.')[0]} nDCG@10 "
        f"{float(getattr(metadata[key], 'value', metadata[key]) or 0.0):.3f}"
        for key in shown
        if key in metadata
    )
    if "known_items.found_at_10" in metadata:  # the no-label gate's figure (known items)
        known = metadata["known_items.found_at_10"]
        figures += (", " if figures else "") + (
            f"known items found@10 {float(getattr(known, 'value', known)):.3f}"
        )
    if passed:
        verdict = "passed"
    elif severity == "WARN":
        verdict = f"WARN {description}"
    else:
        verdict = f"FAILED {description}"
    return f"  check    {name}: {verdict}" + (f" ({figures})" if figures else "")
