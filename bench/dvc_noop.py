"""A no-op ``dvc repro`` (every stage up to date) on this workspace beside a bare DVC project with the same number of
stages (one tiny dep and out each, no params), interleaved rounds: what our dvc.yaml costs DVC beyond its own floor.

Needs a reproduced workspace (`make repro`). ``--frames N [N ...]`` also times copies of it whose EgoHumans sample
has N frames per sequence (18 cameras' worth per take: the data root grows, reproduced once before timing; the
sample is a DVC output, so DVC checks every file of it as an output). ``--root-files N [N ...]`` times the case of a
downloaded data root instead: copies whose EgoHumans data root lies outside DVC's outputs (``fetch.source: local``)
and holds N files, all pinned in its manifest (the sample's plus frames no annotation references, as the official
download holds), each twice: with this dvc.yaml (egohumans_fetch stands on the manifest) and with the data root
itself as egohumans_fetch's dep (how it was before).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench import save
from egoeval.dvc_project import pipeline_stages

ROOT = Path(__file__).resolve().parent.parent
DVC = str(Path(sys.executable).with_name("dvc"))
ROUNDS = 5
ENV = {**os.environ, "DVC_NO_ANALYTICS": "1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def bare_project(folder: Path, stages: int) -> Path:
    """A git + DVC project of ``stages`` chained stages, reproduced once."""
    for command in (["git", "init", "-q"], [DVC, "init", "-q"]):
        subprocess.run(command, cwd=folder, env=ENV, check=True)
    (folder / "input.txt").write_text("0\n")
    chain = {}
    for i in range(stages):
        source = "input.txt" if i == 0 else f"out{i - 1}.txt"
        chain[f"s{i}"] = {"cmd": f"cp {source} out{i}.txt", "deps": [source], "outs": [f"out{i}.txt"]}
    (folder / "dvc.yaml").write_text(yaml.safe_dump({"stages": chain}))
    subprocess.run([DVC, "repro", "-q"], cwd=folder, env=ENV, check=True)
    return folder


def _wall(root: Path) -> float:
    start = time.perf_counter()
    run = subprocess.run([DVC, "repro"], cwd=root, env=ENV, capture_output=True, text=True, check=True)
    if "Running stage" in run.stdout + run.stderr:
        raise RuntimeError(f"not a no-op in {root}: {run.stdout[-1000:]}")
    return time.perf_counter() - start


def grown_copy(folder: Path, frames: int) -> tuple[Path, int]:
    """A copy of this workspace whose EgoHumans sample has ``frames`` frames per sequence, reproduced; with the
    number of files in its data root."""
    copy = folder / f"frames-{frames}"
    ignore = shutil.ignore_patterns(".venv")
    shutil.copytree(ROOT, copy, symlinks=True, ignore=ignore)
    (copy / ".venv").symlink_to(ROOT / ".venv")
    params = yaml.safe_load((copy / "params.yaml").read_text())
    params["egohumans"]["sample"]["frames"] = frames
    (copy / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    subprocess.run([DVC, "repro", "-q"], cwd=copy, env=ENV, check=True)
    root = copy / params["egohumans"]["fetch"]["path"]
    return copy, sum(1 for path in root.rglob("*") if path.is_file())


ROOT_DEP = "      - ${egohumans.fetch.path}   # (bench: the data root walked, as before)\n"


def downloaded_copies(folder: Path, files: int) -> dict[str, Path]:
    """Two copies of this workspace whose EgoHumans data root (``external/egohumans``, not a DVC output) holds
    ``files`` files, all pinned, reproduced: one as this dvc.yaml has it, one with the root as fetch's dep."""
    from egoeval.core.io.manifest import write_manifest

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    sample = ROOT / params["egohumans"]["fetch"]["path"]
    data = folder / f"root-{files}"
    shutil.copytree(sample, data)
    frames = sorted(data.rglob("*.jpg"))
    have = sum(1 for path in data.rglob("*") if path.is_file())
    for i in range(max(0, files - have - 1)):  # hard links (DVC stats each as a file of its own), spread over frames
        extra = data / "unreferenced" / f"camera{i // 1000:03d}" / f"{i:06d}.jpg"
        extra.parent.mkdir(parents=True, exist_ok=True)
        os.link(frames[i % len(frames)], extra)
    names = sorted(
        p.relative_to(data).as_posix() for p in data.rglob("*") if p.is_file() and p.name != "manifest.sha256"
    )
    write_manifest(data / "manifest.sha256", data, names)
    copies = {}
    for variant in ("manifest", "root"):
        copy = folder / f"download-{files}-{variant}"
        shutil.copytree(ROOT, copy, symlinks=True, ignore=shutil.ignore_patterns(".venv"))
        (copy / ".venv").symlink_to(ROOT / ".venv")
        shutil.copytree(data, copy / "external/egohumans", copy_function=os.link)  # a folder of its own, hard links
        fetch = params["egohumans"]["fetch"] | {"source": "local", "path": "external/egohumans"}
        fetch["manifest"] = "external/egohumans/manifest.sha256"
        changed = params | {"egohumans": params["egohumans"] | {"fetch": fetch}}
        (copy / "params.yaml").write_text(yaml.safe_dump(changed, sort_keys=False))
        if variant == "root":
            text = (copy / "dvc.yaml").read_text()
            anchor = "      - ${egohumans.fetch.manifest}   # stands for the data root"
            (copy / "dvc.yaml").write_text(text.replace(anchor, ROOT_DEP + anchor, 1))
        subprocess.run([DVC, "repro", "-q"], cwd=copy, env=ENV, check=True)
        copies[variant] = copy
    return copies


def run(frames: list[int] | None = None, root_files: list[int] | None = None) -> dict:
    stages = len(pipeline_stages(ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        bare = bare_project(Path(tmp), stages)
        roots = {f"this workspace ({stages} stages)": ROOT, f"bare DVC project ({stages} stages)": bare}
        for count in frames or []:
            copy, files = grown_copy(Path(tmp), count)
            roots[f"this workspace, {count} frames per sequence ({files} files in the data root)"] = copy
        for files in root_files or []:
            copies = downloaded_copies(Path(tmp), files)
            roots[f"a downloaded data root of {files} files, fetch on the manifest (now)"] = copies["manifest"]
            roots[f"a downloaded data root of {files} files, fetch on the root (before)"] = copies["root"]
        times: dict[str, list[float]] = {label: [] for label in roots}
        for _ in range(ROUNDS):
            for label, root in roots.items():
                times[label].append(_wall(root))
    floor = statistics.median(times[f"bare DVC project ({stages} stages)"])
    print(f"| no-op `dvc repro` ({ROUNDS} rounds, interleaved) | median (s) | best (s) | vs bare |")
    print("|---|---|---|---|")
    for label, walls in times.items():
        median = statistics.median(walls)
        print(f"| {label} | {median:.2f} | {min(walls):.2f} | {median / floor:.2f}× |")
    result = {"rounds": ROUNDS, "stages": stages, "times_s": times, "load": os.getloadavg()}
    save("dvc_noop", result)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, nargs="*", default=[], help="also time grown copies (frames/sequence)")
    parser.add_argument("--root-files", type=int, nargs="*", default=[], help="also time downloaded data roots")
    arguments = parser.parse_args()
    run(arguments.frames, arguments.root_files)
