"""Where the pipeline's judgements live: the ledger and the blobs (issue 41).

What a blocking check decided, and what the next build is judged against, must be the same
from every worker, so none of it stays in the build directory:

* the evaluation's outcomes: a row of `eval_outcomes` per evaluation key (`EvalInputs.key()`)
  naming the blob of the whole outcome (report, figures, verdict, the rule it was judged by);
* the other blocking checks' verdicts: the ledger's `verdicts` (check, store sha256, the
  digest of what the check judged it by);
* the regression baseline and the known-item baseline: the pointers `REGRESSION` and
  `KNOWN_ITEMS`, each naming a blob, moved by compare-and-set when a publication (or an
  `eval --accept`) makes an evaluation the baseline; the known items an evaluation
  sampled: the pointer `CANDIDATE + <evaluation key>`;
* the history of `eval --history`: a row of `eval_history` per publication or acceptance.

This module is the area's plumbing (its tables, JSON blobs, pointers moved by
compare-and-set) and the upgrade import; what is kept is read and written in one place
each: the outcomes by `eval_record`, the baselines, candidates and history by `baseline`,
the shared query vectors by `known_item_run`. The build directory keeps only caches a
fresh worker rebuilds (the stat-keyed digest memo of `eval_record.known_sha256`, the
known-item query and answer caches).

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
QUERY_VECTORS = "evaluation/known-item-query-vectors/"
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


def point(memory: Memory, name: str, value: Any) -> None:
    """Keep `value` as a blob and point `name` at it (`move`)."""
    move(memory, name, put_json(memory, value))


def move(memory: Memory, name: str, value: str) -> None:
    """Point `name` at `value` by compare-and-set: re-read and retry when another worker
    moved it in between, so the last to decide wins and nobody sees a torn value."""
    ledger = ready(memory).ledger
    while True:
        current = ledger.pointer(name)
        if current == value or ledger.set_pointer(name, value, expected=current):
            return


# ---- the one-time import of a build directory made before the ledger ----------------


def _old_json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def _import_old_files(memory: Memory) -> None:
    """One transaction: the claim of the import and every row, or nothing (a worker
    killed mid-import leaves no claim, and the next run imports again)."""
    state = memory.layout.state_dir
    old = {
        "outcomes": state / "eval.json",
        "verdicts": state / "check-verdicts.json",
        "baseline": state / "eval-baseline.json",
        "known": state / "known-items" / "baseline.json",
        "candidates": state / "known-items" / "candidates",
        "query_vectors": state / "known-items" / "query-vectors.json",
    }
    present = {name: path for name, path in old.items() if path.exists()}
    if not present:
        return
    data = {name: _old_json(path) for name, path in present.items() if path.is_file()}
    rows: dict[str, list[tuple[Any, ...]]] = {
        "INSERT INTO eval_outcomes VALUES (?, ?, ?) ON CONFLICT (key) DO NOTHING": [
            (r["key"], str(r.get("when") or ""), put_json(memory, r))
            for r in _listed(data.get("outcomes"), "records")
            if isinstance(r.get("key"), str)
        ],
        "INSERT INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING": (
            _old_verdicts(memory, data.get("verdicts"))
        ),
        "INSERT INTO eval_history (recorded_at, summary) VALUES (?, ?)": [
            (str(p.get("when") or ""), canonical_json(p).decode("utf-8"))
            for p in reversed(_listed(data.get("baseline"), "publications"))
        ],
        "INSERT INTO pointers VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING": [
            (name, put_json(memory, value), "")
            for name, value in _old_pointers(data, present.get("candidates"))
        ],
    }
    topic = f"import-judgements:{socket.gethostname()}:{state.resolve()}"
    ledger = memory.ledger
    with ledger.transaction(write=True) as cursor:
        cursor.execute(
            ledger.sql("INSERT INTO claims VALUES (?, ?, ?, ?) ON CONFLICT (topic) DO NOTHING"),
            (topic, "brain-pipeline", "", ""),
        )
        if cursor.rowcount != 1:
            return  # imported already (by an earlier run, or a worker racing this one)
        for statement, values in rows.items():
            for value in values:
                cursor.execute(ledger.sql(statement), value)
    for path in present.values():
        path.rename(path.with_name(path.name + ".imported"))


def _listed(data: Any, name: str) -> list[dict[str, Any]]:
    rows = data.get(name) if isinstance(data, dict) else None
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def _old_pointers(data: dict[str, Any], candidates: Path | None) -> list[tuple[str, Any]]:
    pointers: list[tuple[str, Any]] = []
    old = data.get("baseline")
    entry = old.get("baseline") if isinstance(old, dict) else None
    if isinstance(entry, dict):
        pointers.append((REGRESSION, entry))
    if isinstance(data.get("known"), dict):
        pointers.append((KNOWN_ITEMS, data["known"]))
    vectors = data.get("query_vectors")
    if isinstance(vectors, dict) and isinstance(vectors.get("model"), str):
        pointers.append((QUERY_VECTORS + vectors["model"], vectors))  # never embedded again
    for path in sorted(candidates.glob("*.json")) if candidates is not None else []:
        if (candidate := _old_json(path)) is not None:
            pointers.append((CANDIDATE + path.stem, candidate))
    return pointers


def _old_verdicts(memory: Memory, data: Any) -> list[tuple[Any, ...]]:
    """Old verdicts were keyed by one digest of (store, rule): each is kept under the
    store the build's record stamps, with that digest as its rule, so the verdict on the
    live build still opens the gate (a key of other bytes matches nothing)."""
    from brain_pipeline.state.records import read_record

    checks = data.get("checks") if isinstance(data, dict) else None
    record = read_record(memory.layout, "knowledge_store")
    stamp = record.outputs.get(memory.layout.store_file.name) if record is not None else None
    if not isinstance(checks, dict) or stamp is None:
        return []
    return [
        (str(check), stamp.sha256, row["key"], str(row.get("severity")),
         str(row.get("description") or ""), int(bool(row.get("overridable", True))),
         row.get("run_id"), str(row.get("when") or ""))
        for check, rows in checks.items()
        for row in _listed({"rows": rows}, "rows")
        if isinstance(row.get("key"), str)
    ]  # fmt: skip
