"""The pipeline as DVC sees it, in one place: dvc.yaml's stages in ``dvc repro`` order with the roles dvc.yaml
declares (``meta:``), the upstream closure, stage fingerprints, dvc.lock and workspace copies. Used by flows/, the
audit and the tests; dvc.yaml is the only list of stages.

Roles a stage declares under ``meta:`` in dvc.yaml:
- ``benchmark: <name>``: the benchmark it belongs to; its ``metrics`` outputs are that benchmark's reported numbers;
- ``reported: <path>``: its reported numbers are this output instead (the full metrics file, when the DVC metrics
  are only its headline rows: egoeval.headline);
- ``role: input``: its outputs are pinned inputs (the audit checks them out of DVC's cache, never re-runs them);
- ``scale_out: {form: <name>, ...}``: it has a sharded form of that name for a Dask cluster (flows/shard.py), called
  with the other keys (e.g. ``mode: ${item.mode}``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from egoeval.core.errors import InputError, TransientFailure
from egoeval.core.io.dvc_lock import read_lock

ROLES = ("input", "compute")
LOCK_WAIT_S = 60.0  # how long a reader waits for the project's DVC lock that another dvc command holds


@dataclass(frozen=True)
class StageInfo:
    """One pipeline stage (a matrix stage expands to one StageInfo per item, e.g. ``egohumans_track@bytetrack-gt``)."""

    name: str  # DVC's address of the stage: a target for ``dvc repro``
    cmd: str
    upstream: tuple[str, ...]  # stages whose outputs this stage depends on
    metrics: tuple[str, ...]  # its reported-numbers files (meta.reported, else its DVC metrics), relative to the root
    benchmark: str | None = None  # meta.benchmark
    role: str = "compute"  # meta.role: input | compute
    scale_out: dict[str, str] | None = None  # meta.scale_out: its sharded form and that form's options
    deps: tuple[str, ...] = ()  # declared dependency paths (files and folders), relative to the root
    params: tuple[str, ...] = ()  # declared params keys (dotted; a section covers its keys)
    outs: tuple[str, ...] = ()  # every output path (metrics and plots too), relative to the root


@dataclass(frozen=True)
class StageState:
    """What DVC knows about a stage right now."""

    key: str  # sha256 of the canonical JSON of ``fingerprint``
    changed: bool  # True when ``dvc repro`` would run the stage
    fingerprint: dict[str, Any]


def _rel(path: str, root: str) -> str:
    return Path(os.path.relpath(path, root)).as_posix()


def _address(stage: Any, root: str) -> str:
    """The stage's ``dvc repro`` target from the repository root: ``name``, or ``sub/dvc.yaml:name`` elsewhere."""
    dvcfile = _rel(stage.path, root)
    return stage.name if dvcfile == "dvc.yaml" else f"{dvcfile}:{stage.name}"


def _stage_order(stages: list[Any], graph: Any) -> list[Any]:
    """A topological order: for each stage in dvc.yaml's order, its pending upstream stages first (``dvc repro``'s)."""
    position = {stage: i for i, stage in enumerate(stages)}
    order: list[Any] = []
    seen: set[Any] = set()

    def visit(stage: Any) -> None:
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


def _meta(stage: Any, root: str) -> dict[str, Any]:
    meta = stage.meta or {}
    where = f"{_rel(stage.path, root)}, stage {_address(stage, root)}"
    if not isinstance(meta, dict):
        raise InputError(where, "meta must be a mapping (benchmark, role, scale_out)")
    unknown = sorted(set(meta) - {"benchmark", "role", "scale_out", "reported"})
    if unknown:
        raise InputError(where, f"unknown meta keys {unknown}; known: benchmark, role, scale_out, reported")
    outs = {_rel(out.fs_path, root) for out in stage.outs}
    if "reported" in meta and meta["reported"] not in outs:
        raise InputError(where, f"meta.reported must name one of the stage's outs, got {meta['reported']!r}")
    scale_out = meta.get("scale_out")
    if scale_out is not None and not (isinstance(scale_out, dict) and isinstance(scale_out.get("form"), str)):
        raise InputError(where, "meta.scale_out must be a mapping with a form name, e.g. {form: infer}")
    if meta.get("role", "compute") not in ROLES:
        raise InputError(where, f"meta.role must be one of {', '.join(ROLES)}, got {meta['role']!r}")
    return meta


