"""Small file helpers shared by every stage: params, atomic writes, outputs committed together, sha256 manifests,
input errors, bounded readers and the one check that a path given by data stays inside its root.

What one input may cost is bounded here, once (``MAX_INPUT_BYTES``, ``MAX_DEPTH``, ``MAX_ELEMENTS``,
``MAX_LINE_BYTES``); a reader refuses anything beyond with an InputError naming the file, before the cost is paid.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import io
import json
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, BinaryIO

from egoeval.errors import InputError

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa


# What one input file may cost. Generous for the real data: the EgoHumans test annotation (47,740 images) is about
# 150 MB of JSON nested 4 deep and its detections pickle about 125-190 MB holding some 15 million numbers;
# EgoNormia's final_data.json (1,853 clips) is a few MB.
MAX_INPUT_BYTES = 1 << 30  # a file read whole (JSON, pickle, MOTChallenge text), or a parquet table once decoded
MAX_DEPTH = 32  # containers nested in containers (JSON arrays and objects; pickled lists, tuples, dicts, sets)
MAX_ELEMENTS = 100_000_000  # values in one pickle, an array counting its size, a shared object each time it is met
MAX_LINE_BYTES = 1 << 16  # one line of a text format (MOTChallenge, det.txt, calibration, manifest)
_UMASK = os.umask(0)
os.umask(_UMASK)


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


# ---------------------------------------------------------------- a stage's outputs, visible together
#
# A commit keeps its files beside each target, named ``.<target name>.egoeval-<kind>-<pid>`` (ignored by git and
# DVC): ``new`` the staged version, ``old`` the last version while the commit runs, ``commit`` the journal (beside
# the first target) that lists the targets. The journal exists exactly while targets are being replaced; a process
# killed then leaves it, and the next run of any stage (``recover_outputs``, for every output in dvc.lock) or the
# next commit of those targets rolls the killed one back from the ``old`` copies, so the targets are all old or all
# new, never mixed. Files of dead processes are removed then too. DVC never records a killed stage, so rolling back
# leaves the workspace as dvc.lock last saw it.

_MARK = ".egoeval-"


def _aside(target: Path, kind: str, pid: int) -> Path:
    return target.with_name(f".{target.name}{_MARK}{kind}-{pid}")


def _alive(pid: int) -> bool:
    """Whether another live process has this pid (files this process staged earlier are never kept across calls)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


