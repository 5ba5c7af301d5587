"""Small HTML helpers every report section uses: escaping, data URIs, tables, numbers, the smoke-run label and the
digests a page's provenance names."""

from __future__ import annotations

import base64
import hashlib
import html
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from egoeval.core.errors import InputError
from egoeval.core.io.atomic import json_bytes
from egoeval.core.io.manifest import sha256_file
from egoeval.significance import formatted

SMOKE = "smoke"  # the class of a smoke run's label (report_page's STYLE draws it)


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


def smoke_labelled(section: str, what: str) -> str:
    """A section's HTML (``<section ...><h2>...</h2>...``) with a smoke run's label under its heading: ``what`` says
    which part of the data its numbers are from."""
    label = (
        f'<p class="{SMOKE}"><b>Smoke run</b>: {esc(what)}. Its numbers check the pipeline; they are not a result.</p>'
    )
    head, found, rest = section.partition("</h2>")
    return head + found + label + rest if found else label + section


def params_digest(section: Any) -> str:
    """sha256 of a validated params section (a pydantic model) as deterministic JSON: the params a page was made
    with, whatever the file's comments and layout."""
    return hashlib.sha256(json_bytes(section.model_dump(mode="json"))).hexdigest()


def file_digests(root: Path, paths: Iterable[str | os.PathLike[str]]) -> str:
    """``path sha256 <hex>`` for each file (relative to ``root``), one per line: the inputs a page shows; a missing
    one is an InputError naming it."""
    lines = []
    for path in paths:
        if not (root / path).is_file():
            raise InputError(root / path, "file not found (run the stages before this one)")
        lines.append(f"{Path(path).as_posix()} sha256 {sha256_file(root / path)}")
    return "\n".join(lines)