def _declared_params(stage: Any) -> tuple[str, ...]:
    from dvc.dependency.param import ParamsDependency

    keys: list[str] = []
    for dep in stage.deps:
        if isinstance(dep, ParamsDependency):
            keys += [str(key) for key in (dep.params or [])]
    return tuple(sorted(keys))


@contextlib.contextmanager
def _project_lock(repo: Any) -> Iterator[None]:
    """The project's DVC lock (``.dvc/tmp/lock``), waited for up to LOCK_WAIT_S: another dvc command (or a second
    reader) may hold it a moment; DVC's own tries give up after about 3 s."""
    from dvc.lock import LockError

    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            repo.lock.lock()
            break
        except LockError:
            if time.monotonic() > deadline:
                raise TransientFailure(
                    f"{repo.root_dir}: another DVC command holds the project's lock (.dvc/tmp/lock) for over "
                    f"{LOCK_WAIT_S:.0f} s; run again when it has ended"
                ) from None
    try:
        yield
    finally:
        repo.lock.unlock()


def pipeline_stages(root: str | os.PathLike[str]) -> list[StageInfo]:
    """Every stage of the project's dvc.yaml files, upstream before downstream, ties in dvc.yaml order."""
    from dvc.dependency.param import ParamsDependency
    from dvc.exceptions import NotDvcRepoError
    from dvc.repo import Repo
    from dvc.stage import PipelineStage

    try:
        opened = Repo(os.fspath(root))
    except NotDvcRepoError:
        raise InputError(root, "not an egoeval workspace: no DVC project (.dvc/ and dvc.yaml) here") from None
    with opened as repo, _project_lock(repo):
        top = repo.root_dir
        stages = [stage for stage in repo.index.stages if isinstance(stage, PipelineStage)]
        graph = repo.index.graph
        infos = []
        for stage in _stage_order(stages, graph):
            meta = _meta(stage, top)
            upstream = sorted(_address(d, top) for d in graph.successors(stage) if isinstance(d, PipelineStage))
            infos.append(
                StageInfo(
                    name=_address(stage, top),
                    cmd=stage.cmd,
                    upstream=tuple(upstream),
                    metrics=(meta["reported"],)
                    if "reported" in meta
                    else tuple(sorted(_rel(out.fs_path, top) for out in stage.outs if out.metric)),
                    benchmark=meta.get("benchmark"),
                    role=meta.get("role", "compute"),
                    scale_out=meta.get("scale_out"),
                    deps=tuple(sorted(_rel(d.fs_path, top) for d in stage.deps if not isinstance(d, ParamsDependency))),
                    params=_declared_params(stage),
                    outs=tuple(sorted(_rel(out.fs_path, top) for out in stage.outs)),
                )
            )
        return infos


def with_upstream(stages: list[StageInfo], targets: list[str], stop_at: frozenset[str] = frozenset()) -> set[str]:
    """The names of ``targets`` and of every stage upstream of them (not looking above the stages in ``stop_at``)."""
    upstream = {info.name: info.upstream for info in stages}
    found, todo = set(targets), list(targets)
    while todo:
        name = todo.pop()
        for parent in () if name in stop_at else upstream.get(name, ()):
            if parent not in found:
                found.add(parent)
                todo.append(parent)
    return found


def benchmark_metrics(stages: list[StageInfo]) -> dict[str, list[str]]:
    """Per benchmark (dvc.yaml ``meta.benchmark``), the metrics files its stages write; a stage without a benchmark
    names its metrics file's stem."""
    found: dict[str, list[str]] = {}
    for info in stages:
        for path in info.metrics:
            found.setdefault(info.benchmark or Path(path).stem, []).append(path)
    return found


