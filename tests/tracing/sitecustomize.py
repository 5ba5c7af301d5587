"""Traces a run for tests/test_dvc_deps.py: every stage process (DVC sets ``DVC_STAGE``) started with this folder on
PYTHONPATH and ``EGOEVAL_TRACE`` set to a file appends one JSON line there at exit: the params keys it read through
egoeval.core.settings and the project files it imported (what dvc.yaml must declare).

A read is a settings field's value taken from a validated section (a section or a mapping of sections is a step on
the way, not a read); ``model_dump`` of a section reads all of it. Reads while validating are not the stage's.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

TRACE = os.environ.get("EGOEVAL_TRACE")
PACKAGES = ("egoeval", "stages", "flows")  # the project's own code
_keys: set[str] = set()
_paths: dict[int, str] = {}  # id of a validated section -> its dotted key


def _set_paths(section: Any, path: str, base: type) -> None:
    _paths[id(section)] = path
    for name in type(section).model_fields:
        child = object.__getattribute__(section, "__dict__").get(name)
        if isinstance(child, dict):  # a mapping of sections: each under its key (``egohumans.track.config.x``)
            for key, item in child.items():
                if isinstance(item, base):
                    _set_paths(item, f"{path}.{name}.{key}".lstrip("."), base)
            continue
        for item in child if isinstance(child, list) else [child]:
            if isinstance(item, base):  # list items share their list's key (``egonormia.baselines.name``)
                _set_paths(item, f"{path}.{name}".lstrip("."), base)


def _patch(settings: Any) -> None:
    section = settings.Section
    get, dump, validate = section.__getattribute__, section.model_dump, settings.validate_params

    def traced_get(self: Any, name: str) -> Any:
        value = get(self, name)
        path = _paths.get(id(self))
        if path is not None and not name.startswith("_") and name in type(self).model_fields:
            mapping = isinstance(value, dict) and value and all(isinstance(v, section) for v in value.values())
            if not isinstance(value, section) and not mapping:
                _keys.add(f"{path}.{name}".lstrip("."))
        return value

    def traced_dump(self: Any, **kwargs: Any) -> dict[str, Any]:
        if id(self) in _paths:
            _keys.add(_paths[id(self)])
        return dump(self, **kwargs)

    def traced_validate(*args: Any, **kwargs: Any) -> Any:
        params = validate(*args, **kwargs)
        _set_paths(params, "", section)
        return params

    section.__getattribute__ = traced_get
    section.model_dump = traced_dump
    settings.validate_params = traced_validate


class _AfterImport(importlib.abc.MetaPathFinder):
    """Patches egoeval.core.settings as soon as it has been imported."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "egoeval.core.settings":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            run = spec.loader.exec_module

            def exec_module(module: Any) -> None:
                run(module)
                _patch(module)

            spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _project_files() -> list[str]:
    root = Path.cwd().resolve()
    files = set()
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        if name.split(".")[0] in PACKAGES and where:
            try:
                files.add(Path(where).resolve().relative_to(root).as_posix())
            except ValueError:
                continue
    return sorted(files)


def _write() -> None:
    line = {"stage": os.environ.get("DVC_STAGE", ""), "argv": sys.argv, "keys": sorted(_keys), "code": _project_files()}
    with open(TRACE, "a", encoding="utf-8") as handle:  # type: ignore[arg-type]
        handle.write(json.dumps(line) + "\n")


if TRACE and os.environ.get("DVC_STAGE"):  # a stage's process, not dvc's own
    sys.meta_path.insert(0, _AfterImport())
    atexit.register(_write)
