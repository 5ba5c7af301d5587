"""MOTChallenge text files: reading with validation, exact writing, and finding sequences in a folder.

Rows are read into a :class:`MotTable` (NumPy columns: the scorers' input, no pandas needed, so ``egoeval score-tracks``
never imports it) or, with :func:`read_mot`, a DataFrame of the same columns.

One box per line: ``frame, id, x, y, w, h, conf[, class, visibility, ...]`` (6 to 10 fields, comma or
whitespace separated), frames 1-based, ids integers >= 0 and unique within a frame, no NaN or infinity,
no negative width or height. Ground truth follows TrackEval's MOT15 semantics: a row whose
``conf`` truncates to 0 (``int(conf) == 0``, TrackEval's ``zero_marked``) is dropped; class and
visibility are not used. Tracker rows are all kept.
"""

from __future__ import annotations

import configparser
import io
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from egoeval.core.errors import InputError
from egoeval.core.io.atomic import atomic_write_text
from egoeval.core.io.bounded import MAX_LINE_BYTES, long_line, read_bounded, read_text

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = ["frame", "id", "x", "y", "w", "h", "conf"]
WORLD_COLUMNS = ["root_x", "root_y", "root_z"]  # a box's world point (a person's 3D root, metres): world.parquet
MIN_FIELDS, MAX_FIELDS = 6, 10
_MAX_INT = 2.0**53  # larger "integers" are not exact in the float64 text TrackEval reads


@dataclass(frozen=True)
class MotTable:
    """MOTChallenge rows as columns: ``frame`` and ``id`` (int64), ``x, y, w, h, conf`` (float64), in file order."""

    frame: np.ndarray
    id: np.ndarray
    x: np.ndarray
    y: np.ndarray
    w: np.ndarray
    h: np.ndarray
    conf: np.ndarray

    @classmethod
    def from_values(cls, values: np.ndarray) -> MotTable:
        """From an (n, 7) float array of the columns in COLUMNS' order."""
        return cls(*(values[:, k].astype(np.int64 if k < 2 else np.float64) for k in range(len(COLUMNS))))

    @classmethod
    def empty(cls) -> MotTable:
        return cls.from_values(np.empty((0, len(COLUMNS))))

    @classmethod
    def of(cls, table: MotTable | pd.DataFrame) -> MotTable:
        """``table`` itself, or a DataFrame's columns (``conf`` 1 where it has none, as a tracker's rows may)."""
        if isinstance(table, MotTable):
            return table
        conf = table["conf"].to_numpy(np.float64) if "conf" in table else np.ones(len(table))
        columns = [table[name].to_numpy(np.int64 if k < 2 else np.float64) for k, name in enumerate(COLUMNS[:6])]
        return cls(*columns, conf)

    def __len__(self) -> int:
        return len(self.frame)

    def take(self, rows: np.ndarray) -> MotTable:
        """The rows a boolean mask or an index array selects, in that order."""
        return MotTable(*(getattr(self, name)[rows] for name in COLUMNS))

    def with_conf(self, conf: np.ndarray) -> MotTable:
        return MotTable(self.frame, self.id, self.x, self.y, self.w, self.h, conf)

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame({name: getattr(self, name) for name in COLUMNS}, copy=False)


SequenceTables = Mapping[str, "MotTable | pd.DataFrame"]  # MOTChallenge rows by sequence (DataFrames via MotTable.of)


def read_mot(path: str | os.PathLike[str], *, kind: Literal["gt", "pred"]) -> pd.DataFrame:
    """:func:`read_mot_table` as a DataFrame."""
    return read_mot_table(path, kind=kind).to_frame()


def read_mot_table(path: str | os.PathLike[str], *, kind: Literal["gt", "pred"]) -> MotTable:
    """Read and validate one MOTChallenge file; ``kind="gt"`` drops zero-marked rows (MOT15 semantics)."""
    if kind not in ("gt", "pred"):
        raise ValueError(f"kind must be 'gt' or 'pred', not {kind!r}")
    path = Path(path)
    data = read_bounded(path)
    if (line := long_line(data)) is not None:
        raise InputError(path, f"longer than {MAX_LINE_BYTES:,} bytes: not a line of this format", row=line)
    text = _text(path, data)
    values = _parse(path, text)
    if values.shape[1] == MIN_FIELDS:
        values = np.column_stack([values, np.ones(len(values))])  # no conf column: keep every row
    values = values[:, : len(COLUMNS)]
    _validate(path, text, values)
    if kind == "gt":
        values = values[np.trunc(values[:, 6]) != 0]
    return MotTable.from_values(values)


