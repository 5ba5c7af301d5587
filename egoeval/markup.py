"""Small HTML helpers every report section uses: escaping, data URIs, tables, numbers."""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from egoeval.significance import formatted


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def data_uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def table(header: Sequence[str], rows: Iterable[Sequence[str]], cls: str = "") -> str:
    """An HTML table; cells are HTML already (escape text with ``esc``)."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def fmt(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "–"
    return f"{float(value):.{digits}f}"


def paired_table(paired: pd.DataFrame) -> str:
    """A paired.csv (``egoeval.significance``) as the report's table, with the model columns."""
    header, *rows = formatted(paired, models=True)
    return table(header, ([esc(cell) for cell in row] for row in rows), "paired")
