"""Small file helpers shared by every stage: params, atomic writes, outputs committed together, sha256 manifests,
input errors."""

from __future__ import annotations

import fcntl
import glob
import hashlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
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


PIPELINE_FILES = ("dvc.yaml", "dvc.lock", "params.yaml", ".dvc", ".git")  # .dvc: DVC's config and cache


def _lock_paths(root: str | os.PathLike[str], kinds: tuple[str, ...]) -> set[str]:
    """The paths (relative to ``root``) of the given kinds (``deps``, ``outs``) that dvc.lock records."""
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
    return paths


def tracked_paths(root: str | os.PathLike[str]) -> set[str]:
    """The files and folders the pipeline in ``root`` tracks (relative paths): dvc.yaml, dvc.lock, params.yaml, DVC's
    and git's own folders, and every dependency and output dvc.lock records."""
    return {*PIPELINE_FILES, *_lock_paths(root, ("deps", "outs"))}


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
