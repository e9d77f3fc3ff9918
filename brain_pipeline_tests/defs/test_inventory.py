"""The code location's inventory against a checked-in snapshot.

A lost, renamed or regrouped asset, a check that stopped blocking, a schedule or sensor
gone missing: each shows as a diff of `inventory.json`. After an intended change,
regenerate it with `BRAIN_WRITE_INVENTORY=1 python -m pytest
brain_pipeline_tests/defs/test_inventory.py` and commit the diff with the change.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from brain_pipeline.definitions import build_definitions

SNAPSHOT = Path(__file__).with_name("inventory.json")


def inventory(defs: dg.Definitions) -> dict[str, Any]:
    graph = defs.resolve_asset_graph()
    assets = {}
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
        node = graph.get(key)
        assets[key.to_user_string()] = {
            "group": node.group_name,
            "kinds": sorted(node.kinds),
            "deps": sorted(parent.to_user_string() for parent in node.parent_keys),
            "observable": node.is_observable,
            "automation": node.automation_condition is not None,
        }
    checks = {}
    for check_key in sorted(graph.asset_check_keys, key=lambda k: k.to_user_string()):
        spec = graph.get_check_spec(check_key)
        checks[check_key.to_user_string()] = {"blocking": spec.blocking}
    return {
        "assets": assets,
        "checks": checks,
        "jobs": sorted(
            job.name
            for job in defs.resolve_all_job_defs()
            if not job.name.startswith("__ASSET_JOB")
        ),
        "schedules": sorted(s.name for s in defs.schedules or []),
        "sensors": sorted(s.name for s in defs.sensors or []),
        "resources": sorted(defs.resources or {}),
    }


def test_the_code_location_matches_its_snapshot() -> None:
    current = inventory(build_definitions())
    if os.environ.get("BRAIN_WRITE_INVENTORY") == "1":
        SNAPSHOT.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
        # Never a pass: comparing with what was just written would prove nothing.
        pytest.fail("inventory.json rewritten: review `git diff`, then run without the flag")
    assert current == json.loads(SNAPSHOT.read_text())
