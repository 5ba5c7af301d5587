"""The normalized EgoNormia items table: columns, validation, and readers for the two public layouts.

One row per clip, sorted by id:

==================  ====================  ==========================================================
column              type                  meaning
==================  ====================  ==========================================================
id                  str                   ``<uuid>_<timestamp>``; safe as a file name (checked)
behaviors           list[str] (5)         candidate actions; exactly one is ``""`` ("None of the above")
justifications      list[str] (5)         aligned with ``behaviors``, same empty slot
correct_idx         int                   index of the normative action (may be the empty slot)
sensible_idx        list[int] (sorted)    every sensible action (may be empty)
taxonomy            list[list[str]] (5)   norm categories per option, from ``CATEGORIES``
description         str                   scene description (the "pipeline" setting's context)
verified            bool                  member of EgoNormia-verified
video               str                   context video relative to the items' folder, or ``""``
==================  ====================  ==========================================================

Layouts read from a folder (``read_folder``), top level only:

- ``*.json``: the official repository's layout, ``{clip_id: {id, behaviors, justifications, correct,
  sensibles, taxonomy {"0": [...], ..., "4": [...]}, desc[, verified]}}``; unknown fields are ignored.
  ``verified_split.json`` (``{"split": [ids]}``, as in the official repository) is not an items file: it
  marks the listed clips verified.
- ``*.parquet``: the Hugging Face dataset's layout, columns ``id, behaviors, justifications, correct_idx,
  sensible_idx, description`` plus optional ``taxonomy`` (five lists, a ``{"0": [...]}`` mapping or struct,
  or either as a JSON string; absent means no categories), ``verified`` and ``video``. Our own
  ``items.parquet`` is in this layout, so it reads back with ``read_items``.

Context videos (``find_video``): ``videos/<id>.mp4``, else in ``video/<id>/`` (the Hugging Face repository's
layout) the file ``video_prev.mp4``, else the one mp4 whose name contains "prev", else the only mp4.
"""

from __future__ import annotations

import json
import numbers
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from egoeval.io import InputError, read_json, write_parquet

N_OPTIONS = 5
CATEGORIES = (
    "Safety",
    "Privacy",
    "Proxemics",
    "Politeness",
    "Cooperation",
    "Coordination/Proactivity",
    "Communication/Legibility",
)
COLUMNS = (
    "id",
    "behaviors",
    "justifications",
    "correct_idx",
    "sensible_idx",
    "taxonomy",
    "description",
    "verified",
    "video",
)
ITEMS_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("behaviors", pa.list_(pa.string())),
        ("justifications", pa.list_(pa.string())),
        ("correct_idx", pa.int64()),
        ("sensible_idx", pa.list_(pa.int64())),
        ("taxonomy", pa.list_(pa.list_(pa.string()))),
        ("description", pa.string()),
        ("verified", pa.bool_()),
        ("video", pa.string()),
    ]
)
VERIFIED_SPLIT = "verified_split.json"
MAX_ID_LENGTH = 200
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_SHOWN_ERRORS = 5


def id_problem(clip_id: object) -> str | None:
    """Why ``clip_id`` is not a safe file name (``None`` when it is): ``[A-Za-z0-9][A-Za-z0-9_.-]*``, no ``..``."""
    if not isinstance(clip_id, str):
        return f"id must be a string, got {type(clip_id).__name__}"
    if not clip_id:
        return "id is empty"
    if len(clip_id) > MAX_ID_LENGTH:
        return f"id is longer than {MAX_ID_LENGTH} characters"
    if ".." in clip_id or not _ID_RE.fullmatch(clip_id):
        return (
            f"id {clip_id!r} is not a safe file name (allowed: letters, digits, '_', '-', '.'; no leading dot, no '..')"
        )
    return None


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


def _as_list(value: object) -> list[Any] | None:
    """Lists, tuples and 1-d arrays (how parquet list cells arrive) as a list; anything else None."""
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return value.tolist()
    return None


def _strings(value: object, what: str) -> tuple[list[str] | None, str | None]:
    items = _as_list(value)
    if items is None:
        return None, f"{what} must be a list, got {type(value).__name__}"
    if len(items) != N_OPTIONS:
        return None, f"{what} has {len(items)} options, expected {N_OPTIONS}"
    if not all(isinstance(s, str) for s in items):
        return None, f"{what} must hold strings"
    return ["" if not s.strip() else s for s in items], None


