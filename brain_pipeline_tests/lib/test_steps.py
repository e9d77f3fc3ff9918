"""The one converter from plain step values to Dagster metadata and results."""

from __future__ import annotations

import dagster as dg
import pandas as pd

from brain_pipeline.lib.steps import check_result, materialize_result, to_metadata
from brain_pipeline.steps.report import CheckVerdict, Markdown, RunLink, StepResult, Table


def test_each_plain_value_becomes_its_metadata_kind() -> None:
    shown = to_metadata(
        {
            "flag": True,
            "count": 3,
            "share": 0.5,
            "note": "text",
            "nothing": None,
            "facts": {"a": 1},
            "doc": Markdown("**bold**"),
            "run": RunLink("abc"),
            "rows": Table([("file", "string"), ("n", "int")], [["a.md", 1], ["b.md", 2]]),
        }
    )
    assert shown["flag"] == dg.MetadataValue.bool(True)
    assert shown["count"] == dg.MetadataValue.int(3)  # not a bool, not a float: plotted
    assert shown["share"] == dg.MetadataValue.float(0.5)
    assert shown["note"] == dg.MetadataValue.text("text")
    assert shown["nothing"] == dg.MetadataValue.text("—")
    assert shown["facts"] == dg.MetadataValue.json({"a": 1})
    assert shown["doc"] == dg.MetadataValue.md("**bold**")
    assert shown["run"] == dg.MetadataValue.dagster_run("abc")
    rows = shown["rows"]
    assert [c.type for c in rows.schema.columns] == ["string", "int"]
    assert [r.data for r in rows.records] == [{"file": "a.md", "n": 1}, {"file": "b.md", "n": 2}]


def test_a_data_frame_keeps_its_column_types_and_missing_values() -> None:
    frame = pd.DataFrame({"name": ["a", None], "n": [1, 2], "x": [0.5, float("nan")]})
    shown = to_metadata({"frame": frame})["frame"]
    assert [c.type for c in shown.schema.columns] == ["string", "int", "float"]
    assert [r.data for r in shown.records] == [
        {"name": "a", "n": 1, "x": 0.5},
        {"name": None, "n": 2, "x": None},
    ]


def test_results_carry_the_version_and_the_verdict() -> None:
    result = materialize_result(StepResult("v1", {"chunks": 2}))
    assert result.data_version == dg.DataVersion("v1")
    assert result.metadata == {"chunks": dg.MetadataValue.int(2)}
    check = check_result(CheckVerdict(False, "WARN", "two files need a look", {"n": 2}))
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert check.description == "two files need a look"
