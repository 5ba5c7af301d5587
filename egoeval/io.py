"""Small file helpers shared by every stage: params, atomic writes, sha256 manifests, input errors."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

PARAMS_FILE = Path("params.yaml")
_UMASK = os.umask(0)
os.umask(_UMASK)


class InputError(ValueError):
    """Bad input: the message names the file (and the row, where there is one)."""

    def __init__(self, path: str | os.PathLike[str], message: str, row: object | None = None) -> None:
        where = f"{path}" if row is None else f"{path}, row {row}"
        super().__init__(f"{where}: {message}")
        self.path = str(path)
        self.row = row


def flatten_dotted(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Leaves of nested dicts by dotted key (``{"a": {"b": 1}}`` -> ``{"a.b": 1}``); an empty dict is a leaf."""
    if isinstance(obj, dict) and obj:
        flat: dict[str, Any] = {}
        for key, value in obj.items():
            flat.update(flatten_dotted(value, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: obj}


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
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def read_json(path: str | os.PathLike[str]) -> Any:
    """A JSON file, as InputError naming the file when it is unreadable or an object repeats a key (json.loads
    would keep the last copy silently: a clip listed twice would change its gold answer unnoticed)."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in pairs:
            if key in seen:
                raise InputError(path, f"the key {key!r} appears twice in one object; remove one copy")
            seen[key] = value
        return seen

    try:
        return json.loads(Path(path).read_bytes(), object_pairs_hook=unique)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(path, f"not a readable JSON file: {error}") from None


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Deterministic JSON (sorted keys, fixed indent, trailing newline), written atomically."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, allow_nan=False) + "\n")


def write_parquet(path: str | os.PathLike[str], df: pd.DataFrame, schema: pa.Schema | None = None) -> None:
    """Write a table atomically (pyarrow, no index, optional schema); callers sort first for byte-identical files."""
    buffer = io.BytesIO()
    df.to_parquet(buffer, index=False, schema=schema)
    atomic_write_bytes(path, buffer.getvalue())


@contextmanager
def replaced_dir(out_dir: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield an empty sibling folder to fill; on success it replaces ``out_dir`` whole, on failure it is removed."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}."))
    try:
        os.chmod(work, 0o777 & ~_UMASK)  # mkdtemp creates 0700; give the folder the usual permissions
        yield work
        if out_dir.exists():
            shutil.rmtree(out_dir)
        work.rename(out_dir)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def sha256_files(
    root: str | os.PathLike[str], names: list[str], workers: int | None = None, desc: str = "sha256"
) -> dict[str, str]:
    """sha256 of many files under ``root`` in parallel threads (hashlib releases the GIL), with a progress bar.

    A missing file raises InputError naming it.
    """
    root = Path(root)
    workers = workers or min(32, 4 * (os.cpu_count() or 1))

    def one(name: str) -> str:
        try:
            return sha256_file(root / name)
        except FileNotFoundError:
            raise InputError(root / name, "missing (the annotation or the manifest names it)") from None

    from tqdm import tqdm

    with ThreadPoolExecutor(max_workers=workers) as pool:
        digests = list(tqdm(pool.map(one, names), total=len(names), desc=desc, unit="file", disable=len(names) < 100))
    return dict(zip(names, digests, strict=True))


def read_manifest(path: str | os.PathLike[str]) -> dict[str, str]:
    """A sha256 manifest in ``sha256sum`` format: ``<hex>  <relative path>`` per line."""
    entries: dict[str, str] = {}
    for lineno, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            raise InputError(path, f"not a '<sha256>  <path>' line: {line!r}", row=lineno)
        entries[name.strip()] = digest.lower()
    return entries


def write_manifest(path: str | os.PathLike[str], root: str | os.PathLike[str], names: list[str]) -> None:
    """Pin ``names`` (relative to ``root``) in a sha256 manifest, hashing in parallel."""
    digests = sha256_files(root, sorted(set(names)), desc="pinning")
    atomic_write_text(path, "".join(f"{digest}  {name}\n" for name, digest in digests.items()))


def verify_manifest(manifest: str | os.PathLike[str], root: str | os.PathLike[str], names: list[str]) -> None:
    """Check every file in ``names`` (relative to ``root``) against the manifest; raise on any mismatch."""
    expected = read_manifest(manifest)
    names = sorted(set(names))
    for name in names:
        if name not in expected:
            raise InputError(manifest, f"{name} is not pinned in the manifest")
    for name, actual in sha256_files(root, names, desc="verifying").items():
        if actual != expected[name]:
            raise InputError(Path(root) / name, f"sha256 {actual} differs from the manifest's {expected[name]}")
