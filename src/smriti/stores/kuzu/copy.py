"""Bulk writes of the embedded Kuzu / LadybugDB store through ``COPY ... FROM`` an Arrow table.

An import creates each batch's engrams and cue links in bulk. Kuzu parses every ``FLOAT[1536]``
parameter value by value: a ``CREATE`` per engram took ~21 ms (2,000 memories of an import:
17 memories/s, measured), an ``UNWIND`` of 500 rows 9.4 s, a CSV ``COPY`` of 2,000 rows 19 s.
``COPY Engram FROM $table`` with a pyarrow table (the float32 matrix as one fixed-size-list
column) takes 0.5-1 s for 2,000, into a table that already has rows, inside a transaction, and
a duplicate primary key fails the whole statement. Used when pyarrow is installed (the
``kuzu`` extra) and the batch is large enough to be worth it; otherwise the row-by-row path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

COPY_MIN = 32  # rows below which a COPY is not worth building a table for


def arrow() -> Any | None:
    """The pyarrow module, or None when it is not installed."""
    try:
        import pyarrow
    except ImportError:
        return None
    return pyarrow


def _column(pa: Any, kuzu_type: str, values: list[Any]) -> Any:
    """One Arrow column of a Kuzu column type (``STRING``, ``DOUBLE``, ``INT64``, ``TIMESTAMP``,
    ``FLOAT[n]``); a vector column is built from one float32 matrix, not row by row."""
    if kuzu_type.startswith("FLOAT["):
        dims = int(kuzu_type[6:-1])
        missing = np.array([value is None for value in values])
        matrix = np.zeros((len(values), dims), dtype=np.float32)
        for row, value in enumerate(values):
            if value is not None:
                matrix[row] = value
        flat = pa.array(matrix.reshape(-1))
        mask = pa.array(missing) if missing.any() else None
        return pa.FixedSizeListArray.from_arrays(flat, dims, mask=mask)
    kinds = {
        "STRING": pa.string(),
        "DOUBLE": pa.float64(),
        "INT64": pa.int64(),
        "TIMESTAMP": pa.timestamp("us"),
    }
    return pa.array(values, type=kinds[kuzu_type])


def table_of(columns: Sequence[tuple[str, str]], rows: Sequence[Mapping[str, Any]]) -> Any:
    """An Arrow table of ``rows`` (column name -> value) with the node or rel table's columns in
    its order (``columns``: (name, Kuzu type) as ``table_info`` lists them)."""
    pa = arrow()
    assert pa is not None
    return pa.table({name: _column(pa, kind, [row.get(name) for row in rows]) for name, kind in columns})


def table_columns(run: Any, table: str) -> list[tuple[str, str]]:
    """(name, type) of a table's columns in their stored order (a migration appends columns)."""
    rows = run(f"CALL table_info('{table}') RETURN name, type", None)
    return [(str(name), str(kind)) for name, kind in rows]


def worth_it(rows: Sequence[Any]) -> bool:
    """Whether ``rows`` go in by COPY: enough of them, and pyarrow installed."""
    return len(rows) >= COPY_MIN and arrow() is not None


def copy_rows(run: Any, table: str, rows: Sequence[Mapping[str, Any]], ends: tuple[str, ...] = ()) -> None:
    """``COPY table FROM`` these rows (column name -> value; a missing column is null). For a
    rel table, ``ends`` names the two row keys holding the from and to primary keys."""
    columns = [(end, "STRING") for end in ends] + table_columns(run, table)
    run(f"COPY {table} FROM $rows", {"rows": table_of(columns, rows)})
