"""A stage's outputs, visible together: staged beside their targets, committed as one step a kill cannot split.

A commit keeps its files beside each target, named ``.<target name>.egoeval-<kind>-<pid>`` (ignored by git and
DVC): ``new`` the staged version, ``old`` the last version while the commit runs, ``commit`` the journal (beside
the first target) that lists the targets. The journal exists exactly while targets are being replaced; a process
killed then leaves it, and the next run of any stage (``recover_outputs``, for every output in dvc.lock) or the
next commit of those targets rolls the killed one back from the ``old`` copies, so the targets are all old or all
new, never mixed. Files of dead processes are removed then too. DVC never records a killed stage, so rolling back
leaves the workspace as dvc.lock last saw it.
"""

from __future__ import annotations

import fcntl
import glob
import json
import os
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from egoeval.core.errors import InputError
from egoeval.core.io.dvc_lock import lock_paths

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
    _recover([Path(root) / path for path in lock_paths(root, ("outs",))])


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


def tracked_paths(root: str | os.PathLike[str]) -> set[str]:
    """The files and folders the pipeline in ``root`` tracks (relative paths): dvc.yaml, dvc.lock, DVC's and git's
    own folders, and every dependency, output and params file dvc.lock records."""
    return {*PIPELINE_FILES, *lock_paths(root, ("deps", "outs", "params"))}


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
