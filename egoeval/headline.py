"""Headline rows for ``dvc metrics show``: one small JSON file per result row, every file with the same keys.

DVC prints one table row per metrics file and one column per key, so a benchmark's full metrics file (every
setting x model, or every run x sequence) makes one line of thousands of characters. A folder of row files
(``metrics/<benchmark>/<group>/<name>.json``, each holding a handful of headline numbers beside its protocol,
dataset, split and n) prints as a table that fits a terminal and diffs row by row (``dvc metrics diff``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from egoeval.core.io.atomic import json_bytes

_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")


def file_stem(name: str) -> str:
    """``name`` as a file name: itself when it is short and plain, else its plain characters and a hash of it
    (so two names never share a file, and none leaves the folder)."""
    if _SAFE.fullmatch(name) and not name.endswith("."):
        return name
    plain = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")[:60] or "row"
    return f"{plain}-{hashlib.sha256(name.encode()).hexdigest()[:10]}"


def shown_name(name: str) -> str:
    """``name`` as a row shows it: printable ASCII, every other character JSON-escaped (``\\u0001``, ``\\u00e9``),
    so that ``dvc metrics show`` prints no control character and a hashed file still says whose row it is."""
    return json.dumps(name, ensure_ascii=True)[1:-1]


def stem_clashes(names: Sequence[str]) -> list[tuple[str, str]]:
    """Pairs of distinct names whose headline files would be one (the same ``file_stem``, or stems that differ only
    in case: one file on a case-insensitive file system)."""
    first: dict[str, str] = {}
    clashes = []
    for name in dict.fromkeys(names):
        stem = file_stem(name).casefold()
        if stem in first:
            clashes.append((first[stem], name))
        else:
            first[stem] = name
    return clashes


def row_files(rows: Mapping[tuple[str, ...], Mapping[str, Any]]) -> dict[Path, bytes]:
    """Relative path -> JSON bytes: a row keyed (group, ..., name) lands at ``group/.../name.json``; where the file
    name is not the name itself (a hashed stem), the row holds the name (``shown_name``) under ``name``, so that
    ``dvc metrics show`` still says whose row it is (plain names add no column: the table fits a terminal)."""
    files: dict[Path, bytes] = {}
    for key, row in rows.items():
        path = Path(*(file_stem(part) for part in key[:-1]), f"{file_stem(key[-1])}.json")
        if path in files:
            raise ValueError(f"two headline rows share the file {path}")
        named = {} if file_stem(key[-1]) == key[-1] else {"name": shown_name(key[-1])}
        files[path] = json_bytes({**named, **row})
    return files


def write_rows(folder: Path, rows: Mapping[tuple[str, ...], Mapping[str, Any]]) -> None:
    """Create ``folder`` (a staged, empty path) holding one file per row (``row_files``)."""
    folder.mkdir()
    for path, data in row_files(rows).items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data)
