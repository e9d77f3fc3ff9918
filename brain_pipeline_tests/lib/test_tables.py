"""DataFrames as Dagster table metadata: typed columns, plain values, a row limit."""

from __future__ import annotations

import dagster as dg
import numpy as np
import pandas as pd

from brain_pipeline.lib.tables import frame_table


def test_each_dtype_becomes_its_column_type() -> None:
    frame = pd.DataFrame(
        {
            "name": ["a", "b"],
            "n": np.array([1, 2], dtype=np.int32),
            "x": [0.5, 1.5],
            "ok": [True, False],
            "nullable": pd.array([1, None], dtype="Int64"),
        }
    )
    table = frame_table(frame)
    assert isinstance(table, dg.TableMetadataValue)
    assert [(c.name, c.type) for c in table.schema.columns] == [
        ("name", "string"),
        ("n", "int"),
        ("x", "float"),
        ("ok", "bool"),
        ("nullable", "int"),
    ]


def test_values_are_plain_python_and_missing_values_are_none() -> None:
    frame = pd.DataFrame(
        {
            "name": ["a", None],
            "n": np.array([7, 8], dtype=np.int64),
            "x": [0.25, float("nan")],
            "nullable": pd.array([None, 3], dtype="Int64"),
        }
    )
    rows = [r.data for r in frame_table(frame).records]
    assert rows == [
        {"name": "a", "n": 7, "x": 0.25, "nullable": None},
        {"name": None, "n": 8, "x": None, "nullable": 3},
    ]
    assert type(rows[0]["n"]) is int and type(rows[0]["x"]) is float  # not numpy scalars


def test_only_the_first_limit_rows_are_shown() -> None:
    frame = pd.DataFrame({"i": range(10)})
    assert [r.data["i"] for r in frame_table(frame, limit=3).records] == [0, 1, 2]
    assert len(frame_table(pd.DataFrame({"i": range(250)})).records) == 200


def test_an_empty_frame_keeps_its_schema() -> None:
    table = frame_table(pd.DataFrame({"a": pd.Series([], dtype="float64")}))
    assert table.records == [] and [c.type for c in table.schema.columns] == ["float"]
