"""The blocking checks' verdicts, each keyed by the digest of exactly what it judged.

Dagster blocks a publication only inside the run its blocking check ran in; a later run
that selects only the steps below (`--select 'embeddings*'`, a UI launch of the publish
asset, a re-execution of a failed run) would not see the failure. So every blocking
check also writes its verdict here, under a key made of the data it judged and the rule
it judged it by, and the publish gate asks for a passing verdict under the key of the
data it is about to publish. A verdict for other bytes, or none, is not a pass.

The retrieval evaluation keeps its verdict in its own record (`evaluation.eval_record`,
keyed by all its inputs); this file holds the other blocking checks'.

File: `layout.check_verdicts` (JSON, written atomically): check name -> up to `KEEP`
verdicts, newest first, so alternating between two stores (a rollback) keeps both.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from brain_pipeline.state.layout import StateLayout
from brain_pipeline.utils.atomic import atomic_write_bytes
from brain_pipeline.utils.damage import healed_json

KEEP = 8
_FORMAT = 1


@dataclass(frozen=True)
class CheckRecord:
    """One blocking check's verdict on the data digested into `key`."""

    check: str
    key: str
    severity: str
    """PASS, WARN (published, with the warning) or ERROR (blocks)."""
    description: str
    run_id: str | None = None
    when: str = ""
    overridable: bool = True
    """False when `force` must not publish over this verdict (the check measured data the
    agent cannot use); a check that crashed judged nothing, so its failure stays
    overridable."""

    @property
    def blocks(self) -> bool:
        return self.severity not in ("PASS", "WARN")


def _read(layout: StateLayout) -> dict[str, Any]:
    empty: dict[str, Any] = {"format": _FORMAT, "checks": {}}
    data = healed_json(
        layout.check_verdicts,
        empty,
        what="blocking check verdicts",
        consequence="nothing is published until the blocking checks run again",
    )
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        return empty
    if not isinstance(data.get("checks"), dict):
        return empty
    return data


def record_verdict(layout: StateLayout, record: CheckRecord) -> None:
    """Keep `record` as its check's newest verdict (replacing one under the same key).

    A read-only build directory keeps nothing; the gate then finds no verdict and refuses.
    """
    stamped = asdict(record)
    if not stamped["when"]:
        stamped["when"] = datetime.now(UTC).isoformat(timespec="seconds")
    data = _read(layout)
    kept = [
        r
        for r in data["checks"].get(record.check) or []
        if isinstance(r, dict) and r.get("key") != record.key
    ]
    data["checks"][record.check] = [stamped, *kept][:KEEP]
    payload = json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True)
    with contextlib.suppress(OSError):
        layout.state_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(layout.check_verdicts, payload.encode("utf-8"))


def verdict_for(layout: StateLayout, check: str, key: str) -> CheckRecord | None:
    """`check`'s verdict on the data digested into `key`; None when it never judged it."""
    for raw in _read(layout)["checks"].get(check) or []:
        if isinstance(raw, dict) and raw.get("key") == key:
            try:
                return CheckRecord(**raw)
            except TypeError:
                return None
    return None