def write_mot(path: str | os.PathLike[str], rows: MotTable | pd.DataFrame) -> None:
    """Write ``frame,id,x,y,w,h,conf,-1,-1,-1`` lines, atomically.

    Rows are stably sorted by frame (the order within a frame is kept: it decides ties in matching).
    Floats are written in their shortest round-trip form, so reading the file back gives the same bits.
    """
    table = MotTable.of(rows)
    table = table.take(np.argsort(table.frame, kind="stable"))
    columns: list[Any] = [table.frame.astype(str), table.id.astype(str)]
    columns += [_format_floats(getattr(table, name)) for name in COLUMNS[2:]]
    lines = [",".join(fields) + ",-1,-1,-1\n" for fields in zip(*columns, strict=True)]
    atomic_write_text(path, "".join(lines))


def read_mot_folder(folder: str | os.PathLike[str]) -> dict[str, Path]:
    """Sequence name -> file, from ``<seq>.txt`` files or the MOTChallenge tree ``<seq>/gt/gt.txt``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(folder, "not a folder")
    found: dict[str, Path] = {}
    for path in sorted(folder.glob("*.txt")):
        if path.is_file():
            found[path.stem] = path
    for path in sorted(folder.glob("*/gt/gt.txt")):
        seq = path.parent.parent.name
        if seq in found:
            raise InputError(path, f"sequence {seq!r} is also given as {found[seq]}")
        found[seq] = path
    return dict(sorted(found.items()))


@dataclass(frozen=True)
class SeqInfo:
    """What ``<seq>/seqinfo.ini`` says: ``seqLength`` and the image size (``imWidth``, ``imHeight``; None where the
    file has neither)."""

    length: int
    width: int | None
    height: int | None


def read_seqinfo(gt_path: str | os.PathLike[str]) -> SeqInfo | None:
    """``<seq>/seqinfo.ini`` beside a ``<seq>/gt/gt.txt`` file; None where there is none (the flat layout).

    ``seqLength`` is required; ``imWidth`` and ``imHeight`` go together, positive integers.
    """
    gt_path = Path(gt_path)
    ini = gt_path.parent.parent / "seqinfo.ini"
    if gt_path.name != "gt.txt" or gt_path.parent.name != "gt" or not ini.is_file():
        return None
    parser = configparser.ConfigParser()
    try:
        parser.read_string(read_text(ini), str(ini))
        section = parser["Sequence"]
        length = int(section["seqLength"])
    except (configparser.Error, KeyError, ValueError) as err:
        raise InputError(ini, f"no integer seqLength in a [Sequence] section ({err})") from err
    if length < 0:
        raise InputError(ini, f"seqLength {length} is negative")
    if "imWidth" not in section and "imHeight" not in section:
        return SeqInfo(length, None, None)
    try:
        width, height = int(section["imWidth"]), int(section["imHeight"])
    except (KeyError, ValueError) as err:
        raise InputError(ini, f"imWidth and imHeight must both be integers ({err})") from err
    if width <= 0 or height <= 0:
        raise InputError(ini, f"image size {width} x {height} must be positive")
    return SeqInfo(length, width, height)


def _format_floats(values: np.ndarray) -> list[str]:
    """Shortest strings that parse back to the same float64 (``repr``), integral values without ``.0``."""
    return [text[:-2] if text.endswith(".0") else text for text in map(repr, values.tolist())]


def _parse(path: Path, text: str) -> np.ndarray:
    """All fields as float64, shape (rows, fields): NumPy's C reader (each field through CPython's correctly rounded
    ``PyOS_string_to_double``, as ``float()``), or a line-by-line one that names the first bad line when the file is
    not a clean rectangle of numbers (``text``: :func:`_text`'s)."""
    stripped = text.lstrip()
    if not stripped:
        return np.empty((0, MIN_FIELDS))
    first = stripped.split("\n", 1)[0]
    comma = "," in first
    if len(first.split(",") if comma else first.split()) > MAX_FIELDS + 1:  # + 1: a trailing comma
        return _parse_lines(path, text, comma)  # names the line; never a table that wide
    try:
        values = np.loadtxt(io.StringIO(text), delimiter="," if comma else None, comments=None, ndmin=2)
    except ValueError:
        values = None
    if values is None or not MIN_FIELDS <= values.shape[1] <= MAX_FIELDS or np.isnan(values).any():
        values = _parse_lines(path, text, comma)
    return values


def _text(path: Path, data: bytes) -> str:
    """The file's text with every line ended by LF (CR LF and a lone CR end lines too, as in pandas' reader); a
    leading byte-order mark (as Windows editors save UTF-8) is not part of the first number."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(path, f"not UTF-8 text: {err}") from err
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _parse_lines(path: Path, text: str, comma: bool) -> np.ndarray:
    """Slow, exact parser (TrackEval's rules: a trailing empty field is dropped) that names the first bad line."""
    rows: list[list[float]] = []
    width = None
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        fields = [field.strip() for field in line.split(",")] if comma else line.split()
        if fields[-1] == "":
            fields.pop()
        if not MIN_FIELDS <= len(fields) <= MAX_FIELDS:
            raise InputError(path, f"{len(fields)} fields, expected {MIN_FIELDS} to {MAX_FIELDS}", row=lineno)
        if width is not None and len(fields) != width:
            raise InputError(path, f"{len(fields)} fields, but earlier rows have {width}", row=lineno)
        width = len(fields)
        try:
            rows.append([float(field) for field in fields])
        except ValueError:
            bad = next(field for field in fields if not _is_float(field))
            raise InputError(path, f"{bad!r} is not a number", row=lineno) from None
    return np.array(rows, dtype=np.float64)


def _is_float(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def _validate(path: Path, text: str, values: np.ndarray) -> None:
    """Raise InputError for the first bad row (1-based line number in the file)."""
    checks = [
        (~np.isfinite(values).all(axis=1), "NaN or infinite value"),
        ((values[:, 4] < 0) | (values[:, 5] < 0), "negative width or height"),
        ((values[:, 0] != np.floor(values[:, 0])) | (np.abs(values[:, 0]) >= _MAX_INT), "frame is not an integer"),
        ((values[:, 1] != np.floor(values[:, 1])) | (np.abs(values[:, 1]) >= _MAX_INT), "id is not an integer"),
        (values[:, 0] < 1, "frame must be >= 1 (frames are 1-based)"),
        (values[:, 1] < 0, "id must be >= 0 (TrackEval would merge a negative id with another one)"),
    ]
    for bad, message in checks:
        if bad.any():
            index = int(np.argmax(bad))
            raise InputError(path, f"{message}: {_fields(values[index])}", row=_line_numbers(text, [index])[0])
    if len(values) < 2:
        return
    order = np.lexsort((values[:, 1], values[:, 0]))
    same = (np.diff(values[order, 0]) == 0) & (np.diff(values[order, 1]) == 0)
    if same.any():
        pairs = np.sort(np.column_stack([order[:-1][same], order[1:][same]]), axis=1)
        first, second = pairs[np.argmin(pairs[:, 1])]
        rows = _line_numbers(text, [int(first), int(second)])
        frame, track = int(values[first, 0]), int(values[first, 1])
        raise InputError(path, f"id {track} appears twice in frame {frame} (rows {rows[0]} and {rows[1]})", row=rows[1])


def _fields(row: np.ndarray) -> str:
    return ", ".join(repr(float(value)) for value in row)


def _line_numbers(text: str, indices: list[int]) -> list[int]:
    """1-based file line numbers of the given data rows (blank lines are not rows; ``text``: :func:`_text`'s)."""
    lines = [number for number, line in enumerate(text.split("\n"), start=1) if line.strip()]
    return [lines[index] for index in indices]
