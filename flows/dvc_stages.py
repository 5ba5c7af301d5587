"""The pipeline's stages as DVC sees them: order, cache keys from DVC's own hashes, and dvc.lock snapshots.

dvc.yaml is the only list of stages; everything here is read from it through DVC's Python API.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from dvc.dependency.param import ParamsDependency
from dvc.repo import Repo
from dvc.stage import PipelineStage


@dataclass(frozen=True)
class StageInfo:
    """One pipeline stage (a matrix stage expands to one StageInfo per item, e.g. ``track@bytetrack-gt``)."""

    name: str  # DVC's address of the stage: a target for ``dvc repro``
    cmd: str
    upstream: tuple[str, ...]  # stages whose outputs this stage depends on
    metrics: tuple[str, ...]  # metrics files it writes, relative to the repository root


@dataclass(frozen=True)
class StageState:
    """What DVC knows about a stage right now."""

    key: str  # sha256 of the canonical JSON of ``fingerprint``
    changed: bool  # True when ``dvc repro`` would run the stage
    fingerprint: dict[str, Any]


def _rel(path: str, root: str) -> str:
    return Path(os.path.relpath(path, root)).as_posix()


def _address(stage: PipelineStage, root: str) -> str:
    """The stage's ``dvc repro`` target from the repository root: ``name``, or ``sub/dvc.yaml:name`` elsewhere."""
    dvcfile = _rel(stage.path, root)
    return stage.name if dvcfile == "dvc.yaml" else f"{dvcfile}:{stage.name}"


def _stage_order(stages: list[PipelineStage], graph: Any) -> list[PipelineStage]:
    """A topological order: for each stage in dvc.yaml's order, its pending upstream stages first (``dvc repro``'s)."""
    position = {stage: i for i, stage in enumerate(stages)}
    order: list[PipelineStage] = []
    seen: set[PipelineStage] = set()

    def visit(stage: PipelineStage) -> None:
        if stage in seen:
            return
        seen.add(stage)
        for dep in sorted(graph.successors(stage), key=lambda s: position.get(s, len(position))):
            if dep in position:
                visit(dep)
        order.append(stage)

    for stage in stages:
        visit(stage)
    return order


def pipeline_stages(root: str | os.PathLike[str]) -> list[StageInfo]:
    """Every stage of the project's dvc.yaml files, upstream before downstream, ties in dvc.yaml order."""
    with Repo(os.fspath(root)) as repo, repo.lock:
        stages = [stage for stage in repo.index.stages if isinstance(stage, PipelineStage)]
        graph = repo.index.graph
        return [
            StageInfo(
                name=_address(stage, repo.root_dir),
                cmd=stage.cmd,
                upstream=tuple(
                    sorted(_address(d, repo.root_dir) for d in graph.successors(stage) if isinstance(d, PipelineStage))
                ),
                metrics=tuple(sorted(_rel(out.fs_path, repo.root_dir) for out in stage.outs if out.metric)),
            )
            for stage in _stage_order(stages, graph)
        ]


def with_upstream(stages: list[StageInfo], targets: list[str]) -> set[str]:
    """The names of ``targets`` and of every stage upstream of them."""
    upstream = {info.name: info.upstream for info in stages}
    found, todo = set(targets), list(targets)
    while todo:
        for parent in upstream.get(todo.pop(), ()):
            if parent not in found:
                found.add(parent)
                todo.append(parent)
    return found


def cache_key(fingerprint: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of a fingerprint."""
    text = json.dumps(fingerprint, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def stage_state(root: str | os.PathLike[str], name: str) -> StageState:
    """The stage's cache key (its command, its deps' DVC hashes, its params' values) and whether DVC would re-run it.

    Call it right before running the stage, when its upstream outputs are final.
    """
    with Repo(os.fspath(root)) as repo, repo.lock:
        (stage,) = [s for s in repo.index.stages if _address(s, repo.root_dir) == name]
        deps: dict[str, Any] = {}
        params: dict[str, Any] = {}
        for dep in stage.deps:
            path = _rel(dep.fs_path, repo.root_dir)
            value = dep.get_hash().value if dep.exists else None
            (params if isinstance(dep, ParamsDependency) else deps)[path] = value
        fingerprint = {"stage": name, "cmd": stage.cmd, "deps": deps, "params": params}
        return StageState(key=cache_key(fingerprint), changed=bool(stage.changed()), fingerprint=fingerprint)


def read_lock(root: str | os.PathLike[str]) -> dict[str, Any]:
    """dvc.lock's stages (``{}`` before the first run)."""
    path = Path(root) / "dvc.lock"
    if not path.exists():
        return {}
    return (yaml.safe_load(path.read_text()) or {}).get("stages", {})


def _hash_of(entry: dict[str, Any]) -> str | None:
    return entry.get(entry.get("hash", "md5")) or entry.get("md5")


def lock_snapshot(root: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Per stage, the deps' hashes, the params and the output paths DVC recorded in dvc.lock at the last run."""
    return {
        name: {
            "deps": {dep["path"]: _hash_of(dep) for dep in entry.get("deps", [])},
            "params": entry.get("params", {}),
            "outs": sorted(out["path"] for out in entry.get("outs", [])),
        }
        for name, entry in sorted(read_lock(root).items())
    }


def stage_outputs(root: str | os.PathLike[str], name: str) -> dict[str, str | None]:
    """The output hashes dvc.lock holds for one stage."""
    return {out["path"]: _hash_of(out) for out in read_lock(root).get(name, {}).get("outs", [])}
