"""Hostile data through the stage CLIs, in a copy of the reproduced workspace (issue 19: items 1, 3, 7, 8 and 11).

Every refused case asserts the exit status, one error line naming the file and the row (or key), no traceback, and
that the metrics, plots, dvc.lock, the report, the response cache and every stage output are byte-identical to
before the run. Paths given by data must stay in their root (symlinks followed only into the roots the params
name); what one input may cost is bounded (egoeval.core.io: MAX_INPUT_BYTES, MAX_DEPTH, MAX_ELEMENTS, MAX_LINE_BYTES);
values are checked at the row that gives them.

The workspace is shared by the module: each case changes an input, runs, and puts the input back.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import shutil
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import forked
import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import EGOEVAL, TEST_DATA, copy_workspace, tool_env, write_params
from PIL import Image

from egoeval.core.io.bounded import MAX_INPUT_BYTES
from egoeval.core.io.manifest import read_manifest, sha256_file

bad_input = pytest.mark.bad_input
ANNOTATION = "benchmark/sample/all/coco_track/tracking_ego_rgb.json"
OFFICIAL_PKL = "benchmark/sample/all/coco_track/detections_ego_rgb.pkl"
EXO_PKL = "benchmark/sample/all/coco_track/detections_exo.pkl"
FRAME = "synthetic/001_synthetic/ego/aria01/images/rgb/00001.jpg"  # images[0]: image id 0
CALIB = "synthetic/001_synthetic/ego/aria01/calib"
GT = "data/egohumans/fetched/gt/synthetic_001_synthetic_aria01_rgb.txt"
WATCHED = (
    "metrics",
    "plots",
    "reports",
    "dvc.lock",
    ".egoeval-cache/responses.sqlite",
    "data/egonormia/fetched",
    "data/egonormia/frames",
    "data/egonormia/descriptions.parquet",
    "data/egonormia/responses.parquet",
    "data/egonormia/predictions.parquet",
    "data/egonormia/predictions_eval.json",
    "data/egohumans/fetched",
    "data/egohumans/detections",
    "data/egohumans/tracks",
)


# ----------------------------------------------------------------------------------------- the shared workspace


@pytest.fixture(scope="module")
def workspace(reproduced: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile") / "repo"
    copy_workspace(reproduced, root)
    return root


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder outside every data root, holding a secret a path from data must never reach."""
    folder = tmp_path_factory.mktemp("outside")
    (folder / "secret.txt").write_text("not data\n")
    return folder


