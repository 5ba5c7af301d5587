"""Paths: the project a command works on (found as DVC finds it), and the one check that a path given by data
stays inside its data root."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from egoeval.core.errors import InputError


def project_root(start: str | os.PathLike[str] = ".") -> Path:
    """The project ``start`` lies in, found as DVC finds it: ``start`` or the nearest folder above it that holds a
    ``.dvc`` folder, as a path relative to ``start`` (``.``, ``..``, ...); ``start`` itself when there is none (the
    command that needs a project says so)."""
    here = Path(start).absolute()
    for folder in (here, *here.parents):
        if (folder / ".dvc").is_dir():
            return Path(start) / os.path.relpath(folder, here) if folder != here else Path(start)
    return Path(start)


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