def cache_key(fingerprint: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of a fingerprint."""
    text = json.dumps(fingerprint, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def stage_state(root: str | os.PathLike[str], name: str) -> StageState:
    """The stage's cache key (its command, its deps' DVC hashes, its params' values) and whether DVC would re-run it.

    Call it right before running the stage, when its upstream outputs are final.
    """
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    with Repo(os.fspath(root)) as repo, _project_lock(repo):
        # the stage's dvc.yaml (by its full path: the working directory may be another) and its dvc.lock entry,
        # not the whole index (``_address``: ``name`` or ``sub/dvc.yaml:name``)
        dvcfile, _, stage_name = name.rpartition(":")
        stage = repo.stage.load_one(os.path.join(repo.root_dir, dvcfile or "dvc.yaml"), stage_name)
        deps: dict[str, Any] = {}
        params: dict[str, Any] = {}
        for dep in stage.deps:
            path = _rel(dep.fs_path, repo.root_dir)
            value = dep.get_hash().value if dep.exists else None
            (params if isinstance(dep, ParamsDependency) else deps)[path] = value
        fingerprint = {"stage": name, "cmd": stage.cmd, "deps": deps, "params": params}
        return StageState(key=cache_key(fingerprint), changed=bool(stage.changed()), fingerprint=fingerprint)


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


def pinned_output(root: str | os.PathLike[str], path: str) -> str:
    """The md5 dvc.lock pins for an output path."""
    md5 = pinned_outputs(root).get(path)
    if md5 is None:
        raise InputError(Path(root) / "dvc.lock", f"{path} is not pinned")
    return md5


def pinned_outputs(root: str | os.PathLike[str]) -> dict[str, str]:
    """Every output path dvc.lock pins, with its md5 (a directory's ends in ``.dir``)."""
    return {out["path"]: str(_hash_of(out)) for entry in read_lock(root).values() for out in entry.get("outs") or []}


def cache_objects(root: Path) -> Path:
    """The object folder of the DVC cache the workspace at ``root`` uses (``<cache>/files/md5``)."""
    from dvc.repo import Repo

    with contextlib.chdir(root), Repo(str(root)) as repo:
        return Path(repo.cache.local_cache_dir) / "files" / "md5"


def cached(objects: Path, md5: str) -> bool:
    """Whether DVC's cache (``objects``: ``cache_objects``) holds the pinned object ``md5``: a file, or a directory's
    listing and every file it lists."""
    path = objects / md5[:2] / md5[2:]
    if not path.is_file():
        return False
    return not md5.endswith(".dir") or all(cached(objects, name) for name in _listing(path).values())


def check_out(objects: Path, md5: str, target: Path) -> None:
    """The pinned object ``md5`` (``cached``) copied out of DVC's cache to ``target``, as plain writable files."""
    if md5.endswith(".dir"):
        for name, file in _listing(objects / md5[:2] / md5[2:]).items():
            check_out(objects, file, target / name)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(objects / md5[:2] / md5[2:], target)


def _listing(path: Path) -> dict[str, str]:
    """A directory object's files: relative path -> md5 (``{}`` when the listing is unreadable)."""
    try:
        return {str(entry["relpath"]): str(entry["md5"]) for entry in json.loads(path.read_bytes())}
    except (ValueError, TypeError, KeyError):
        return {}


def stage_status(root: Path, names: list[str] | None = None) -> dict[str, list[Any]]:
    """``dvc status`` of the named stages (default all) in the workspace at ``root``, with dvc.yaml and dvc.lock read
    once (``dvc status TARGET...`` reads them again for each target): stage -> what changed since dvc.lock."""
    from dvc.repo import Repo

    with contextlib.chdir(root), Repo(str(root)) as repo, _project_lock(repo):
        found: dict[str, list[Any]] = {}
        for stage in repo.index.stages:
            if names is None or _address(stage, repo.root_dir) in names:
                found.update(stage.status(check_updates=True))
        return found


def copy_workspace(root: Path, work: Path) -> Path:
    """The files git sees in ``root`` (tracked and untracked-not-ignored) into ``work``, set to read root's DVC
    cache without ever linking into it; returns the cache's object folder."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root, capture_output=True
    )
    if listed.returncode != 0:
        raise InputError(root, "not a git repository: a workspace copy takes the files git sees")
    for name in filter(None, listed.stdout.decode().split("\0")):
        if (root / name).is_file():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / name, work / name)
    objects = cache_objects(root)
    # the copy reads root's cache and never links into it (a re-run stage must not write through a link)
    settings = f"[core]\n    no_scm = true\n[cache]\n    dir = {objects.parent.parent}\n    type = copy\n"
    (work / ".dvc" / "config.local").write_text(settings)
    return objects
