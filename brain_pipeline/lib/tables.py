"""DataFrames as Dagster table metadata: a schema from the dtypes, plain values in rows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import dagster as dg

if TYPE_CHECKING:
    import pandas as pd


def _column_type(dtype: Any) -> str:
    from pandas.api import types

    if types.is_bool_dtype(dtype):
        return "bool"
    if types.is_integer_dtype(dtype):
        return "int"
    if types.is_float_dtype(dtype):
        return "float"
    return "string"


def _plain(value: Any) -> Any:
    """numpy scalars -> Python, missing (NA/NaN/None) -> None: what TableRecord accepts."""
    import pandas as pd

    if value is None or (not isinstance(value, str | bytes) and bool(pd.isna(value))):
        return None
    return value.item() if hasattr(value, "item") else value


def frame_table(frame: pd.DataFrame, *, limit: int = 200) -> dg.TableMetadataValue:
    """`frame` (at most `limit` rows) with a TableSchema, so the UI shows typed columns."""
    columns = [(str(name), _column_type(dtype)) for name, dtype in frame.dtypes.items()]
    schema = dg.TableSchema(columns=[dg.TableColumn(name, kind) for name, kind in columns])
    records = [
        dg.TableRecord({name: _plain(value) for (name, _), value in zip(columns, row, strict=True)})
        for row in frame.head(limit).itertuples(index=False, name=None)
    ]
    return dg.MetadataValue.table(records, schema=schema)