@contextmanager
def _commit_lock(folder: Path) -> Iterator[None]:
    """One commit (or roll back) at a time among the processes writing outputs in ``folder``."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _leftovers(target: Path) -> list[tuple[str, int, Path]]:
    """(kind, pid, path) of every file a commit of ``target`` left beside it."""
    prefix = f".{target.name}{_MARK}"
    found = []
    for path in target.parent.glob(glob.escape(prefix) + "*"):
        kind, _, pid = path.name.removeprefix(prefix).rpartition("-")
        if kind in ("new", "old", "commit") and pid.isdigit():
            found.append((kind, int(pid), path))
    return found


def _roll_back(journal: Path, pid: int) -> None:
    """Put back the last version of every target of an interrupted commit (safe to repeat if cut short again)."""
    try:
        entries = json.loads(journal.read_bytes())["targets"]
    except (OSError, ValueError, KeyError, TypeError):
        entries = []  # a journal cut short while being written: no target had been touched yet
    for entry in entries:
        target = journal.parent / entry["path"]
        old, new = _aside(target, "old", pid), _aside(target, "new", pid)
        if entry["existed"] and os.path.lexists(old):
            if old.is_dir() and not old.is_symlink():
                if os.path.lexists(target):
                    os.rename(target, new)  # the new folder steps aside; the old one goes back
                os.rename(old, target)
            else:
                os.replace(old, target)
        elif not entry["existed"] and os.path.lexists(target) and not os.path.lexists(new):
            os.rename(target, new)  # the target is the new version: there was none before
        _fsync_dir(target.parent)
        _remove(new)
    journal.unlink(missing_ok=True)


def _recover(targets: list[Path]) -> None:
    """Roll back the commits of ``targets`` that killed runs left half done, then remove what dead runs staged."""
    for target in targets:
        for kind, pid, journal in _leftovers(target):
            if kind == "commit" and not _alive(pid):
                with _commit_lock(journal.parent):
                    if journal.exists():  # else another process rolled it back meanwhile
                        _roll_back(journal, pid)
    dead = [(pid, path) for t in targets for kind, pid, path in _leftovers(t) if kind != "commit" and not _alive(pid)]
    # a journal is written before its commit sets anything aside: one seen now still needs what its run set aside
    pending = {pid for target in targets for kind, pid, _ in _leftovers(target) if kind == "commit"}
    for pid, path in dead:
        if pid not in pending:
            _remove(path)


def recover_outputs(root: str | os.PathLike[str] = ".") -> None:
    """``_recover`` for every output dvc.lock records in ``root``: the first thing every stage does, so that the
    next run of any stage rolls back what a killed one left half committed, and cleans up after it."""
    _recover([Path(root) / path for path in _lock_paths(root, ("outs",))])


def _commit(staged: dict[Path, Path]) -> None:
    """Replace every target by its staged version, as one step a kill cannot split (see above)."""
    pid = os.getpid()
    pairs = list(staged.items())
    first, new = pairs[0]
    if len(pairs) == 1 and not new.is_dir() and not first.is_dir():
        os.replace(new, first)  # one file: a rename is atomic already
        _fsync_dir(first.parent)
        return
    journal = _aside(first, "commit", pid)
    entries = [{"path": os.path.relpath(t, journal.parent), "existed": os.path.lexists(t)} for t, _ in pairs]
    _write_synced(journal, json.dumps({"targets": entries}).encode())
    _fsync_dir(journal.parent)
    try:
        for target, new in pairs:
            old = _aside(target, "old", pid)
            if target.is_dir() and not target.is_symlink():
                os.rename(target, old)
            elif os.path.lexists(target):
                os.link(target, old, follow_symlinks=False)  # the last version stays reachable until the end
            os.replace(new, target)
        for folder in {target.parent for target, _ in pairs}:
            _fsync_dir(folder)
    except BaseException:
        _roll_back(journal, pid)
        raise
    journal.unlink()
    _fsync_dir(journal.parent)
    for target, _ in pairs:
        _remove(_aside(target, "old", pid))


class StagedOutputs:
    """Where a stage writes the new versions of its outputs before they are committed (``outputs_together``)."""

    def __init__(self, staged: dict[Path, Path]) -> None:
        self._staged = staged

    def path(self, target: str | os.PathLike[str]) -> Path:
        """The staged path of ``target``: create the new file or folder there."""
        staged = self._staged[Path(target)]
        staged.parent.mkdir(parents=True, exist_ok=True)
        return staged

    def write(self, target: str | os.PathLike[str], data: bytes) -> None:
        try:
            _write_synced(self.path(target), data)
        except OSError as error:
            raise type(error)(error.errno, error.strerror, str(target)) from None  # the output, not its staged name


@contextmanager
def outputs_together(*targets: str | os.PathLike[str]) -> Iterator[StagedOutputs]:
    """Make new versions of ``targets`` (files or folders) visible together, or not at all.

    First rolls back a commit of these targets that a killed run left half done. Write each target's new version
    at ``staged.path(target)`` (or ``staged.write(target, data)``); when the block ends normally, one commit
    replaces every target. When it raises, the staged versions are removed and the targets stay as they were.
    """
    paths = [Path(target) for target in targets]
    _recover(paths)
    staged = {path: _aside(path, "new", os.getpid()) for path in paths}
    try:
        yield StagedOutputs(staged)
        unwritten = [str(path) for path, new in staged.items() if not os.path.lexists(new)]
        if unwritten:
            raise RuntimeError(f"outputs_together: nothing was staged for {', '.join(unwritten)}")
        with _commit_lock(paths[0].parent):
            _commit(staged)
    except BaseException:
        for new in staged.values():
            _remove(new)
        raise


@contextmanager
def replaced_dir(out_dir: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield an empty folder to fill; on success it replaces ``out_dir`` whole (``outputs_together``), on failure it
    is removed and ``out_dir`` stays as it was."""
    with outputs_together(out_dir) as staged:
        work = staged.path(out_dir)
        work.mkdir()  # the usual permissions (umask)
        yield work


