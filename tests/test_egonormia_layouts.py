"""EgoNormia as distributed: the GitHub ``src/final_dataset`` folder, a Hugging Face snapshot, a download from a
hub-like server on 127.0.0.1, the verified split shipped with the project, and media that is missing.

The folders are built from the real ``ood_robot.json`` (tests/data/egonormia): its 11 clips are the robot set,
and the same clips re-keyed with EgoNormia-style ids (three of them real verified-split ids) stand in for
``final_data.json``; media are real small mp4s and JPEGs written here.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pandas as pd
import pytest
from conftest import write_test_video

from egoeval.core.errors import InputError
from egoeval.core.io.manifest import sha256_file
from egoeval.egonormia.fetching import fetch, write_folder_manifest
from egoeval.egonormia.frames import extract_frames
from egoeval.egonormia.hub import download_hf
from egoeval.egonormia.schema import SHIPPED_SPLIT, verified_ids
from egoeval.egonormia.settings import FetchSettings, FramesSettings

REPO = Path(__file__).resolve().parents[1]
OOD_ROBOT = REPO / "tests" / "data" / "egonormia" / "ood_robot.json"
ROBOT = json.loads(OOD_ROBOT.read_text())
VERIFIED = sorted(verified_ids())[:3]
NO_PREV_VIDEO, NO_PREV_STRIP = 1, 2  # positions (in EGONORMIA order) of clips missing a media file


def _egonormia_ids() -> list[str]:
    made = [f"{uuid.UUID(int=k + 1)}_{100 + k}-00" for k in range(len(ROBOT) - len(VERIFIED))]
    return [*VERIFIED, *made]


EGONORMIA = {new_id: {**clip, "id": new_id} for new_id, clip in zip(_egonormia_ids(), ROBOT.values(), strict=True)}


def _eval_json(clips: dict[str, Any]) -> dict[str, Any]:
    """Published results in the official eval-JSON layout (never items)."""
    return {
        clip_id: {
            "gpt-4o": {
                "best": {"results": [clip["correct"], clip["correct"]], "correct": [clip["correct"]] * 2},
                "sensible": {"results": clip["sensibles"], "correct": clip["sensibles"]},
            }
        }
        for clip_id, clip in clips.items()
    }


def github_folder(root: Path) -> Path:
    """``src/final_dataset`` as shipped: items, result files, the verified split, the scorer; no media."""
    folder = root / "src" / "final_dataset"
    folder.mkdir(parents=True)
    (folder / "final_data.json").write_text(json.dumps(EGONORMIA, indent=4))
    (folder / "final_data_eval.json").write_text(json.dumps(_eval_json(EGONORMIA)))
    shutil.copyfile(OOD_ROBOT, folder / "ood_robot.json")
    (folder / "ood_robot_eval.json").write_text(json.dumps(_eval_json(ROBOT)))
    shutil.copyfile(SHIPPED_SPLIT, folder / "verified_split.json")
    (folder / "compute_scores_final.py").write_text("# the official scorer lives here\n")
    (folder / "final_dataset_guide.md").write_text("# guide\n")
    return folder


def hf_snapshot(root: Path) -> Path:
    """A Hugging Face snapshot: final_data.json, the parquet subset, and video/<id>/ with four media files each."""
    folder = root / "hf"
    folder.mkdir(parents=True)
    (folder / "final_data.json").write_text(json.dumps(EGONORMIA, indent=4))
    rows = [
        {
            "id": clip_id,
            "behaviors": clip["behaviors"],
            "justifications": clip["justifications"],
            "correct_idx": clip["correct"],
            "sensible_idx": clip["sensibles"],
            "description": clip["desc"],
        }
        for clip_id, clip in list(EGONORMIA.items())[:8]
    ]
    pd.DataFrame(rows).to_parquet(folder / "train-norm-updated.parquet", index=False)
    for k, clip_id in enumerate(EGONORMIA):
        media = folder / "video" / clip_id
        media.mkdir(parents=True)
        if k != NO_PREV_VIDEO:
            write_test_video(media / "video_prev.mp4", seconds=3.0, fps=10.0, size=(64, 48))
        write_test_video(media / "video_during.mp4", seconds=2.0, fps=10.0, size=(64, 48))
        strip = np.full((48, 64 * 3, 3), 10 * k, np.uint8)
        if k != NO_PREV_STRIP:
            cv2.imwrite(str(media / "frame_all_prev.jpg"), strip)
        cv2.imwrite(str(media / "frame_all_during.jpg"), 255 - strip)
    return folder


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("layouts")
    return {"github": github_folder(root), "hf": hf_snapshot(root)}


def params(folder: Path, dataset: str = "egonormia", split: str = "full", media: Path | None = None) -> dict[str, Any]:
    return {
        "dataset": dataset,
        "source": "local",
        "path": str(folder),
        "media_path": None if media is None else str(media),
        "manifest": str(folder.parent / f"{folder.name}-{dataset}-{media is not None}.sha256"),
        "hf_repo": "open-social-world/EgoNormia",
        "hf_revision": None,
        "split": split,
    }


def pinned(folder: Path, dataset: str = "egonormia", split: str = "full", media: Path | None = None) -> FetchSettings:
    spec = FetchSettings.model_validate(params(folder, dataset, split, media))
    write_folder_manifest(folder, spec.manifest, media)
    return spec


# ------------------------------------------------------------------ the GitHub folder as shipped


def test_github_folder_egonormia(layouts: dict[str, Path], tmp_path: Path) -> None:
    items = fetch(pinned(layouts["github"]), tmp_path / "out")
    assert items["id"].tolist() == sorted(EGONORMIA)  # exactly final_data.json: no result file, no robot clip
    assert not items["id"].str.startswith("clip-").any()
    assert (items["video"] == "").all() and (items["strip"] == "").all()  # the GitHub folder has no media
    assert sorted(items.loc[items["verified"], "id"]) == VERIFIED  # the shipped split


def test_github_folder_ood_robot(layouts: dict[str, Path], tmp_path: Path) -> None:
    items = fetch(pinned(layouts["github"], "ood_robot"), tmp_path / "out")
    assert items["id"].tolist() == sorted(ROBOT) and len(items) == 11
    assert not items["verified"].any()
    assert not set(items["id"]) & set(EGONORMIA)


def test_result_files_are_never_items(tmp_path: Path) -> None:
    folder = tmp_path / "final_dataset"
    folder.mkdir()
    (folder / "final_data_eval.json").write_text(json.dumps(_eval_json(EGONORMIA)))
    shutil.copyfile(OOD_ROBOT, folder / "ood_robot.json")
    with pytest.raises(InputError, match="no EgoNormia items file") as caught:
        fetch(FetchSettings.model_validate(params(folder)), tmp_path / "out")
    assert str(folder) in str(caught.value)


def test_media_path_and_verified_split_from_any_source(layouts: dict[str, Path], tmp_path: Path) -> None:
    items = fetch(pinned(layouts["github"], split="verified", media=layouts["hf"]), tmp_path / "out")
    assert items["id"].tolist() == VERIFIED
    order = list(EGONORMIA)
    for row in items.itertuples():
        source = layouts["hf"] / "video" / row.id
        if order.index(row.id) == NO_PREV_VIDEO:
            assert row.video == ""  # video_during.mp4 is there, and never taken
        else:
            assert sha256_file(tmp_path / "out" / row.video) == sha256_file(source / "video_prev.mp4")
        if order.index(row.id) == NO_PREV_STRIP:
            assert row.strip == ""
        else:
            assert sha256_file(tmp_path / "out" / row.strip) == sha256_file(source / "frame_all_prev.jpg")


# ------------------------------------------------------------------ a Hugging Face snapshot


def test_hf_snapshot_reads_final_data_not_the_parquet_too(layouts: dict[str, Path], tmp_path: Path) -> None:
    spec = pinned(layouts["hf"])
    items = fetch(spec, tmp_path / "out")
    assert items["id"].tolist() == sorted(EGONORMIA) and len(items) == 11  # no "duplicate id"
    pins = Path(spec.manifest).read_text()
    assert "final_data.json" in pins and "parquet" not in pins and "video_during" not in pins
    assert (items["video"] != "").sum() == 10 and (items["strip"] != "").sum() == 10


def test_hf_parquet_only_snapshot(layouts: dict[str, Path], tmp_path: Path) -> None:
    folder = tmp_path / "parquet-only"
    folder.mkdir()
    shutil.copyfile(layouts["hf"] / "train-norm-updated.parquet", folder / "train-norm-updated.parquet")
    items = fetch(pinned(folder), tmp_path / "out")
    assert items["id"].tolist() == sorted(list(EGONORMIA)[:8])


@pytest.mark.parametrize("reader", ["decord", "pyav"])  # two worker processes, forked with the reader loaded
def test_missing_media_is_a_recorded_per_clip_failure(layouts: dict[str, Path], tmp_path: Path, reader: str) -> None:
    fetched = tmp_path / "fetched"
    items = fetch(pinned(layouts["hf"]), fetched)
    no_video, no_strip = list(EGONORMIA)[NO_PREV_VIDEO], list(EGONORMIA)[NO_PREV_STRIP]
    frames = FramesSettings(
        source="video", reader=reader, fps=1, frame_height=48, max_width=8000, jpeg_quality=90, workers=2
    )
    (tmp_path / "video").mkdir()
    index = extract_frames(items, fetched, tmp_path / "video", frames).set_index("id")
    assert "video_prev.mp4" in index.loc[no_video, "error"] and index.loc[no_video, "image"] == ""
    assert (index.drop(no_video)["error"] == "").all()
    assert (index.drop(no_video)["n_frames"] == 3).all() and (index.drop(no_video)["height"] == 48).all()
    (tmp_path / "dataset").mkdir()
    index = extract_frames(
        items, fetched, tmp_path / "dataset", frames.model_copy(update={"source": "dataset"})
    ).set_index("id")
    assert "frame_all_prev.jpg" in index.loc[no_strip, "error"]
    for clip_id in index.drop(no_strip).index:
        copied = tmp_path / "dataset" / f"{clip_id}.jpg"
        assert copied.read_bytes() == (layouts["hf"] / "video" / clip_id / "frame_all_prev.jpg").read_bytes()


# ------------------------------------------------------------------ source: huggingface, against a local hub


class _Hub(BaseHTTPRequestHandler):
    """``/datasets/<repo>/resolve/<revision>/<path>`` from a folder laid out like the hub (HEAD and GET)."""

    root: Path
    revision: str
    served: list[str]

    def _file(self) -> Path | None:
        prefix = f"/datasets/open-social-world/EgoNormia/resolve/{self.revision}/"
        path = self.path.split("?")[0]
        if not path.startswith(prefix):
            return None
        target = self.root / path[len(prefix) :]
        return target if target.is_file() else None

    def _headers(self, target: Path | None) -> None:
        if target is None:
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("ETag", f'"{hashlib.sha256(target.read_bytes()).hexdigest()}"')
        self.send_header("X-Repo-Commit", self.revision)
        self.send_header("Content-Length", str(target.stat().st_size))
        self.end_headers()

    def do_HEAD(self) -> None:
        self._headers(self._file())

    def do_GET(self) -> None:
        target = self._file()
        self._headers(target)
        if target is not None:
            self.served.append(str(target.relative_to(self.root)))
            self.wfile.write(target.read_bytes())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hub(layouts: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str, list[str]]]:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    revision = "1" * 40
    served: list[str] = []
    handler = type("Hub", (_Hub,), {"root": layouts["hf"], "revision": revision, "served": served})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", revision, served
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("split", ["full", "verified"])
def test_huggingface_download_from_a_local_hub(
    hub: tuple[str, str, list[str]], layouts: dict[str, Path], tmp_path: Path, split: str
) -> None:
    endpoint, revision, served = hub
    spec = FetchSettings.model_validate(
        {**params(tmp_path, split=split), "source": "huggingface", "hf_revision": revision}
    )
    folder, media, items = download_hf(spec, Counter(), root=tmp_path / "cache", endpoint=endpoint)
    expected = VERIFIED if split == "verified" else sorted(EGONORMIA)
    assert items["id"].tolist() == expected
    assert folder == media == tmp_path / "cache" / "open-social-world/EgoNormia" / revision
    order = list(EGONORMIA)
    wanted = {f"video/{i}/{name}" for i in expected for name in ("video_prev.mp4", "frame_all_prev.jpg")}
    wanted -= {f"video/{order[NO_PREV_VIDEO]}/video_prev.mp4", f"video/{order[NO_PREV_STRIP]}/frame_all_prev.jpg"}
    assert sorted(served) == sorted({"final_data.json", *wanted})  # never the parquet, never the "during" files
    for name in served:
        assert sha256_file(folder / name) == sha256_file(layouts["hf"] / name)


def test_the_shipped_verified_split_is_the_official_file() -> None:
    assert sha256_file(SHIPPED_SPLIT) == "65820d50f700ca5d8bc2225910db8e1996e7b8eddb20d495a8cefcf732c23cff"
    ids = verified_ids()
    assert len(ids) == 200 and all("_" in i for i in ids)