@pytest.fixture(scope="module")
def ehroot(workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the bundled EgoHumans data root (as downloaded), for the cases to make hostile."""
    root = tmp_path_factory.mktemp("egohumans") / "root"
    shutil.copytree(workspace / "data/egohumans/sample", root)
    return root


def watched(root: Path) -> dict[str, str]:
    """sha256 of every file the stages write, and of the response cache."""
    digests = {}
    for name in WATCHED:
        path = root / name
        for file in [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()):
            digests[file.relative_to(root).as_posix()] = sha256_file(file)
    return digests


def run(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m <args>`` (a stage) or ``egoeval <args>`` in ``root``."""
    command = [EGOEVAL, *args[1:]] if args[0] == "egoeval" else [sys.executable, "-m", *args]
    return forked.run(command, root, tool_env(**(env or {})), timeout=600)  # a process of its own, forked warm


def refused(root: Path, args: tuple[str, ...], *named: str, status: int = 2, env: dict[str, str] | None = None) -> str:
    """Run ``args`` in ``root``: it exits ``status`` with one error line naming each of ``named``, no traceback, and
    nothing the stages write (nor the response cache) changes. Returns the error line."""
    before = watched(root)
    done = run(root, *args, env=env)
    lines = [line for line in done.stderr.splitlines() if line.startswith(("error: ", "egoeval "))]
    assert done.returncode == status and len(lines) == 1, done.stdout[-2000:] + done.stderr[-4000:]
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
    for name in named:
        assert name in lines[0], (name, lines[0])
    assert watched(root) == before
    return lines[0]


@contextmanager
def restoring(*paths: Path) -> Iterator[None]:
    """Put ``paths`` (files, folders, symlinks, or nothing) back as they were on leaving."""
    saved: list[tuple[Path, str, Any]] = []
    for path in paths:
        if path.is_symlink():
            saved.append((path, "link", os.readlink(path)))
        elif path.is_dir():
            backup = path.with_name(f".{path.name}.saved")
            shutil.copytree(path, backup, symlinks=True)
            saved.append((path, "dir", backup))
        elif path.exists():
            saved.append((path, "file", path.read_bytes()))
        else:
            saved.append((path, "none", None))
    try:
        yield
    finally:
        for path, kind, value in saved:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.is_symlink() or path.exists():  # a file, a link, a FIFO
                path.unlink()
            if kind == "link":
                path.symlink_to(value)
            elif kind == "dir":
                value.rename(path)
            elif kind == "file":
                path.write_bytes(value)


@contextmanager
def params(root: Path, changes: dict[str, Any]) -> Iterator[None]:
    """The workspace's params.yaml with ``changes`` merged in (nested dicts key by key), then as it was."""

    def merge(base: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
        for key, value in more.items():
            both = isinstance(value, dict) and isinstance(base.get(key), dict)
            base[key] = merge(base[key], value) if both else value
        return base

    with restoring(root / "params.yaml"):
        merged = merge(yaml.safe_load((root / "params.yaml").read_text()), changes)
        (root / "params.yaml").write_text(yaml.safe_dump(merged, sort_keys=False))
        yield


def egohumans_root(root: Path) -> dict[str, Any]:
    """params changes that point egohumans.fetch at the data root ``root``, pinned by root/manifest.sha256."""
    return {"egohumans": {"fetch": {"source": "local", "path": str(root), "manifest": str(root / "manifest.sha256")}}}


def repin(root: Path, *names: str) -> None:
    """Pin ``names`` (relative to ``root``) in root/manifest.sha256 with their current hashes (a user's sha256sum)."""
    pinned = read_manifest(root / "manifest.sha256")
    for name in names:
        pinned[name] = hashlib.sha256((root / name).read_bytes()).hexdigest()
    (root / "manifest.sha256").write_text("".join(f"{digest}  {name}\n" for name, digest in sorted(pinned.items())))


@contextmanager
def annotation(root: Path, edit: Callable[[dict[str, Any]], Any] | None = None, text: bytes | None = None):
    """The data root's annotation edited (or replaced by ``text``) and re-pinned; then as it was."""
    path = root / ANNOTATION
    with restoring(path, root / "manifest.sha256"):
        if text is None:
            doc = json.loads(path.read_text())
            edit(doc)
            text = json.dumps(doc).encode()
        path.write_bytes(text)
        repin(root, ANNOTATION)
        yield


WRITE_MANIFEST = ("stages.egohumans.fetch", "--write-manifest")
FETCH = ("stages.egohumans.fetch",)


def egohumans_commands(root: Path, pins: Path) -> dict[str, tuple[str, ...]]:
    """The two commands that read a data root: pinning it (the user guide's --write-manifest) and fetching it."""
    return {"write-manifest": (*WRITE_MANIFEST, str(root), "--manifest", str(pins)), "fetch": FETCH}


# ----------------------------------------------------------------------------------------- 1. paths stay in their root


def _set_file_name(value: str) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        doc["images"][0]["file_name"] = value

    return edit


@bad_input
@pytest.mark.parametrize("command", ["write-manifest", "fetch"])
@pytest.mark.parametrize("kind", ["parent", "absolute"])
def test_an_annotation_file_name_outside_the_root_is_refused(
    workspace: Path, ehroot: Path, outside: Path, tmp_path: Path, command: str, kind: str
) -> None:
    value = "../outside/secret.txt" if kind == "parent" else str(outside / "secret.txt")
    with params(workspace, egohumans_root(ehroot)), annotation(ehroot, _set_file_name(value)):
        args = egohumans_commands(ehroot, tmp_path / "pins.sha256")[command]
        refused(workspace, args, str(ehroot / ANNOTATION), "row images[0]", "not a path inside the data root")
    assert not (tmp_path / "pins.sha256").exists()


@bad_input
@pytest.mark.parametrize("command", ["write-manifest", "fetch"])
@pytest.mark.parametrize("link", ["frame", "calibration folder"])
def test_a_symlink_out_of_the_root_is_refused(
    workspace: Path, ehroot: Path, outside: Path, tmp_path: Path, command: str, link: str
) -> None:
    """A frame (or the folder of the calibration files) that is a link to a file outside the root: an error naming
    the annotation and the image, whatever the file holds (here, the same bytes: the manifest pins them)."""
    name = FRAME if link == "frame" else CALIB
    target = outside / f"{Path(name).name}-copy"
    with restoring(ehroot / name, target):
        if link == "frame":
            shutil.copyfile(ehroot / name, target)
            (ehroot / name).unlink()
        else:
            (ehroot / name).rename(target)
        (ehroot / name).symlink_to(target)
        with params(workspace, egohumans_root(ehroot)):
            args = egohumans_commands(ehroot, tmp_path / "pins.sha256")[command]
            refused(workspace, args, str(ehroot / ANNOTATION), "row images[0]", f"(a link to {target}")


@bad_input
@pytest.mark.parametrize(
    ("name", "param", "modes"),
    [
        (ANNOTATION, "egohumans.fetch.annotation", ["gt", "file"]),
        (OFFICIAL_PKL, "egohumans.fetch.annotation", ["gt", "file"]),
        ("detections/simulated.pkl", "egohumans.fetch.detections", ["gt", "file"]),
        ("detections/det/synthetic_002_synthetic_aria01_rgb.txt", "row synthetic_002", ["gt", "file"]),
    ],
    ids=["annotation", "official pickle", "detections file", "det.txt in the detections folder"],
)
def test_inputs_linked_out_of_the_root_are_refused(
    workspace: Path, ehroot: Path, outside: Path, name: str, param: str, modes: list[str]
) -> None:
    target = outside / Path(name).name
    changes = egohumans_root(ehroot)
    changes["egohumans"] |= {"detect": {"modes": modes}}
    if name.startswith("detections/det/"):
        changes["egohumans"]["fetch"]["detections"] = "detections/det"
    with restoring(ehroot / name, target), params(workspace, changes):
        shutil.move(ehroot / name, target)
        (ehroot / name).symlink_to(target)
        refused(workspace, FETCH, param, f"(a link to {target})", "lies outside the data root")


@pytest.mark.parametrize("command", ["write-manifest", "fetch"])
def test_a_hugging_face_cache_snapshot_links_into_its_blob_store(
    workspace: Path, ehroot: Path, tmp_path: Path, command: str
) -> None:
    """A data root that is a snapshot of the Hugging Face cache (files are links into ../../blobs) keeps working:
    the blob store is part of that root."""
    cache = tmp_path / "datasets--someone--egohumans"
    snapshot = cache / "snapshots" / ("a" * 40)
    shutil.copytree(ehroot, snapshot)
    (cache / "blobs").mkdir()
    for file in [snapshot / FRAME, snapshot / ANNOTATION, *(snapshot / CALIB).iterdir()]:
        blob = cache / "blobs" / hashlib.sha256(file.read_bytes()).hexdigest()
        shutil.move(file, blob)
        file.symlink_to(os.path.relpath(blob, file.parent))
    before = watched(workspace)
    with params(workspace, egohumans_root(snapshot)), restoring(workspace / "data/egohumans/fetched"):
        done = run(workspace, *egohumans_commands(snapshot, tmp_path / "pins.sha256")[command])
        assert done.returncode == 0, done.stderr[-3000:]
        if command == "fetch":
            images = pd.read_parquet(workspace / "data/egohumans/fetched/images.parquet")
            assert (images["path"].iloc[0]) == (snapshot / FRAME).as_posix()
        else:
            assert FRAME in read_manifest(tmp_path / "pins.sha256")
    assert watched(workspace) == before


def _egonormia_local(workspace: Path, folder: Path, media: Path | None = None) -> dict[str, Any]:
    fetch = {"source": "local", "path": str(folder), "manifest": str(folder / "manifest.sha256")}
    return {"egonormia": {"fetch": fetch | {"media_path": None if media is None else str(media)}}}


@pytest.fixture(scope="module")
def enroot(workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the bundled EgoNormia sample folder (items and videos), pinned, for the cases to make hostile."""
    folder = tmp_path_factory.mktemp("egonormia") / "folder"
    shutil.copytree(workspace / "data/egonormia/sample", folder)
    return folder


@bad_input
@pytest.mark.parametrize("link", ["a video", "the videos folder"])
def test_egonormia_media_linked_out_of_the_roots_is_refused(
    workspace: Path, enroot: Path, outside: Path, link: str
) -> None:
    """A clip's context video that is a link out of ``path`` and ``media_path`` (the same bytes: the manifest pins
    them): an error naming the items file and the clip, nothing copied."""
    videos = sorted((enroot / "videos").iterdir())
    moved = videos[1] if link == "a video" else enroot / "videos"
    target = outside / moved.name
    with restoring(moved, target), params(workspace, _egonormia_local(workspace, enroot)):
        shutil.move(moved, target)
        moved.symlink_to(target)
        clip = videos[1 if link == "a video" else 0].stem
        refused(workspace, ("stages.egonormia.fetch",), str(enroot / "clips.json"), f"row {clip}", str(target))


def test_egonormia_media_may_link_between_the_roots_the_params_name(
    workspace: Path, enroot: Path, tmp_path: Path
) -> None:
    """``media_path`` holding links into ``path`` (both named by the params) is read."""
    media = tmp_path / "media"
    (media / "videos").mkdir(parents=True)
    for video in (enroot / "videos").iterdir():
        (media / "videos" / video.name).symlink_to(video)
    before = watched(workspace)
    changes = _egonormia_local(workspace, enroot, media)
    changes["egonormia"]["fetch"]["manifest"] = str(enroot / "manifest.sha256")
    with params(workspace, changes), restoring(workspace / "data/egonormia/fetched"):
        done = run(workspace, "stages.egonormia.fetch")
        assert done.returncode == 0, done.stderr[-3000:]
        assert (workspace / "data/egonormia/fetched/items.parquet").is_file()
    assert watched(workspace) == before


@bad_input
@pytest.mark.parametrize("entry", ["../outside/secret.txt", "/etc/hostname"])
def test_a_manifest_entry_outside_the_root_is_refused(workspace: Path, enroot: Path, entry: str) -> None:
    manifest = enroot / "manifest.sha256"
    with restoring(manifest), params(workspace, _egonormia_local(workspace, enroot)):
        lines = manifest.read_text().splitlines()
        manifest.write_text("\n".join([*lines, f"{'0' * 64}  {entry}"]) + "\n")
        refused(workspace, ("stages.egonormia.fetch",), str(manifest), f"row {len(lines) + 1}", "not a path inside")


@bad_input
def test_the_report_embeds_no_frame_from_outside_the_data_root(workspace: Path, outside: Path) -> None:
    """images.parquet (fetch's output) pointing at a picture elsewhere: the report, a page people share, refuses it."""
    path = workspace / "data/egohumans/fetched/images.parquet"
    secret = outside / "secret.jpg"
    Image.new("RGB", (64, 36), (200, 0, 0)).save(secret)
    with restoring(path):
        images = pd.read_parquet(path)  # fetch's own output, changed since: the report still checks it
        images["path"] = str(secret)
        images.to_parquet(path, index=False)
        before = (workspace / "reports/index.html").read_bytes()
        refused(workspace, ("egoeval.report_page",), str(Path("data/egohumans/fetched/images.parquet")), "frame")
        assert (workspace / "reports/index.html").read_bytes() == before


@bad_input
def test_a_frames_strip_outside_the_fetched_folder_fails_its_clip(workspace: Path, outside: Path) -> None:
    items_path = workspace / "data/egonormia/fetched/items.parquet"
    with (
        restoring(items_path, workspace / "data/egonormia/frames"),
        params(workspace, {"egonormia": {"frames": {"source": "dataset"}}}),
    ):
        items = pd.read_parquet(items_path)
        shutil.copyfile(workspace / "data/egonormia/frames" / f"{items['id'].iloc[0]}.jpg", outside / "strip.jpg")
        items["strip"] = [f"strips/{clip}.jpg" for clip in items["id"]]
        items.loc[0, "strip"] = "../../../" + os.path.relpath(outside / "strip.jpg", workspace)
        items.loc[1, "strip"] = str(outside / "strip.jpg")
        items.to_parquet(items_path, index=False)
        done = run(workspace, "stages.egonormia.frames")
        assert done.returncode == 0, done.stderr[-3000:]
        index = pd.read_parquet(workspace / "data/egonormia/frames/index.parquet").set_index("id")
        for clip in items["id"].iloc[:2]:
            assert "not a path inside the data root" in index.loc[clip, "error"], index.loc[clip, "error"]
            assert f"frames: {clip}: data/egonormia/fetched/items.parquet, row {clip}" in done.stderr
            assert not (workspace / "data/egonormia/frames" / f"{clip}.jpg").exists()


# ----------------------------------------------------------------------------------------- 3. bounded cost


def _global(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def _doubling(levels: int, tuples: bool) -> bytes:
    """Protocol-2 opcodes leaving x(levels) on the stack: x0 = () or [], x(k+1) = (xk, xk) or [xk, xk]."""
    out = (b")" if tuples else b"]") + b"q\x000"
    for k in range(levels):
        get = b"h" + bytes([k])
        out += (get + get + b"\x86" if tuples else b"](" + get + get + b"e") + b"q" + bytes([k + 1]) + b"0"
    return out + b"h" + bytes([levels])


class _ObjectArray:
    """An object array whose pickled state lies about its shape: NumPy's own loader segfaults on it."""

    def __reduce__(self) -> tuple[Any, ...]:
        empty = np._core.multiarray._reconstruct
        return empty, (np.ndarray, (0,), b"b"), (1, (10**9,), np.dtype("O"), False, [1])


PICKLES = {
    "bytearray of a billion bytes": (
        b"\x80\x02" + _global("builtins", "bytearray") + b"(J" + struct.pack("<i", 10**9) + b"tR.",
        "never a int",
    ),
    "14,200 bytearrays in 142 KB": (
        b"\x80\x02" + _global("builtins", "bytearray") + b"q\x00](" + (b"h\x00(J\x70\x11\x01\x00tR" * 14_200) + b"e.",
        "never a int",
    ),
    "a dtype from a spec shared 30 levels deep": (
        b"\x80\x02" + _global("numpy", "dtype") + _doubling(30, tuples=False) + b"\x85R.",
        "numpy.dtype must be built from a type code",
    ),
    "a dict key of tuples shared 60 levels deep": (
        b"\x80\x02}" + _doubling(60, tuples=True) + b"K\x01s.",
        "a dict key must be a string or a number",
    ),
    "roots_3d of lists shared 60 levels deep": (
        b"\x80\x02}(X\x0a\x00\x00\x00det_bboxes}X\x08\x00\x00\x00roots_3d}X\x05\x00\x00\x00a.jpg"
        + _doubling(60, tuples=False)
        + b"su.",
        "more than 100,000,000 values",
    ),
    "lists nested 100,000 deep": (b"\x80\x02" + b"]" * 100_000 + b"a" * 99_999 + b".", "nested more than 32 deep"),
    "a list that holds itself": (b"\x80\x02]q\x00h\x00a.", "a container holds itself"),
    "an object array whose state lies": (pickle.dumps(_ObjectArray(), protocol=2), "not admitted"),
    "a class built by NEWOBJ": (
        b"\x80\x02" + _global("builtins", "bytearray") + b")\x81.",
        "objects built from a class",
    ),
    "an integer of 5,000 digits": (b"L" + b"9" * 5000 + b"L\n.", "not a readable detections pickle"),
    "cut short": (pickle.dumps({"det_bboxes": {"a.jpg": [np.zeros((2, 5))]}})[:-9], "not a readable detections"),
}


@bad_input
@pytest.mark.parametrize("case", sorted(PICKLES))
def test_a_hostile_detections_pickle_is_refused_at_once(workspace: Path, ehroot: Path, case: str) -> None:
    """The released pickle replaced by a crafted one (pinned): refused naming it, before it costs memory or time
    (the figures: bench/hostile_inputs.py, BENCHMARKS.md)."""
    data, message = PICKLES[case]
    with restoring(ehroot / OFFICIAL_PKL, ehroot / "manifest.sha256"), params(workspace, egohumans_root(ehroot)):
        (ehroot / OFFICIAL_PKL).write_bytes(data)
        repin(ehroot, OFFICIAL_PKL)
        refused(workspace, FETCH, str(ehroot / OFFICIAL_PKL), message)


JSON_TEXTS = {
    "arrays nested 100,000 deep": (b"[" * 100_000 + b"]" * 100_000, "nested 100000 deep, more than 32", ""),
    "objects nested 40 deep": (b'{"a": ' * 40 + b"1" + b"}" * 40, "nested 40 deep, more than 32", ""),
    "an integer of 5,000 digits on line 3": (
        b'{"videos": [],\n"images": [],\n"annotations": [' + b"7" * 5000 + b"]}",
        "an integer of more than 4,300 digits",
        "row 3",
    ),
    "not UTF-8": (b'{"videos": "caf\xe9"}', "not a readable JSON file", ""),
    "empty": (b"", "not a readable JSON file", ""),
}


@bad_input
@pytest.mark.parametrize("command", ["write-manifest", "fetch"])
@pytest.mark.parametrize("case", sorted(JSON_TEXTS))
def test_a_hostile_annotation_json_is_refused_at_once(
    workspace: Path, ehroot: Path, tmp_path: Path, case: str, command: str
) -> None:
    text, message, row = JSON_TEXTS[case]
    with params(workspace, egohumans_root(ehroot)), annotation(ehroot, text=text):
        args = egohumans_commands(ehroot, tmp_path / "pins.sha256")[command]
        refused(workspace, args, str(ehroot / ANNOTATION), message, row)


@bad_input
def test_an_input_beyond_the_size_limit_is_refused_unread(workspace: Path, ehroot: Path, tmp_path: Path) -> None:
    with params(workspace, egohumans_root(ehroot)), restoring(ehroot / ANNOTATION):
        with open(ehroot / ANNOTATION, "r+b") as handle:
            handle.truncate(MAX_INPUT_BYTES + 1)  # sparse: costs no disk
        args = egohumans_commands(ehroot, tmp_path / "pins.sha256")["write-manifest"]
        refused(workspace, args, str(ehroot / ANNOTATION), f"{MAX_INPUT_BYTES + 1:,} bytes")


@bad_input
def test_a_fifo_is_never_opened(workspace: Path, ehroot: Path, tmp_path: Path) -> None:
    """A named pipe where the annotation should be would block a reader for ever."""
    with params(workspace, egohumans_root(ehroot)), restoring(ehroot / ANNOTATION):
        (ehroot / ANNOTATION).unlink()
        os.mkfifo(ehroot / ANNOTATION)
        args = egohumans_commands(ehroot, tmp_path / "pins.sha256")["write-manifest"]
        refused(workspace, args, str(ehroot / ANNOTATION), "not a regular file")


LONG_LINE = b"1," * (40 << 10)  # 80 KB: longer than any line of a text format


@bad_input
@pytest.mark.parametrize(
    ("which", "content", "message"),
    [
        ("ground truth", b"1,1,10,10,5,5,1,-1,-1,-1\n" + LONG_LINE, "row 2: longer than 65,536 bytes"),
        ("ground truth", (b"1," * 30_000 + b"\n") * 20, "row 1: 30000 fields, expected 6 to 10"),
        ("ground truth", b"1,1,10,10,5,5,1e99999,-1,-1,-1\n", "row 1: NaN or infinite value"),
        ("ground truth", b"1," + b"9" * 5000 + b",10,10,5,5,1,-1,-1,-1\n", "row 1: NaN or infinite value"),
        ("tracks", LONG_LINE, "row 1: longer than 65,536 bytes"),
        ("tracks", b"1,-1,10,10,5,5,1,-1,-1,-1\n", "row 1: id must be >= 0"),
    ],
    ids=["gt long line", "gt wide lines", "gt overflow", "gt 5000-digit id", "tracks long line", "tracks negative id"],
)
def test_a_hostile_motchallenge_file_stops_the_score_stage(
    workspace: Path, which: str, content: bytes, message: str
) -> None:
    path = workspace / (GT if which == "ground truth" else "data/egohumans/tracks/bytetrack-gt/" + Path(GT).name)
    with restoring(path):
        path.write_bytes(content)
        refused(workspace, ("stages.egohumans.score",), str(path.relative_to(workspace)), message)


@bad_input
@pytest.mark.parametrize(
    ("content", "message"),
    [(LONG_LINE, "row 1: longer than 65,536 bytes"), (b"1,-1,1,1,2,2,0.9\n2,-1,nan,1,2,2,0.9\n", "row 2: NaN")],
    ids=["long line", "NaN"],
)
def test_a_hostile_det_txt_is_refused_by_fetch(workspace: Path, ehroot: Path, content: bytes, message: str) -> None:
    name = "detections/det/synthetic_002_synthetic_aria01_rgb.txt"
    changes = egohumans_root(ehroot)
    changes["egohumans"]["fetch"]["detections"] = "detections/det"
    with restoring(ehroot / name, ehroot / "manifest.sha256"), params(workspace, changes):
        (ehroot / name).write_bytes(content)
        repin(ehroot, name)
        refused(workspace, FETCH, str(ehroot / name), message)


@bad_input
def test_a_calibration_file_with_a_long_line_is_refused(workspace: Path, ehroot: Path) -> None:
    name = f"{CALIB}/00001.txt"  # image id 0's
    with restoring(ehroot / name, ehroot / "manifest.sha256"), params(workspace, egohumans_root(ehroot)):
        (ehroot / name).write_bytes(b"header\n" + LONG_LINE)
        repin(ehroot, name)
        refused(workspace, FETCH, str(ehroot / name), "row 2: longer than 65,536 bytes")


@bad_input
@pytest.mark.parametrize(
    ("file", "content", "message"),
    [
        ("gt/seq/gt/gt.txt", LONG_LINE, "row 1: longer than 65,536 bytes"),
        ("gt/seq/seqinfo.ini", b"[Sequence]\nseqLength=" + b"9" * 5000 + b"\n", "no integer seqLength"),
        ("gt/seq/gt/gt.txt", None, "not a regular file"),
    ],
    ids=["gt long line", "seqinfo 5000 digits", "gt a FIFO"],
)
def test_score_tracks_refuses_hostile_motchallenge_files(
    tmp_path: Path, file: str, content: bytes | None, message: str
) -> None:
    (tmp_path / "gt/seq/gt").mkdir(parents=True)
    (tmp_path / "pred").mkdir()
    (tmp_path / "gt/seq/gt/gt.txt").write_bytes(b"1,1,10,10,5,5,1,-1,-1,-1\n")
    (tmp_path / "pred/seq.txt").write_bytes(b"1,1,10,10,5,5,1,-1,-1,-1\n")
    if content is None:
        (tmp_path / file).unlink()
        os.mkfifo(tmp_path / file)  # a named pipe would block a reader for ever
    else:
        (tmp_path / file).write_bytes(content)
    refused(tmp_path, ("egoeval", "score-tracks", "gt", "pred"), file, message)


EGONORMIA_ITEMS = {
    "final_data.json: an integer of 5,000 digits": ("final_data.json", "correct", "9" * 5000),
    "final_data.json: nested 100,000 deep": ("final_data.json", "taxonomy", "[" * 100_000 + "]" * 100_000),
    "parquet: a taxonomy string nested 100,000 deep": ("items.parquet", "taxonomy", "[" * 100_000 + "]" * 100_000),
    "parquet: a taxonomy string with a 5,000-digit integer": ("items.parquet", "taxonomy", "[" + "9" * 5000 + "]"),
}


@bad_input
@pytest.mark.parametrize("case", sorted(EGONORMIA_ITEMS))
def test_hostile_egonormia_items_are_refused_naming_the_file(workspace: Path, tmp_path: Path, case: str) -> None:
    """Items of a local folder (the official JSON, or a parquet as on the hub) that no parser may choke on."""
    name, field, raw = EGONORMIA_ITEMS[case]
    folder = tmp_path / "items"
    folder.mkdir()
    items = pd.read_parquet(workspace / "data/egonormia/fetched/items.parquet").drop(columns=["video", "strip"])
    first = items["id"].iloc[0]
    if name == "final_data.json":
        clips = {
            row.id: {"id": row.id, "behaviors": list(row.behaviors), "justifications": list(row.justifications)}
            | {"correct": int(row.correct_idx), "sensibles": list(map(int, row.sensible_idx)), "desc": row.description}
            for row in items.itertuples()
        }
        clips[first][field] = "@@"
        text = json.dumps(clips, indent=1).replace('"@@"', raw)
        (folder / name).write_text(text)
        expected = (
            f"row {text[: text.index(raw)].count(chr(10)) + 1}: an integer of more than 4,300 digits"
            if field == "correct"
            else "nested 100002 deep, more than 32"  # the clips' object, a clip's, then the arrays
        )
    else:
        items["taxonomy"] = [json.dumps([list(t) for t in taxonomy]) for taxonomy in items["taxonomy"]]
        items.loc[0, "taxonomy"] = raw
        items.to_parquet(folder / name, index=False)
        expected = f"row {first}: taxonomy is not readable JSON"
    with params(workspace, _egonormia_local(workspace, folder)):
        (folder / "manifest.sha256").write_text(f"{sha256_file(folder / name)}  {name}\n")
        refused(workspace, ("stages.egonormia.fetch",), str(folder / name), expected)


# ----------------------------------------------------------------------------------- 7. clear errors, no traceback

PARQUET_READERS = {
    "data/egonormia/fetched/items.parquet": [
        ("stages.egonormia.frames",),
        ("stages.egonormia.describe",),
        ("stages.egonormia.infer",),
        ("stages.egonormia.parse",),
        ("stages.egonormia.score",),
        ("egoeval.report_page",),
    ],
    "data/egonormia/frames/index.parquet": [("stages.egonormia.infer",), ("egoeval.report_page",)],
    "data/egonormia/descriptions.parquet": [("stages.egonormia.infer",)],
    "data/egonormia/responses.parquet": [("stages.egonormia.parse",), ("egoeval.report_page",)],
    "data/egonormia/predictions.parquet": [("stages.egonormia.score",), ("egoeval.report_page",)],
    "data/egohumans/fetched/detections_official.parquet": [("stages.egohumans.detect", "--mode", "official")],
    "data/egohumans/fetched/detections_file.parquet": [("stages.egohumans.detect", "--mode", "file")],
    "data/egohumans/detections/gt.parquet": [("stages.egohumans.track", "--tracker", "bytetrack", "--mode", "gt")],
    "data/egohumans/fetched/images.parquet": [
        ("stages.egohumans.track", "--tracker", "egomotion", "--mode", "gt"),
        ("stages.egohumans.score",),
        ("egoeval.report_page",),
    ],
}
PARQUET_CASES = [(file, command) for file, commands in PARQUET_READERS.items() for command in commands]


@bad_input
@pytest.mark.parametrize("damage", ["empty", "cut short"])
@pytest.mark.parametrize(
    ("file", "command"), PARQUET_CASES, ids=[f"{f.split('/')[-1]}>{c[0]}" for f, c in PARQUET_CASES]
)
def test_a_damaged_parquet_between_stages_is_named(
    workspace: Path, file: str, command: tuple[str, ...], damage: str
) -> None:
    path = workspace / file
    with restoring(path):
        data = path.read_bytes()
        path.write_bytes(b"" if damage == "empty" else data[: len(data) // 2])
        refused(workspace, command, file, "not a readable parquet file")


@bad_input
@pytest.mark.parametrize(
    ("edit", "row", "message"),
    [
        (lambda d: d["images"][3].update(id=2**70), "images[3]", "'id' must be an integer of at most 64 bits"),
        (lambda d: d["videos"][1].update(id=2**64), "videos[1]", "'id' must be an integer of at most 64 bits"),
        (lambda d: d["annotations"][7].update(image_id=-(2**63) - 1), "annotations[7]", "at most 64 bits"),
        (lambda d: d["annotations"][7].update(instance_id=2**64), "annotations[7]", "'instance_id' must be"),
        (lambda d: d["annotations"][7].update(time_stamp=2**70), "annotations[7]", "time_stamp must be"),
        (lambda d: d["images"][3].update(frame_id=10**30), "images[3]", "'frame_id' must be"),
        (lambda d: d["annotations"][7].update(bbox=[10**400, 1, 2, 3]), "annotations[7]", "beyond a float"),
        (lambda d: d["images"][3].update(extrinsics=[10**400] * 16), "images[3]", "extrinsics must be"),
    ],
    ids=["image id", "video id", "image_id", "instance_id", "time_stamp", "frame_id", "bbox", "extrinsics"],
)
def test_an_annotation_integer_beyond_64_bits_is_named(
    workspace: Path, ehroot: Path, tmp_path: Path, edit: Callable[[dict], Any], row: str, message: str
) -> None:
    """``--write-manifest`` once ended in OverflowError on an id beyond 64 bits."""
    with params(workspace, egohumans_root(ehroot)), annotation(ehroot, edit):
        args = egohumans_commands(ehroot, tmp_path / "pins.sha256")["write-manifest"]
        refused(workspace, args, str(ehroot / ANNOTATION), f"row {row}", message)


def test_names_with_dollar_signs_are_text_in_the_report(workspace: Path) -> None:
    """A sequence (or model) named like mathtext (``take_$^$_aria01``) once crashed the report's charts."""
    old = Path(GT).stem
    new = "take_$^$_aria01"
    folders = [workspace / "data/egohumans/fetched/gt", *(workspace / "data/egohumans/tracks").glob("*-*")]
    metrics, images = workspace / "metrics/egohumans.json", workspace / "data/egohumans/fetched/images.parquet"
    with restoring(*folders, metrics, images, workspace / "reports/index.html"):
        for folder in folders:
            (folder / f"{old}.txt").rename(folder / f"{new}.txt")
        metrics.write_text(metrics.read_text().replace(old, new))
        table = pd.read_parquet(images)
        table["sequence"] = table["sequence"].replace(old, new)
        table.to_parquet(images, index=False)
        done = run(workspace, "egoeval.report_page")
        assert done.returncode == 0, done.stderr[-3000:]
        page = (workspace / "reports/index.html").read_text()
        assert "take_$^$_aria01" in page and "Traceback" not in done.stderr


class _Hub(BaseHTTPRequestHandler):
    status = 500

    def do_HEAD(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_HEAD

    def log_message(self, *args: object) -> None:
        pass


@bad_input
@pytest.mark.parametrize(("status", "exit_status"), [(500, 75), (403, 2)])
def test_a_hub_that_fails_is_named_with_the_exit_status_that_says_whether_to_retry(
    workspace: Path, tmp_path: Path, status: int, exit_status: int
) -> None:
    """A hub answering 500 once ended in LocalEntryNotFoundError's traceback: now exit 75 (retry later; after
    huggingface_hub's own retries, about 25 s), and a 403 exit 2, both naming the address."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Hub", (_Hub,), {"status": status}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    fetch = {"source": "huggingface", "hf_revision": "1" * 40}
    env = {"HF_ENDPOINT": endpoint, "HF_HUB_OFFLINE": "0", "HF_HOME": str(tmp_path / "hf-home")}
    try:
        with params(workspace, {"egonormia": {"fetch": fetch}}), restoring(workspace / ".egoeval-cache/huggingface"):
            line = refused(
                workspace, ("stages.egonormia.fetch",), endpoint, "final_data.json", status=exit_status, env=env
            )
    finally:
        server.shutdown()
        server.server_close()
    assert str(status) in line


# ----------------------------------------------------------------------------------------- 8. accepted silently no more


ANNOTATION_VALUES = {
    "bbox NaN": ("bbox", "[NaN, 1, 2, 3]", "'bbox' holds NaN or infinity"),
    "bbox Infinity": ("bbox", "[1, 1, Infinity, 3]", "'bbox' holds NaN or infinity"),
    "bbox -Infinity": ("bbox", "[-Infinity, 1, 2, 3]", "'bbox' holds NaN or infinity"),
    "negative width": ("bbox", "[1, 1, -2, 3]", "negative box size"),
    "negative height": ("bbox", "[1, 1, 2, -3]", "negative box size"),
    "a number as text": ("bbox", '["5", 1, 2, 3]', "'bbox' must be 4 numbers"),
    "a boolean": ("bbox", "[true, 1, 2, 3]", "'bbox' must be 4 numbers"),
    "three numbers": ("bbox", "[1, 2, 3]", "'bbox' must be 4 numbers"),
    "negative instance id": ("instance_id", "-1", "instance_id -1 is negative"),
    "instance id as text": ("instance_id", '"2"', "'instance_id' must be an integer"),
}


@bad_input
@pytest.mark.parametrize("case", sorted(ANNOTATION_VALUES))
def test_bad_annotation_values_are_named_at_their_row(workspace: Path, ehroot: Path, case: str) -> None:
    """Caught at the annotation row (once a NaN box or a negative id surfaced later, naming a derived file)."""
    field, value, message = ANNOTATION_VALUES[case]
    original = json.loads((ehroot / ANNOTATION).read_text())
    original["annotations"][5][field] = "@@"
    text = json.dumps(original).replace('"@@"', value).encode()
    with params(workspace, egohumans_root(ehroot)), annotation(ehroot, text=text):
        refused(workspace, FETCH, str(ehroot / ANNOTATION), "row annotations[5]", message)


VIDEO_NAMES = {
    "leading dot": ".hidden",
    "a control character": "seq\u0007one",
    "a NUL byte": "seq\u0000one",
    "a slash": "a/b",
    "too long": "s" * 201,
}


@bad_input
@pytest.mark.parametrize("case", sorted(VIDEO_NAMES))
def test_a_video_name_that_cannot_name_a_file_is_refused(workspace: Path, ehroot: Path, case: str) -> None:
    """Video names become file names (``gt/<name>.txt``): a dot file would be skipped by every reader silently."""
    with (
        params(workspace, egohumans_root(ehroot)),
        annotation(ehroot, lambda d: d["videos"][1].update(name=VIDEO_NAMES[case])),
    ):
        refused(workspace, FETCH, str(ehroot / ANNOTATION), "row videos[1]", "video name must be a plain file name")


def _png_named_jpg() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (96, 32), (10, 200, 10)).save(buffer, format="PNG")
    return buffer.getvalue()


@bad_input
def test_a_strip_that_is_no_whole_jpeg_fails_its_clip(workspace: Path) -> None:
    """``frames.source: dataset``: the pinned ``frame_all_prev.jpg`` is sent as ``image/jpeg``: a PNG named .jpg, a
    JPEG cut short or an empty file fails its clip (named), the others go on."""
    items_path = workspace / "data/egonormia/fetched/items.parquet"
    strips = workspace / "data/egonormia/fetched/strips"
    with (
        restoring(items_path, strips, workspace / "data/egonormia/frames"),
        params(workspace, {"egonormia": {"frames": {"source": "dataset"}}}),
    ):
        items = pd.read_parquet(items_path)
        for clip in items["id"]:
            shutil.copyfile(workspace / "data/egonormia/frames" / f"{clip}.jpg", strips / f"{clip}.jpg")
        items["strip"] = [f"strips/{clip}.jpg" for clip in items["id"]]
        items.to_parquet(items_path, index=False)
        png, cut, empty = items["id"].iloc[:3]
        (strips / f"{png}.jpg").write_bytes(_png_named_jpg())
        whole = (strips / f"{cut}.jpg").read_bytes()
        (strips / f"{cut}.jpg").write_bytes(whole[: len(whole) // 2])
        (strips / f"{empty}.jpg").write_bytes(b"")
        done = run(workspace, "stages.egonormia.frames")
        assert done.returncode == 0, done.stderr[-3000:]
        index = pd.read_parquet(workspace / "data/egonormia/frames/index.parquet").set_index("id")
        expected = {png: "not a JPEG but PNG data", cut: "image file is truncated", empty: "not a readable JPEG"}
        for clip, reason in expected.items():
            assert reason in index.loc[clip, "error"], index.loc[clip, "error"]
            assert f"strips/{clip}.jpg" in index.loc[clip, "error"]
            assert not (workspace / "data/egonormia/frames" / f"{clip}.jpg").exists()
        assert (index.drop(list(expected))["error"] == "").all()
        assert f"{len(index) - 3} of {len(index)} clips extracted" in done.stderr


# ----------------------------------------------------------------------------------------- 11. real data roots


@bad_input
def test_the_users_detections_are_required_only_in_mode_file(workspace: Path, ehroot: Path) -> None:
    changes = egohumans_root(ehroot)
    changes["egohumans"]["fetch"]["detections"] = "detections/yolox.pkl"  # not there
    with params(workspace, changes):
        refused(workspace, FETCH, str(ehroot / "detections/yolox.pkl"), "egohumans.fetch.detections names it")
    changes["egohumans"] |= {"detect": {"modes": ["gt", "official"]}}
    with params(workspace, changes), restoring(workspace / "data/egohumans/fetched"):
        done = run(workspace, *FETCH)
        assert done.returncode == 0, done.stderr[-3000:]
        summary = json.loads((workspace / "data/egohumans/fetched/sequences.json").read_text())
        assert summary["detections"] == {"official": [OFFICIAL_PKL, EXO_PKL], "file": None}


def test_write_manifest_as_the_readme_shows_pins_every_dataset_of_the_folder(tmp_path: Path) -> None:
    """The GitHub folder src/final_dataset holds final_data.json and ood_robot.json: pinned once as the user
    guide shows it, either dataset (and either split) fetches."""
    folder = tmp_path / "final_dataset"
    folder.mkdir()
    robot = json.loads((TEST_DATA / "egonormia/ood_robot.json").read_text())
    shutil.copyfile(TEST_DATA / "egonormia/ood_robot.json", folder / "ood_robot.json")
    ids = [f"{k:08x}-aaaa-bbbb-cccc-dddddddddddd_{k}-0" for k in range(len(robot))]
    (folder / "final_data.json").write_text(
        json.dumps({i: {**c, "id": i} for i, c in zip(ids, robot.values(), strict=True)})
    )
    write_params(tmp_path)
    done = run(tmp_path, "stages.egonormia.fetch", "--write-manifest", str(folder), "--media", str(folder))
    assert done.returncode == 0, done.stderr
    assert {"final_data.json", "ood_robot.json"} <= set(read_manifest(folder / "manifest.sha256"))
    for dataset, split in (("ood_robot", "full"), ("egonormia", "full"), ("egonormia", "verified")):
        fetch = {"dataset": dataset, "split": split, "source": "local", "path": str(folder), "media_path": None}
        write_params(tmp_path, {"egonormia": {"fetch": fetch | {"manifest": str(folder / "manifest.sha256")}}})
        done = run(tmp_path, "stages.egonormia.fetch")
        if split == "verified":  # the pinned files were enough: what stops it is that no clip is verified
            assert done.returncode == 2 and "split 'verified' selects no clip" in done.stderr, done.stderr[-2000:]
            continue
        assert done.returncode == 0, done.stderr[-2000:]
        assert len(pd.read_parquet(tmp_path / "data/egonormia/fetched/items.parquet")) == len(robot)