PIPELINE_FILES = ("dvc.yaml", "dvc.lock", ".dvc", ".git")  # .dvc: DVC's config and cache


def _lock_paths(root: str | os.PathLike[str], kinds: tuple[str, ...]) -> set[str]:
    """The paths (relative to ``root``) of the given kinds (``deps``, ``outs``; ``params``: its files) that dvc.lock
    records."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when there: every stage reads dvc.lock
    try:
        text = (Path(root) / "dvc.lock").read_text(encoding="utf-8")
        stages = (yaml.load(text, Loader=loader) or {}).get("stages", {})
    except (OSError, UnicodeDecodeError, yaml.YAMLError, AttributeError):
        return set()
    paths: set[str] = set()
    for entry in stages.values():
        for kind in kinds:
            paths.update(str(item["path"]) for item in (entry or {}).get(kind) or [] if isinstance(item, dict))
        if "params" in kinds and isinstance((entry or {}).get("params"), dict):
            paths.update(str(name) for name in entry["params"])  # the params files the stage read
    return paths


def tracked_paths(root: str | os.PathLike[str]) -> set[str]:
    """The files and folders the pipeline in ``root`` tracks (relative paths): dvc.yaml, dvc.lock, DVC's and git's
    own folders, and every dependency, output and params file dvc.lock records."""
    return {*PIPELINE_FILES, *_lock_paths(root, ("deps", "outs", "params"))}


def check_output(
    out: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]] = (), own: Iterable[str] = ()
) -> None:
    """Refuse, naming ``out``, an output path that would destroy something: a folder, one of the command's
    ``inputs`` (or a file inside one), or a file the pipeline of the workspace holding it tracks (``tracked_paths``)
    unless it is one of the command's ``own`` outputs (paths relative to the workspace)."""
    target = Path(out).resolve()  # through links: writing via a link onto an input destroys the input alike
    if target.is_dir():
        raise InputError(out, "is a folder: name the file to write")
    for source in inputs:
        if target == Path(source).resolve() or Path(source).resolve() in target.parents:
            raise InputError(out, f"is this command's input {source}: write the output to another file")
    root = next((folder for folder in target.parents if (folder / "dvc.yaml").is_file()), None)
    if root is None:
        return
    relative = target.relative_to(root).as_posix()
    if relative in set(own):
        return
    for path in sorted(tracked_paths(root)):
        if relative == path or relative.startswith(path.rstrip("/") + "/"):
            raise InputError(out, f"the pipeline in {root} tracks {path}: write the output to another file")


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
        if not (root / name).is_file():  # never opened when it is not a regular file (a FIFO would block)
            what = "not a regular file" if (root / name).exists() else "missing"
            raise InputError(root / name, f"{what} (the annotation or the manifest names it)")
        try:
            return sha256_file(root / name)
        except OSError as error:
            raise InputError(root / name, f"cannot read: {error.strerror}") from None

    from tqdm import tqdm

    with ThreadPoolExecutor(max_workers=workers) as pool:
        digests = list(tqdm(pool.map(one, names), total=len(names), desc=desc, unit="file", disable=len(names) < 100))
    return dict(zip(names, digests, strict=True))


def read_manifest(path: str | os.PathLike[str]) -> dict[str, str]:
    """A sha256 manifest in ``sha256sum`` format: ``<hex>  <relative path>`` per line."""
    entries: dict[str, str] = {}
    for lineno, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            raise InputError(path, f"not a '<sha256>  <path>' line: {line[:200]!r}", row=lineno)
        if (problem := relative_path_problem(name.strip())) is not None:
            raise InputError(path, problem, row=lineno)
        entries[name.strip()] = digest.lower()
    return entries


def write_manifest(path: str | os.PathLike[str], root: str | os.PathLike[str], names: list[str]) -> None:
    """Pin ``names`` (relative to ``root``) in a sha256 manifest, hashing in parallel."""
    digests = sha256_files(root, sorted(set(names)), desc="pinning")
    atomic_write_text(path, "".join(f"{digest}  {name}\n" for name, digest in digests.items()))


