"""Atomic writes: a reader (or a crash) never sees a file half written; deterministic JSON and parquet bytes."""

from __future__ import annotations

import io
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa


_UMASK = os.umask(0)


os.umask(_UMASK)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write a file so that a reader (or a crash) never sees it half written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp creates 0600; give the file the usual permissions
        os.replace(tmp, path)
    except OSError as error:
        Path(tmp).unlink(missing_ok=True)
        raise _naming(error, path) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _naming(error: OSError, path: Path) -> OSError:
    """The error of a write (a full disk, the file size limit) naming the file written, as ``open`` errors do."""
    return error if error.filename else type(error)(error.errno, error.strerror, str(path))


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def json_bytes(obj: Any) -> bytes:
    """Deterministic JSON: sorted keys, fixed indent, trailing newline."""
    return (json.dumps(obj, indent=2, sort_keys=True, allow_nan=False) + "\n").encode("utf-8")


def parquet_bytes(df: pd.DataFrame, schema: pa.Schema | None = None) -> bytes:
    """A table as parquet (pyarrow, no index, optional schema); callers sort first for byte-identical files."""
    buffer = io.BytesIO()
    df.to_parquet(buffer, index=False, schema=schema)
    return buffer.getvalue()


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Deterministic JSON (sorted keys, fixed indent, trailing newline), written atomically."""
    atomic_write_bytes(path, json_bytes(obj))


def write_parquet(path: str | os.PathLike[str], df: pd.DataFrame, schema: pa.Schema | None = None) -> None:
    """Write a table atomically (pyarrow, no index, optional schema); callers sort first for byte-identical files."""
    atomic_write_bytes(path, parquet_bytes(df, schema))