def _taxonomy(value: object) -> tuple[list[list[str]] | None, str | None]:
    """Five category lists from a list of lists, a ``{"0": [...]}`` mapping, a JSON string of either, or None."""
    if value is None:
        return [[] for _ in range(N_OPTIONS)], None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            return None, f"taxonomy is not valid JSON ({exc.msg})"
    if isinstance(value, Mapping):
        keys = {str(k) for k in value}
        extra = sorted(keys - {str(i) for i in range(N_OPTIONS)})
        if extra:
            return None, f"taxonomy has keys {extra}, expected option indices '0'..'{N_OPTIONS - 1}'"
        by_key = {str(k): v for k, v in value.items()}
        value = [by_key.get(str(i)) for i in range(N_OPTIONS)]
    outer = _as_list(value)
    if outer is None or len(outer) != N_OPTIONS:
        return None, f"taxonomy must give categories for {N_OPTIONS} options"
    result: list[list[str]] = []
    for i, cell in enumerate(outer):
        cats = [] if cell is None else _as_list(cell)
        if cats is None or not all(isinstance(c, str) for c in cats):
            return None, f"taxonomy of option {i} must be a list of strings"
        unknown = [c for c in cats if c not in CATEGORIES]
        if unknown:
            return None, f"taxonomy of option {i} has unknown categories {unknown} (known: {', '.join(CATEGORIES)})"
        result.append(cats)
    return result, None


