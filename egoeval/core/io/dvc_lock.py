"""dvc.lock, read in one place: the stages DVC recorded at the last run, and the paths they depend on and write."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from egoeval.core.errors import InputError
from egoeval.core.io.bounded import read_bounded

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when there: every stage reads dvc.lock


def read_lock(root: str | os.PathLike[str]) -> dict[str, Any]:
    """dvc.lock's stages (``{}`` before the first run); InputError naming dvc.lock when it is not a lock file (e.g.
    truncated), before DVC reads it and fails with a traceback."""
    path = Path(root) / "dvc.lock"
    if not path.exists():
        return {}
    try:
        lock = yaml.load(read_bounded(path).decode("utf-8"), Loader=_LOADER)
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise InputError(path, f"not valid YAML (truncated or edited?): {error}; restore it from git") from None
    stages = (lock or {}).get("stages", {}) if isinstance(lock, dict) or lock is None else None
    if not isinstance(stages, dict) or not all(isinstance(entry, dict) for entry in stages.values()):
        raise InputError(path, "not a DVC lock file ({schema: '2.0', stages: {stage: ...}}); restore it from git")
    return stages


def lock_paths(root: str | os.PathLike[str], kinds: tuple[str, ...]) -> set[str]:
    """The paths (relative to ``root``) of the given kinds (``deps``, ``outs``; ``params``: its files) that dvc.lock
    records; none when dvc.lock is missing or unreadable (the stage that needs it names it: ``read_lock``)."""
    try:
        stages = read_lock(root)
    except InputError:
        return set()
    paths: set[str] = set()
    for entry in stages.values():
        for kind in kinds:
            paths.update(str(item["path"]) for item in entry.get(kind) or [] if isinstance(item, dict))
        if "params" in kinds and isinstance(entry.get("params"), dict):
            paths.update(str(name) for name in entry["params"])  # the params files the stage read
    return paths
