"""Bounded readers: what one input may cost is bounded here, once (``MAX_INPUT_BYTES``, ``MAX_DEPTH``,
``MAX_ELEMENTS``, ``MAX_LINE_BYTES``); a reader refuses anything beyond with an InputError naming the file, before
the cost is paid."""

from __future__ import annotations

import io
import json
import os
import re
import stat
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from egoeval.core.errors import InputError

if TYPE_CHECKING:
    import pandas as pd


# What one input file may cost. Generous for the real data: the EgoHumans test annotation (47,740 images) is about
# 150 MB of JSON nested 4 deep and its detections pickle about 125-190 MB holding some 15 million numbers;
# EgoNormia's final_data.json (1,853 clips) is a few MB.
MAX_INPUT_BYTES = 1 << 30  # a file read whole (JSON, pickle, MOTChallenge text), or a parquet table once decoded


MAX_DEPTH = 32  # containers nested in containers (JSON arrays and objects; pickled lists, tuples, dicts, sets)


MAX_ELEMENTS = 100_000_000  # values in one pickle, an array counting its size, a shared object each time it is met


MAX_LINE_BYTES = 1 << 16  # one line of a text format (MOTChallenge, det.txt, calibration, manifest)


def input_size(path: str | os.PathLike[str]) -> int:
    """The size of a regular file of at most MAX_INPUT_BYTES; else InputError naming it (a FIFO or a device is
    never opened)."""
    try:
        info = Path(path).stat()
    except OSError as error:
        raise InputError(path, f"cannot read: {error.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise InputError(path, "not a regular file")
    if info.st_size > MAX_INPUT_BYTES:
        raise InputError(path, f"{info.st_size:,} bytes: more than one input may hold ({MAX_INPUT_BYTES:,})")
    return info.st_size


@contextmanager
def _opened_regular(path: Path, limit: int) -> Iterator[BinaryIO]:
    """``path`` opened for reading once its size (at most ``limit`` bytes) is checked, without blocking and checked
    again as opened, so a FIFO swapped in never stalls the read; InputError naming it otherwise."""
    size = input_size(path)
    if size > limit:
        raise InputError(path, f"{size:,} bytes: more than this file may hold ({limit:,})")
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise InputError(path, f"cannot read: {error.strerror}") from None
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise InputError(path, "not a regular file")
        try:
            yield handle
        except OSError as error:
            raise InputError(path, f"cannot read: {error.strerror}") from None


def read_bounded(path: str | os.PathLike[str], limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (at most MAX_INPUT_BYTES); else InputError naming it
    (nothing larger is read; see ``_opened_regular``)."""
    path = Path(path)
    limit = min(limit, MAX_INPUT_BYTES)
    with _opened_regular(path, limit) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise InputError(path, f"grew past {limit:,} bytes while read")
    return data


def stream_lines(
    path: str | os.PathLike[str], limit: int = MAX_INPUT_BYTES, max_line: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, str | None]]:
    """The lines of a UTF-8 text file of at most ``limit`` bytes (checked before a byte is read), one at a time:
    (1-based number, text without its line end); the text is None for a line longer than ``max_line`` bytes, which
    is read through in bounded pieces and never held. Memory stays within a line whatever the file's size."""
    path = Path(path)
    limit = min(limit, MAX_INPUT_BYTES)
    total, number = 0, 0
    with _opened_regular(path, limit) as handle:
        while piece := handle.readline(max_line + 1):
            number, total = number + 1, total + len(piece)
            text: str | None = None
            if len(piece) > max_line and not piece.endswith(b"\n"):  # a long line: read through, not kept
                while piece and not piece.endswith(b"\n") and total <= limit:
                    piece = handle.readline(1 << 16)
                    total += len(piece)
            else:
                try:
                    text = piece.rstrip(b"\n").rstrip(b"\r").decode("utf-8")
                except UnicodeDecodeError as error:
                    byte = error.object[error.start]
                    raise InputError(path, f"not UTF-8 text (byte {byte:#x}); save it as UTF-8", row=number) from None
            if total > limit:
                raise InputError(path, f"grew past {limit:,} bytes while read")
            yield number, text


def read_text(path: str | os.PathLike[str]) -> str:
    """A UTF-8 text file, bounded as ``read_bounded`` and in line length (MAX_LINE_BYTES); errors name the line."""
    data = read_bounded(path)
    if (line := long_line(data)) is not None:
        raise InputError(path, f"longer than {MAX_LINE_BYTES:,} bytes: not a line of this format", row=line)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        byte = error.object[error.start]
        raise InputError(path, f"not UTF-8 text (byte {byte:#x}); save it as UTF-8", row=line) from None


def long_line(data: bytes) -> int | None:
    """The 1-based number of the first line longer than MAX_LINE_BYTES, or None."""
    if len(data) <= MAX_LINE_BYTES:
        return None
    import numpy as np

    ends = np.flatnonzero(np.frombuffer(data, np.uint8) == ord("\n"))
    lengths = np.diff(ends, prepend=-1, append=len(data)) - 1
    long = np.flatnonzero(lengths > MAX_LINE_BYTES)
    return int(long[0]) + 1 if long.size else None


def read_json(path: str | os.PathLike[str]) -> Any:
    """A JSON file, bounded (MAX_INPUT_BYTES; MAX_DEPTH, checked before parsing; integers within Python's
    int-string limit, the line named), as InputError naming the file when it is not, when it is unreadable, or when
    an object repeats a key (json.loads would keep the last copy silently: a clip listed twice would change its gold
    answer unnoticed)."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in pairs:
            if key in seen:
                shown = repr(key) if len(key) <= 200 else f"{key[:200]!r}…"
                raise InputError(path, f"the key {shown} appears twice in one object; remove one copy")
            seen[key] = value
        return seen

    data = read_bounded(path)
    if (depth := json_depth(data)) > MAX_DEPTH:
        raise InputError(path, f"nested {depth} deep, more than {MAX_DEPTH}")
    try:
        return json.loads(data, object_pairs_hook=unique)
    except RecursionError:  # not reached once the depth is checked; kept so that no input can end in a traceback
        raise InputError(path, f"nested more than {MAX_DEPTH} deep") from None
    except json.JSONDecodeError as error:
        raise InputError(path, f"not a readable JSON file: {error}") from None
    except ValueError as error:  # an integer beyond Python's int-string limit (4,300 digits); bad UTF-8
        if (line := _long_integer_line(data)) is None:
            raise InputError(path, f"not a readable JSON file: {error}") from None
        digits = sys.get_int_max_str_digits()
        raise InputError(path, f"an integer of more than {digits:,} digits (Python's limit)", row=line) from None


def json_depth(data: bytes) -> int:
    """How deep the arrays and objects of a JSON text nest, strings skipped, at C speed and before any parsing:
    escaped backslashes and quotes are dropped, then all but quotes and brackets; a bracket after an odd number of
    quotes is inside a string."""
    import numpy as np

    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = np.frombuffer(data.translate(None, _NOT_STRUCTURE), np.uint8)
    outside = (np.cumsum(marks == ord('"'), dtype=np.uint8) & 1) == 0  # the parity survives uint8's wrapping
    brackets = marks[outside & (marks != ord('"'))]
    steps = np.where((brackets == ord("[")) | (brackets == ord("{")), 1, -1)
    return int(np.cumsum(steps).max(initial=0))


_NOT_STRUCTURE = bytes(set(range(256)) - set(b'"[]{}'))


# digits longer than Python converts to an integer, not those of a float; searched only after json.loads refused
_LONG_INTEGER = re.compile(rb"(?<![0-9.eE+-])-?[0-9]{%d}(?![0-9]*[.eE])" % (sys.get_int_max_str_digits() + 1))


def _long_integer_line(data: bytes) -> int | None:
    """The line of the first integer token of a JSON text too long for Python (digits inside a string are no
    token: the quotes before them are counted, escaped ones left out), in one pass; None when there is none."""
    inside, last = False, 0
    for found in _LONG_INTEGER.finditer(data):
        between = data[last : found.start()].replace(b"\\\\", b"").replace(b'\\"', b"")
        inside ^= bool(between.count(b'"') % 2)
        last = found.start()
        if not inside:
            return data.count(b"\n", 0, found.start()) + 1
    return None


def read_parquet(path: str | os.PathLike[str], columns: Sequence[str] | None = None) -> pd.DataFrame:
    """A parquet table (at most MAX_INPUT_BYTES on disk and once decoded, with ``columns`` when given), as
    InputError naming the file when it is missing, empty, cut short or not parquet."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise InputError(path, "file not found (run the stages before this one)")
    input_size(path)
    try:
        table = pq.ParquetFile(path)
        names = table.schema_arrow.names
        decoded = sum(table.metadata.row_group(i).total_byte_size for i in range(table.metadata.num_row_groups))
    except (OSError, ValueError, pa.ArrowException) as error:
        raise InputError(path, f"not a readable parquet file (empty, cut short or not parquet): {error}") from None
    if decoded > MAX_INPUT_BYTES:
        raise InputError(path, f"{decoded:,} bytes once decoded: more than one input may hold ({MAX_INPUT_BYTES:,})")
    missing = [c for c in columns or () if c not in names]
    if missing:
        raise InputError(path, f"missing columns {missing}")
    try:
        return pd.read_parquet(path, columns=None if columns is None else list(columns))
    except (OSError, ValueError, pa.ArrowException) as error:
        raise InputError(path, f"not a readable parquet file (corrupt): {error}") from None


def read_csv(path: str | os.PathLike[str]) -> pd.DataFrame:
    """A CSV table (bounded, as ``read_bounded``); InputError naming the file when it is unreadable."""
    import pandas as pd

    try:
        return pd.read_csv(io.BytesIO(read_bounded(path)))
    except (ValueError, pd.errors.ParserError) as error:
        raise InputError(path, f"not a readable CSV table: {error}") from None
