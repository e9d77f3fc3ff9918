"""Where the pipeline's judgements live: the ledger and the blobs (issue 41).

What a blocking check decided, and what the next build is judged against, must be the same
from every worker, so none of it stays in the build directory:

* the evaluation's outcomes: a row of `eval_outcomes` per evaluation key (`EvalInputs.key()`)
  naming the blob of the whole outcome (report, figures, verdict, the rule it was judged by);
* the other blocking checks' verdicts: the ledger's `verdicts` (check, store sha256, the
  digest of what the check judged it by);
* the regression baseline and the known-item baseline: the pointers `REGRESSION` and
  `KNOWN_ITEMS`, each naming a blob, moved by compare-and-set when a publication (or an
  `eval --accept`) makes an evaluation the baseline; the known items kept for an evaluated
  store: the pointer `CANDIDATE + <key>`;
* the history of `eval --history`: a row of `eval_history` per publication or acceptance.

The build directory keeps only caches a fresh worker rebuilds (the stat-keyed digest memo
of `eval_record.known_sha256`, the known-item query, answer and query-vector caches).

An existing build directory's files (`state/eval.json`, `check-verdicts.json`,
`eval-baseline.json`, `known-items/baseline.json` and `candidates/`) are read into the
ledger once, on first use, by the first worker to claim the import; each is then renamed
`<name>.imported`. No Dagster.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from brain_pipeline.state.memory import Memory
from brain_pipeline.utils.digest import canonical_json

AREA = "judgements"
DDL = """
CREATE TABLE IF NOT EXISTS eval_outcomes (
  key TEXT PRIMARY KEY, recorded_at TEXT NOT NULL, outcome TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS eval_history (
  id {serial}, recorded_at TEXT NOT NULL, summary TEXT NOT NULL)
"""
REGRESSION = "evaluation/regression-baseline"
KNOWN_ITEMS = "evaluation/known-item-baseline"
CANDIDATE = "evaluation/known-items/"
CLEARED = "-"
"""A baseline pointer's value when the baseline was cleared (a pointer is never deleted)."""

_imported: set[str] = set()


def ready(memory: Memory) -> Memory:
    """`memory` with this area's tables created and the build directory's old files
    imported (once per process: afterwards a dictionary lookup)."""
    memory.ledger.ensure_tables(AREA, DDL)
    where = str(memory.layout.state_dir)
    if where not in _imported:
        _import_old_files(memory)
        _imported.add(where)
    return memory


def put_json(memory: Memory, value: Any) -> str:
    return memory.blobs.put_bytes(canonical_json(value))


def get_json(memory: Memory, digest: str) -> Any:
    return json.loads(memory.blobs.get_bytes(digest))


def pointed(memory: Memory, name: str) -> Any:
    """The JSON of the blob the pointer `name` names; None when unset or cleared."""
    value = ready(memory).ledger.pointer(name)
    return None if value in (None, CLEARED) else get_json(memory, value)


def move(memory: Memory, name: str, value: str) -> None:
    """Point `name` at `value` by compare-and-set: re-read and retry when another worker
    moved it in between, so the last to decide wins and nobody sees a torn value."""
    ledger = ready(memory).ledger
    while True:
        current = ledger.pointer(name)
        if current == value or ledger.set_pointer(name, value, expected=current):
            return


# ---- evaluation outcomes ------------------------------------------------------------


def save_outcome(memory: Memory, key: str, when: str, outcome: Any) -> None:
    digest = put_json(memory, outcome)
    ledger = ready(memory).ledger
    ledger.execute(
        "INSERT INTO eval_outcomes VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
        "recorded_at = excluded.recorded_at, outcome = excluded.outcome",
        (key, when, digest),
    )


def outcome(memory: Memory, key: str | None = None) -> Any:
    """The outcome recorded under `key` (None: the newest); None when there is none."""
    ledger = ready(memory).ledger
    if key is None:
        rows = ledger.query("SELECT outcome FROM eval_outcomes ORDER BY recorded_at DESC LIMIT 1")
    else:
        rows = ledger.query("SELECT outcome FROM eval_outcomes WHERE key = ?", (key,))
    return get_json(memory, rows[0][0]) if rows else None


def add_history(memory: Memory, when: str, summary: Any) -> None:
    ready(memory).ledger.execute(
        "INSERT INTO eval_history (recorded_at, summary) VALUES (?, ?)",
        (when, canonical_json(summary).decode("utf-8")),
    )


def history(memory: Memory) -> list[Any]:
    """The publication summaries, newest first."""
    rows = ready(memory).ledger.query("SELECT summary FROM eval_history ORDER BY id DESC")
    return [json.loads(row[0]) for row in rows]


# ---- the one-time import of a build directory made before the ledger ----------------


def _old_json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def _import_old_files(memory: Memory) -> None:
    state = memory.layout.state_dir
    old = {
        "outcomes": state / "eval.json",
        "verdicts": state / "check-verdicts.json",
        "baseline": state / "eval-baseline.json",
        "known": state / "known-items" / "baseline.json",
        "candidates": state / "known-items" / "candidates",
    }
    present = {name: path for name, path in old.items() if path.exists()}
    if not present:
        return
    topic = f"import-judgements:{socket.gethostname()}:{state.resolve()}"
    if not memory.ledger.claim(topic, "brain-pipeline"):
        return  # imported already (by this folder's earlier run, or a worker racing it)
    data = {name: _old_json(path) for name, path in present.items() if path.is_file()}
    _import_outcomes(memory, data.get("outcomes"))
    _import_check_verdicts(memory, data.get("verdicts"))
    _import_baseline(memory, data.get("baseline"))
    if "candidates" in present:
        for path in sorted(present["candidates"].glob("*.json")):
            if (candidate := _old_json(path)) is not None:
                move(memory, CANDIDATE + path.stem, put_json(memory, candidate))
    if isinstance(data.get("known"), dict) and memory.ledger.pointer(KNOWN_ITEMS) is None:
        memory.ledger.set_pointer(KNOWN_ITEMS, put_json(memory, data["known"]), expected=None)
    for path in present.values():
        path.rename(path.with_name(path.name + ".imported"))
    memory.ledger.mark_delivered(topic)


def _import_outcomes(memory: Memory, data: Any) -> None:
    records = data.get("records") if isinstance(data, dict) else None
    for record in reversed(records if isinstance(records, list) else []):
        if isinstance(record, dict) and isinstance(record.get("key"), str):
            save_outcome(memory, record["key"], str(record.get("when") or ""), record)


def _import_check_verdicts(memory: Memory, data: Any) -> None:
    """Old verdicts were keyed by one digest of (store, rule): each is kept under the
    store the build's record stamps, with that digest as its rule, so the verdict on the
    live build still opens the gate (a key of other bytes matches nothing)."""
    from brain_pipeline.state.ledger import Verdict
    from brain_pipeline.state.records import read_record

    checks = data.get("checks") if isinstance(data, dict) else None
    record = read_record(memory.layout, "knowledge_store")
    stamp = record.outputs.get(memory.layout.store_file.name) if record is not None else None
    if not isinstance(checks, dict) or stamp is None:
        return
    for check, rows in checks.items():
        for row in reversed(rows if isinstance(rows, list) else []):
            if isinstance(row, dict) and isinstance(row.get("key"), str):
                memory.ledger.record_verdict(
                    Verdict(
                        str(check), stamp.sha256, row["key"], str(row.get("severity")),
                        str(row.get("description") or ""), bool(row.get("overridable", True)),
                        row.get("run_id"),
                    )
                )  # fmt: skip


def _import_baseline(memory: Memory, data: Any) -> None:
    if not isinstance(data, dict):
        return
    rows = data.get("publications")
    for summary in reversed(rows if isinstance(rows, list) else []):
        if isinstance(summary, dict):
            add_history(memory, str(summary.get("when") or ""), summary)
    entry = data.get("baseline")
    if isinstance(entry, dict) and memory.ledger.pointer(REGRESSION) is None:
        memory.ledger.set_pointer(REGRESSION, put_json(memory, entry), expected=None)