def read_pinned(
    path: str | os.PathLike[str], sha256: str, roots: Iterable[Path], where: str | os.PathLike[str], row: object = None
) -> bytes:
    """A file's bytes, read only where the data root's files may be (``inside`` ``roots``, symlinks followed: else an
    InputError naming ``where`` and ``row``, the table that gave the path) and checked against the sha256 it was
    pinned with: InputError naming the file when they differ (it changed after the manifest was written) or it
    cannot be read. Every reader of a pinned frame goes through here: one containment rule for all."""
    data = read_bounded(inside(path, roots, where, row))
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise InputError(
            path,
            f"sha256 {actual} differs from the pinned {sha256}: the file changed after its manifest was written "
            "(restore it, or pin the data again with a new manifest)",
        )
    return data


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


# ----------------------------------------------------------------------------------------- paths given by data


def relative_path_problem(name: object) -> str | None:
    """Why ``name`` cannot be a path inside a data root (None when it can): it must be a non-empty string, relative,
    without a ``..`` part or a NUL byte."""
    if not isinstance(name, str) or not name:
        return f"a path must be a non-empty string, got {repr(name)[:200]}"
    if name.startswith("/") or ".." in PurePosixPath(name).parts or "\0" in name:
        return f"{name[:300]!r} is not a path inside the data root (absolute, or with a '..' part)"
    return None


def data_roots(folder: str | os.PathLike[str]) -> tuple[Path, ...]:
    """The folders that symlinks under a data folder may lead into: the folder itself (its own symlinks followed)
    and, when it is a Hugging Face cache snapshot (``…/snapshots/<revision>``, files that are symlinks into
    ``…/blobs``), that repository's blob store."""
    folder = Path(folder).resolve()
    roots = [folder]
    for above in (folder, *folder.parents):
        if above.parent.name == "snapshots" and (above.parent.parent / "blobs").is_dir():
            roots.append((above.parent.parent / "blobs").resolve())
            break
    return tuple(roots)


def inside(
    path: str | os.PathLike[str], roots: Iterable[Path], where: str | os.PathLike[str], row: object = None
) -> Path:
    """``path`` (unchanged) when, its symlinks followed, it lies in one of ``roots`` (``data_roots`` folders); else
    InputError naming ``where`` (the file that gave the path) and ``row``."""
    roots = tuple(roots)
    real = Path(path).resolve()
    if not any(real.is_relative_to(root) for root in roots):
        shown = str(path) if real == Path(path).absolute() else f"{path} (a link to {real}{_link_out(path, roots)})"
        allowed = " or ".join(str(root) for root in roots)
        raise InputError(where, f"{shown} lies outside the data root {allowed}", row=row)
    return Path(path)


def _link_out(path: str | os.PathLike[str], roots: tuple[Path, ...]) -> str:
    """``; the folder X is a symlink to Y`` for the folder above ``path`` whose symlink leads out of ``roots`` (its
    own folder inside them), so that an error names the link to mend; "" when ``path`` itself is that link."""
    absolute = Path(path).absolute()
    for part in reversed(absolute.parents):
        within = any(part.parent.resolve().is_relative_to(root) for root in roots)
        if within and part.is_symlink() and not any(part.resolve().is_relative_to(root) for root in roots):
            return f"; the folder {part} is a symlink to {part.resolve()}"
    return ""


def data_file(
    root: str | os.PathLike[str],
    name: object,
    where: str | os.PathLike[str],
    row: object = None,
    roots: Iterable[Path] | None = None,
) -> Path:
    """``root / name`` for a path that data gives (an annotation's file name, a clip's media, a detections folder's
    file): ``name`` relative without a ``..`` part, and the file, symlinks followed, inside ``roots`` (default
    ``data_roots(root)``; pass the roots the params name together where one may link into another). Anything else
    is an InputError naming ``where`` (the file that gave the name) and ``row``."""
    if (problem := relative_path_problem(name)) is not None:
        raise InputError(where, problem, row=row)
    return inside(Path(root) / str(name), data_roots(root) if roots is None else roots, where, row)


def read_csv(path: str | os.PathLike[str]) -> pd.DataFrame:
    """A CSV table (bounded, as ``read_bounded``); InputError naming the file when it is unreadable."""
    import pandas as pd

    try:
        return pd.read_csv(io.BytesIO(read_bounded(path)))
    except (ValueError, pd.errors.ParserError) as error:
        raise InputError(path, f"not a readable CSV table: {error}") from None