def _check_row(row: Mapping[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """One normalized row, or the list of its problems."""
    problems: list[str] = []
    clip_id = row.get("id")
    if (problem := id_problem(clip_id)) is not None:
        problems.append(problem)
    behaviors, problem = _strings(row.get("behaviors"), "behaviors")
    if problem:
        problems.append(problem)
    justifications, problem = _strings(row.get("justifications"), "justifications")
    if problem:
        problems.append(problem)
    if behaviors is not None:
        empty = [i for i, b in enumerate(behaviors) if not b]
        if len(empty) != 1:
            problems.append(f"behaviors must have exactly one empty option (None of the above), found {len(empty)}")
        elif justifications is not None and [i for i, j in enumerate(justifications) if not j] != empty:
            problems.append(f"justifications must be empty exactly at the behaviors' empty slot {empty[0]}")
    correct = row.get("correct_idx")
    if not _is_int(correct) or not 0 <= int(correct) < N_OPTIONS:
        problems.append(f"correct_idx must be an integer in 0..{N_OPTIONS - 1}, got {correct!r}")
    sensible = _as_list(row.get("sensible_idx"))
    if sensible is None:
        problems.append(f"sensible_idx must be a list, got {type(row.get('sensible_idx')).__name__}")
    elif not all(_is_int(i) and 0 <= int(i) < N_OPTIONS for i in sensible):
        problems.append(f"sensible_idx must hold integers in 0..{N_OPTIONS - 1}, got {sensible!r}")
    elif len(set(sensible)) != len(sensible):
        problems.append(f"sensible_idx has duplicate indices {sensible!r}")
    taxonomy, problem = _taxonomy(row.get("taxonomy"))
    if problem:
        problems.append(problem)
    description = row.get("description")
    if not isinstance(description, str):
        problems.append(f"description must be a string, got {type(description).__name__}")
    verified = row.get("verified", False)
    if not isinstance(verified, bool | np.bool_):
        problems.append(f"verified must be true or false, got {verified!r}")
    video = row.get("video", "")
    if not isinstance(video, str) or video.startswith("/") or ".." in Path(video).parts:
        problems.append(f"video must be a relative path inside the folder, got {video!r}")
    if problems:
        return None, problems
    return {
        "id": clip_id,
        "behaviors": behaviors,
        "justifications": justifications,
        "correct_idx": int(correct),
        "sensible_idx": sorted(int(i) for i in sensible),
        "taxonomy": taxonomy,
        "description": description,
        "verified": bool(verified),
        "video": video,
    }, []


def validate_items(rows: Sequence[Mapping[str, Any]], source_path: str | Path) -> pd.DataFrame:
    """Check every row and return the items table sorted by id; on any problem raise one InputError.

    The error names ``source_path`` and the first bad row (its clip id, or ``#<n>`` counting from 0 when the id
    itself is unusable) and lists the problems of up to five more rows.
    """
    good: list[dict[str, Any]] = []
    errors: list[tuple[str, str]] = []
    seen: set[str] = set()
    for n, row in enumerate(rows):
        label = row.get("id") if isinstance(row.get("id"), str) and row.get("id") else f"#{n}"
        checked, problems = _check_row(row)
        if checked is not None and checked["id"] in seen:
            problems = [f"duplicate id {checked['id']!r}"]
        if problems:
            errors.append((str(label), "; ".join(problems)))
            continue
        seen.add(checked["id"])
        good.append(checked)
    if errors:
        (first_row, first_message), rest = errors[0], errors[1:]
        message = first_message
        if rest:
            shown = "; ".join(f"row {r}: {m}" for r, m in rest[:_SHOWN_ERRORS])
            more = f" and {len(rest) - _SHOWN_ERRORS} more" if len(rest) > _SHOWN_ERRORS else ""
            message += f" (also {len(rest)} more bad rows: {shown}{more})"
        raise InputError(source_path, message, row=first_row)
    table = pd.DataFrame(good, columns=list(COLUMNS))
    return table.sort_values("id", kind="stable").reset_index(drop=True)


def read_official_json(path: str | Path) -> pd.DataFrame:
    """Items from the official repository's JSON layout (``correct``, ``sensibles``, ``desc``, taxonomy dict)."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise InputError(path, "expected an object mapping clip ids to clips")
    rows: list[dict[str, Any]] = []
    for key, record in data.items():
        if not isinstance(record, dict):
            raise InputError(path, "a clip must be a JSON object", row=key)
        if record.get("id", key) != key:
            raise InputError(path, f"the clip's id {record.get('id')!r} differs from its key", row=key)
        rows.append(
            {
                "id": key,
                "behaviors": record.get("behaviors"),
                "justifications": record.get("justifications"),
                "correct_idx": record.get("correct"),
                "sensible_idx": record.get("sensibles"),
                "taxonomy": record.get("taxonomy"),
                "description": record.get("desc"),
                "verified": record.get("verified", False),
            }
        )
    return validate_items(rows, path)


def read_hf_parquet(path: str | Path) -> pd.DataFrame:
    """Items from the Hugging Face dataset's parquet layout (``correct_idx``, ``sensible_idx``, ``description``)."""
    try:
        frame = pd.read_parquet(path)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(path, f"not a readable parquet file: {exc}") from exc
    missing = [
        c for c in ("id", "behaviors", "justifications", "correct_idx", "sensible_idx", "description") if c not in frame
    ]
    if missing:
        raise InputError(path, f"missing columns {missing}")
    wanted = [c for c in COLUMNS if c in frame]
    return validate_items(frame[wanted].to_dict("records"), path)


def read_items(path: str | Path) -> pd.DataFrame:
    """Read (and re-validate) an items table written by ``write_items``."""
    return read_hf_parquet(path)


def write_items(items: pd.DataFrame, path: str | Path) -> None:
    """Write the items table deterministically (sorted by id, fixed arrow schema), atomically."""
    table = items.loc[:, list(COLUMNS)].sort_values("id", kind="stable").reset_index(drop=True)
    write_parquet(path, table, ITEMS_SCHEMA)


def item_files(folder: str | Path) -> list[str]:
    """Names (relative to ``folder``) of the files ``read_folder`` reads, sorted."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(folder, "no such folder")
    names = sorted(p.name for p in folder.iterdir() if p.is_file() and p.suffix in {".json", ".parquet"})
    if not any(name != VERIFIED_SPLIT for name in names):
        raise InputError(folder, "no items file (*.json in the official layout or *.parquet in the HF layout)")
    return names


def _verified_ids(path: Path) -> set[str]:
    data = read_json(path)
    ids = data.get("split") if isinstance(data, dict) else None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise InputError(path, 'expected {"split": [clip ids]}')
    return set(ids)


def read_folder(folder: str | Path) -> pd.DataFrame:
    """All items of a folder in either layout, validated, ids unique across files, sorted by id.

    The ``video`` column is left as the files give it (normally ``""``); ``find_video`` locates videos.
    """
    folder = Path(folder)
    tables: list[pd.DataFrame] = []
    owner: dict[str, str] = {}
    verified: set[str] = set()
    for name in item_files(folder):
        path = folder / name
        if name == VERIFIED_SPLIT:
            verified = _verified_ids(path)
            continue
        table = read_official_json(path) if path.suffix == ".json" else read_hf_parquet(path)
        for clip_id in table["id"]:
            if clip_id in owner:
                raise InputError(path, f"duplicate id, already in {owner[clip_id]}", row=clip_id)
            owner[clip_id] = name
        tables.append(table)
    items = pd.concat(tables, ignore_index=True) if len(tables) > 1 else tables[0]
    unknown = verified - set(owner)
    if unknown:
        print(f"warning: {folder / VERIFIED_SPLIT} lists {len(unknown)} ids that are not in the items", file=sys.stderr)
    items["verified"] = items["verified"] | items["id"].isin(verified)
    return items.sort_values("id", kind="stable").reset_index(drop=True)


def find_video(folder: str | Path, clip_id: str) -> str | None:
    """The clip's context video relative to ``folder`` (posix), or None; ``clip_id`` must be a safe id."""
    folder = Path(folder)
    flat = Path("videos") / f"{clip_id}.mp4"
    if (folder / flat).is_file():
        return flat.as_posix()
    clip_dir = Path("video") / clip_id
    if not (folder / clip_dir).is_dir():
        return None
    if (folder / clip_dir / "video_prev.mp4").is_file():
        return (clip_dir / "video_prev.mp4").as_posix()
    mp4s = sorted(p.name for p in (folder / clip_dir).glob("*.mp4") if p.is_file())
    prev = [name for name in mp4s if "prev" in name.lower()]
    chosen = prev if prev else mp4s
    if len(chosen) == 1:
        return (clip_dir / chosen[0]).as_posix()
    if chosen:
        print(f"warning: {folder / clip_dir}: cannot tell which of {chosen} is the context video", file=sys.stderr)
    return None


def source_files(folder: str | Path, items: pd.DataFrame) -> list[str]:
    """Every file the items come from: the items files and each clip's context video (names relative to folder)."""
    videos = [v for v in (find_video(folder, clip_id) for clip_id in items["id"]) if v]
    return sorted([*item_files(folder), *videos])
