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

Layouts read from a folder (``read_folder``), exactly as distributed; ``dataset`` picks the items file:

- ``egonormia``: ``final_data.json`` (the official GitHub folder ``src/final_dataset`` and the Hugging Face
  snapshot); without it, the one ``*.parquet`` (a Hugging Face snapshot of the parquet only) or the one other
  JSON items file (the bundled sample's ``clips.json``). When ``final_data.json`` is there, the parquet
  (``train-norm-updated.parquet``, a subset of the same clips) is not read as more items.
- ``ood_robot``: ``ood_robot.json`` (11 robot clips, ids ``clip-N``); never mixed with EgoNormia.

``*_eval.json`` (published results per model), ``verified_split.json`` and ``manifest.sha256`` are never
items. JSON items are in the official layout, ``{clip_id: {id, behaviors, justifications, correct,
sensibles, taxonomy {"0": [...], ..., "4": [...]}, desc[, verified]}}``; parquet items in the Hugging Face
layout, columns ``id, behaviors, justifications, correct_idx, sensible_idx, description`` plus optional
``taxonomy``, ``verified``, ``video`` and ``strip``. Our own ``items.parquet`` is in that layout.

Rows are read as the official code reads them: an unknown taxonomy label is dropped from the categories, an
empty description is kept, behaviours without exactly one empty option are kept; each is counted
(a ``Counter`` of notes) and the fetch stage logs the counts. Structural problems (not 5 options, a bad index, an
unsafe id) stop the read with an error naming the file and row.

The verified split (200 ids) ships with the project: ``egoeval/egonormia/data/verified_split.json``, the
official ``src/final_dataset/verified_split.json`` (MIT; its commit and sha256 beside ``SHIPPED_SPLIT``); a
folder's own
``verified_split.json`` adds to it.

Media (``find_video``, ``find_strip``) under a media root (the items' folder unless
``egonormia.fetch.media_path`` names another): the Hugging Face layout ``video/<id>/video_prev.mp4`` and
``video/<id>/frame_all_prev.jpg``, or the bundled sample's ``videos/<id>.mp4``. No other file stands in for
``video_prev.mp4`` (``video_during.mp4`` shows the answer): a clip without it has no context video.
"""

from __future__ import annotations

import json
import numbers
import re
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from egoeval.core.errors import InputError
from egoeval.core.io.atomic import write_parquet
from egoeval.core.io.bounded import read_json, read_parquet
from egoeval.core.io.paths import data_file, data_roots, relative_path_problem

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
    "strip",
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
        ("strip", pa.string()),
    ]
)
VERIFIED_SPLIT = "verified_split.json"
DATASETS = {"egonormia": "final_data.json", "ood_robot": "ood_robot.json"}
NOT_ITEMS = {VERIFIED_SPLIT, "manifest.sha256"}
# Open-Social-World/EgoNormia src/final_dataset/verified_split.json at commit 0b03a0210ab5ef2ccc967700eeb70e8837077277
# (MIT), sha256 65820d50f700ca5d8bc2225910db8e1996e7b8eddb20d495a8cefcf732c23cff
SHIPPED_SPLIT = Path(__file__).parent / "data" / VERIFIED_SPLIT
PREV_VIDEO = "video_prev.mp4"
PREV_STRIP = "frame_all_prev.jpg"
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


def _taxonomy(value: object, notes: Counter | None = None) -> tuple[list[list[str]] | None, str | None]:
    """Five category lists from a list of lists, a ``{"0": [...]}`` mapping, a JSON string of either, or None.

    Labels outside ``CATEGORIES`` are dropped (the official evaluation never reads the taxonomy) and counted.
    """
    if value is None:
        return [[] for _ in range(N_OPTIONS)], None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            return None, f"taxonomy is not valid JSON ({exc.msg})"
        except (ValueError, RecursionError) as exc:  # an integer beyond Python's limit, nesting beyond its stack
            return None, f"taxonomy is not readable JSON ({type(exc).__name__})"
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
        if unknown and notes is not None:
            for label in unknown:
                notes[f"unknown taxonomy label {label!r} dropped"] += 1
        result.append([c for c in cats if c in CATEGORIES])
    return result, None


def _check_row(row: Mapping[str, Any], notes: Counter) -> tuple[dict[str, Any] | None, list[str]]:
    """One normalized row, or the list of its problems; lenient readings are counted in ``notes``."""
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
            notes[f"behaviors with {len(empty)} empty options (kept as they are)"] += 1
        elif justifications is not None and [i for i, j in enumerate(justifications) if not j] != empty:
            notes["justifications empty elsewhere than the behaviors' empty slot (kept as they are)"] += 1
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
    taxonomy, problem = _taxonomy(row.get("taxonomy"), notes)
    if problem:
        problems.append(problem)
    description = row.get("description")
    if not isinstance(description, str):
        problems.append(f"description must be a string, got {type(description).__name__}")
    elif not description.strip():
        notes["empty description (kept: the pipeline setting sends it empty, as the official code does)"] += 1
    verified = row.get("verified", False)
    if not isinstance(verified, bool | np.bool_):
        problems.append(f"verified must be true or false, got {verified!r}")
    for column in ("video", "strip"):
        media = row.get(column, "")
        if media != "" and (problem := relative_path_problem(media)) is not None:
            problems.append(f"{column}: {problem}")
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
        "video": row.get("video", ""),
        "strip": row.get("strip", ""),
    }, []


def validate_items(
    rows: Sequence[Mapping[str, Any]], source_path: str | Path, notes: Counter | None = None
) -> pd.DataFrame:
    """Check every row and return the items table sorted by id; on any problem raise one InputError.

    Rows read leniently (see the module docstring) are counted in ``notes`` when given.

    The error names ``source_path`` and the first bad row (its clip id, or ``#<n>`` counting from 0 when the id
    itself is unusable) and lists the problems of up to five more rows.
    """
    good: list[dict[str, Any]] = []
    errors: list[tuple[str, str]] = []
    seen: set[str] = set()
    notes = Counter() if notes is None else notes
    for n, row in enumerate(rows):
        label = row.get("id") if isinstance(row.get("id"), str) and row.get("id") else f"#{n}"
        checked, problems = _check_row(row, notes)
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


def read_official_json(path: str | Path, notes: Counter | None = None) -> pd.DataFrame:
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
    return validate_items(rows, path, notes)


def read_hf_parquet(path: str | Path, notes: Counter | None = None) -> pd.DataFrame:
    """Items from the Hugging Face dataset's parquet layout (``correct_idx``, ``sensible_idx``, ``description``)."""
    frame = read_parquet(path)
    missing = [
        c for c in ("id", "behaviors", "justifications", "correct_idx", "sensible_idx", "description") if c not in frame
    ]
    if missing:
        raise InputError(path, f"missing columns {missing}")
    wanted = [c for c in COLUMNS if c in frame]
    return validate_items(frame[wanted].to_dict("records"), path, notes)


def read_items(path: str | Path) -> pd.DataFrame:
    """Read (and re-validate) an items table written by ``write_items``."""
    return read_hf_parquet(path)


def write_items(items: pd.DataFrame, path: str | Path) -> None:
    """Write the items table deterministically (sorted by id, fixed arrow schema), atomically."""
    table = items.loc[:, list(COLUMNS)].sort_values("id", kind="stable").reset_index(drop=True)
    write_parquet(path, table, ITEMS_SCHEMA)


def items_file(folder: str | Path, dataset: str = "egonormia") -> str:
    """The name of the one items file of ``dataset`` in ``folder`` (see the module docstring)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(folder, "no such folder")
    if dataset not in DATASETS:
        raise InputError(folder, f"unknown dataset {dataset!r}; known: {', '.join(DATASETS)}")
    names = sorted(p.name for p in folder.iterdir() if p.is_file())
    if DATASETS[dataset] in names:
        return DATASETS[dataset]
    if dataset != "egonormia":
        raise InputError(folder, f"no {DATASETS[dataset]} (dataset {dataset!r})")
    others = set(DATASETS.values()) | NOT_ITEMS
    parquets = [n for n in names if n.endswith(".parquet")]
    jsons = [n for n in names if n.endswith(".json") and not n.endswith("_eval.json") and n not in others]
    candidates = parquets if parquets else jsons
    if len(candidates) != 1:
        raise InputError(
            folder,
            "no EgoNormia items file: expected final_data.json (the official layout or a Hugging Face snapshot), "
            f"else exactly one *.parquet or one JSON items file; found {candidates or 'none'}",
        )
    return candidates[0]


def item_files(folder: str | Path, dataset: str = "egonormia") -> list[str]:
    """Names (relative to ``folder``) of the files ``read_folder`` reads, sorted."""
    names = [items_file(folder, dataset)]
    if (Path(folder) / VERIFIED_SPLIT).is_file():
        names.append(VERIFIED_SPLIT)
    return sorted(names)


def verified_ids(path: str | Path = SHIPPED_SPLIT) -> set[str]:
    """The ids of a ``{"split": [ids]}`` file (by default the shipped EgoNormia-verified split)."""
    path = Path(path)
    data = read_json(path)
    ids = data.get("split") if isinstance(data, dict) else None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise InputError(path, 'expected {"split": [clip ids]}')
    return set(ids)


def read_folder(folder: str | Path, dataset: str = "egonormia", notes: Counter | None = None) -> pd.DataFrame:
    """The items of ``dataset`` in ``folder``, validated, sorted by id, ``verified`` from the shipped split.

    The ``video`` and ``strip`` columns are left as the file gives them; ``find_video``/``find_strip`` locate media.
    """
    folder = Path(folder)
    name = items_file(folder, dataset)
    path = folder / name
    items = read_hf_parquet(path, notes) if name.endswith(".parquet") else read_official_json(path, notes)
    verified = verified_ids() if dataset == "egonormia" else set()
    if (folder / VERIFIED_SPLIT).is_file():
        own = verified_ids(folder / VERIFIED_SPLIT)
        unknown = own - set(items["id"])
        if unknown:
            print(f"warning: {folder / VERIFIED_SPLIT} lists {len(unknown)} ids that are not items", file=sys.stderr)
        verified |= own
    items["verified"] = items["verified"] | items["id"].isin(verified)
    return items


def select_split(items: pd.DataFrame, split: str, where: str | Path) -> pd.DataFrame:
    """``full``: every item; ``verified``: the verified ones (InputError naming ``where`` when there are none)."""
    if split == "verified":
        items = items[items["verified"]].reset_index(drop=True)
        if items.empty:
            raise InputError(where, "split 'verified' selects no clip: no item is in the verified split")
    return items


def stratum(taxonomy: Sequence[Sequence[str]], correct_idx: int) -> str:
    """A clip's stratum for a smoke sample: the first of ``CATEGORIES`` among its correct option's categories, or
    ``"none"`` (the correct answer is the empty slot, or the option has no category)."""
    labels = set(taxonomy[correct_idx]) if correct_idx < len(taxonomy) else set()
    return next((name for name in CATEGORIES if name in labels), "none")


def stratified_quotas(sizes: Mapping[str, int], limit: int) -> dict[str, int]:
    """Clips drawn per stratum for a sample of ``limit`` out of ``sum(sizes)``: each stratum its proportional share
    rounded down, the clips left over to the largest remainders (ties: the order of ``sizes``), so every quota is
    within one clip of ``limit * size / total`` (Hamilton's largest-remainder method)."""
    total = sum(sizes.values())
    if limit >= total:
        return dict(sizes)
    quotas = {name: limit * size // total for name, size in sizes.items()}
    order = sorted(sizes, key=lambda name: -(limit * sizes[name] % total))  # stable: ties keep the given order
    for name in order[: limit - sum(quotas.values())]:
        quotas[name] += 1
    return quotas


def limit_items(items: pd.DataFrame, limit: int | None, seed: int) -> pd.DataFrame:
    """``egonormia.fetch.limit``: a seeded sample of ``limit`` clips stratified by ``stratum`` (every category in
    proportion, within one clip), sorted by id; every item when ``limit`` is None or not below their number."""
    if limit is None or limit >= len(items):
        return items
    strata = pd.Series(
        [stratum(t, int(k)) for t, k in zip(items["taxonomy"], items["correct_idx"], strict=True)], index=items.index
    )
    names = [name for name in (*CATEGORIES, "none") if (strata == name).any()]
    quotas = stratified_quotas({name: int((strata == name).sum()) for name in names}, limit)
    rng = np.random.default_rng(seed)
    kept: list[str] = []
    for name in names:
        ids = sorted(items.loc[strata == name, "id"].astype(str))
        kept += [ids[i] for i in rng.choice(len(ids), size=quotas[name], replace=False)]
    return items[items["id"].astype(str).isin(set(kept))].sort_values("id", ignore_index=True)


def select_clips(items: pd.DataFrame, split: str, limit: int | None, seed: int, where: str | Path) -> pd.DataFrame:
    """The clips fetch keeps: the ``split`` (``select_split``), then at most ``limit`` of them (``limit_items``)."""
    return limit_items(select_split(items, split, where), limit, seed)


def find_video(root: str | Path, clip_id: str) -> str | None:
    """The clip's context video relative to the media ``root`` (posix), or None; ``clip_id`` must be a safe id.

    ``video/<id>/video_prev.mp4`` (Hugging Face layout) or ``videos/<id>.mp4`` (the bundled sample); never
    another file of the clip (``video_during.mp4`` shows the answer).
    """
    root = Path(root)
    for name in (Path("video") / clip_id / PREV_VIDEO, Path("videos") / f"{clip_id}.mp4"):
        if (root / name).is_file():
            return name.as_posix()
    return None


def find_strip(root: str | Path, clip_id: str) -> str | None:
    """The dataset's pre-rendered frames strip ``video/<id>/frame_all_prev.jpg`` relative to ``root``, or None."""
    name = Path("video") / clip_id / PREV_STRIP
    return name.as_posix() if (Path(root) / name).is_file() else None


def clip_media(
    root: str | Path, items: pd.DataFrame, where: str | Path, roots: Sequence[Path] | None = None
) -> dict[str, dict[str, str]]:
    """Each clip's context video and frames strip under the media ``root``: ``{id: {"video": name, "strip": name}}``
    (relative to the root, ``""`` where there is none), each inside ``roots`` with its symlinks followed (default
    ``data_roots(root)``: the root, or a Hugging Face snapshot and its blob store); else InputError naming ``where``
    (the items file) and the clip."""
    roots = data_roots(root) if roots is None else tuple(roots)
    media = {}
    for clip_id in items["id"]:
        found = {"video": find_video(root, clip_id) or "", "strip": find_strip(root, clip_id) or ""}
        for name in filter(None, found.values()):
            data_file(root, name, where, clip_id, roots)
        media[clip_id] = found
    return media


def media_files(
    root: str | Path, items: pd.DataFrame, where: str | Path | None = None, roots: Sequence[Path] | None = None
) -> list[str]:
    """Every context video and frames strip of the items under the media ``root`` (names relative to it), checked
    as ``clip_media`` checks them."""
    media = clip_media(root, items, root if where is None else where, roots)
    return sorted(name for found in media.values() for name in found.values() if name)


def datasets_in(folder: str | Path) -> list[str]:
    """The datasets (``DATASETS`` keys) whose items ``folder`` holds; InputError when it holds none."""
    found = [d for d, name in DATASETS.items() if d != "egonormia" and (Path(folder) / name).is_file()]
    try:
        items_file(folder, "egonormia")
    except InputError:
        if not found:
            raise
        return found
    return ["egonormia", *found]


def source_files(folder: str | Path, items: pd.DataFrame, dataset: str = "egonormia") -> list[str]:
    """The items files and every clip's media in ``folder`` (names relative to it): what a manifest pins."""
    return sorted([*item_files(folder, dataset), *media_files(folder, items)])
