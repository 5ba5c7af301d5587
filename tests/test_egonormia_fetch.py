"""EgoNormia items schema, bundled sample and fetch stage, on real files."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import decord
import pandas as pd
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from egoeval.core.errors import InputError
from egoeval.core.io.manifest import read_manifest, write_manifest
from egoeval.core.settings import load_settings
from egoeval.egonormia.fetching import fetch, write_folder_manifest
from egoeval.egonormia.sample import render_sample
from egoeval.egonormia.schema import (
    CATEGORIES,
    id_problem,
    read_folder,
    read_items,
    read_official_json,
    validate_items,
    write_items,
)
from egoeval.egonormia.settings import FetchSettings

REPO = Path(__file__).resolve().parents[1]
OOD_ROBOT = REPO / "tests" / "data" / "egonormia" / "ood_robot.json"
SAMPLE = REPO / "data" / "egonormia" / "sample"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def local_params(
    folder: Path, split: str = "full", manifest: Path | None = None, dataset: str = "egonormia"
) -> dict[str, Any]:
    return {
        "dataset": dataset,
        "source": "local",
        "path": str(folder),
        "media_path": None,
        "manifest": str(manifest or folder / "manifest.sha256"),
        "hf_repo": "open-social-world/EgoNormia",
        "hf_revision": "0" * 40,
        "split": split,
    }


def local_settings(
    folder: Path, split: str = "full", manifest: Path | None = None, dataset: str = "egonormia"
) -> FetchSettings:
    return FetchSettings.model_validate(local_params(folder, split, manifest, dataset))


def good_clip(clip_id: str = "clip-a") -> dict[str, Any]:
    return {
        "id": clip_id,
        "behaviors": ["Hold the door.", "Let it shut.", "", "Take a box.", "Prop it open."],
        "justifications": ["Courtesy.", "Security.", "", "Helping.", "Moving day."],
        "correct": 0,
        "sensibles": [3, 0],
        "taxonomy": {"0": ["Politeness"], "1": ["Safety"], "2": [], "3": ["Cooperation"], "4": []},
        "desc": "A door.",
    }


def pinned_json(folder: Path, clips: dict[str, Any], name: str = "items.json") -> Path:
    """Write clips in the official layout and pin the file (without validating it)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(clips))
    names = sorted(p.name for p in folder.iterdir() if p.suffix in {".json", ".parquet"})
    write_manifest(folder / "manifest.sha256", folder, names)
    return folder / name


@pytest.fixture(scope="module")
def ood_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ood")
    shutil.copyfile(OOD_ROBOT, folder / "ood_robot.json")
    write_folder_manifest(folder)
    return folder


@pytest.fixture(scope="module")
def sample_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample regenerated from clips.json and params.yaml into a fresh folder."""
    folder = tmp_path_factory.mktemp("sample")
    shutil.copyfile(SAMPLE / "clips.json", folder / "clips.json")
    shutil.copyfile(SAMPLE / "manifest.sha256", folder / "manifest.sha256")
    render_sample(folder / "clips.json", folder / "videos", load_settings(REPO / "params.yaml").egonormia.sample)
    return folder


# ------------------------------------------------------------------ the official JSON layout


def test_ood_robot_through_fetch(ood_folder: Path, tmp_path: Path) -> None:
    raw = json.loads(OOD_ROBOT.read_text())
    items = fetch(local_settings(ood_folder, dataset="ood_robot"), tmp_path / "out")
    assert len(items) == 11
    assert items["id"].tolist() == sorted(raw)
    for row in items.to_dict("records"):
        clip = raw[row["id"]]
        assert row["behaviors"] == clip["behaviors"]
        assert row["justifications"] == clip["justifications"]
        assert row["correct_idx"] == clip["correct"]
        assert row["sensible_idx"] == sorted(clip["sensibles"])
        assert row["taxonomy"] == [clip["taxonomy"][str(i)] for i in range(5)]
        assert row["description"] == clip["desc"]
        assert row["verified"] is False
        assert row["video"] == "" and row["strip"] == ""
    written = read_items(tmp_path / "out" / "items.parquet")
    pd.testing.assert_frame_equal(written, items)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["items.parquet", "strips", "videos"]


def test_official_layout_oddities_are_kept(ood_folder: Path) -> None:
    items = read_folder(ood_folder, "ood_robot").set_index("id")
    # real data: correct action not among the sensible ones, and None correct with None sensible
    assert items.loc["clip-9", "correct_idx"] == 0 and items.loc["clip-9", "sensible_idx"] == [1, 3]
    assert items.loc["clip-6", "correct_idx"] == 4 and items.loc["clip-6", "sensible_idx"] == [4]


# ------------------------------------------------------------------ the bundled sample


def test_sample_clips_contract() -> None:
    raw = json.loads((SAMPLE / "clips.json").read_text())
    items = read_official_json(SAMPLE / "clips.json")
    assert len(items) >= 14
    empty_slots = [b.index("") for b in items["behaviors"]]
    assert len(set(empty_slots)) >= 3, "the None slot must move around"
    none_correct = items[[c == e for c, e in zip(items["correct_idx"], empty_slots, strict=True)]]
    assert len(none_correct) == 1
    for (_, row), empty in zip(items.iterrows(), empty_slots, strict=True):
        assert row["taxonomy"][empty] == []
        if row["correct_idx"] != empty:
            assert row["correct_idx"] in row["sensible_idx"]
        else:
            assert empty not in row["sensible_idx"]
    assert 4 <= int(items["verified"].sum()) <= 6
    assert {c for tax in items["taxonomy"] for cats in tax for c in cats} == set(CATEGORIES)
    assert all("video_spec" in clip for clip in raw.values())


def test_sample_rerender_is_byte_identical(sample_copy: Path, tmp_path: Path) -> None:
    params = load_settings(REPO / "params.yaml").egonormia.sample
    render_sample(sample_copy / "clips.json", tmp_path / "again", params)
    first = {p.name: sha256(p) for p in sorted((sample_copy / "videos").iterdir())}
    second = {p.name: sha256(p) for p in sorted((tmp_path / "again").iterdir())}
    assert first == second and len(first) == len(json.loads((SAMPLE / "clips.json").read_text()))
    # and identical to the committed pins
    pinned = read_manifest(SAMPLE / "manifest.sha256")
    assert {f"videos/{name}": digest for name, digest in first.items()} == {
        name: digest for name, digest in pinned.items() if name.startswith("videos/")
    }
    assert pinned["clips.json"] == sha256(SAMPLE / "clips.json")


def test_sample_videos_decode(sample_copy: Path) -> None:
    params = load_settings(REPO / "params.yaml").egonormia.sample
    for path in sorted((sample_copy / "videos").iterdir()):
        reader = decord.VideoReader(str(path))
        assert len(reader) == params.seconds * params.fps
        assert reader.get_avg_fps() == pytest.approx(params.fps)
        frames = reader.get_batch([0, len(reader) - 1]).asnumpy()
        assert frames.shape == (2, params.height, params.width, 3)
        assert abs(frames[0].astype(int) - frames[1].astype(int)).mean() > 1.0, f"{path.name} does not move"
        assert path.stat().st_size < 300_000


def test_sample_through_fetch(sample_copy: Path, tmp_path: Path) -> None:
    items = fetch(FetchSettings.model_validate({**local_params(sample_copy), "source": "sample"}), tmp_path / "out")
    clips = json.loads((sample_copy / "clips.json").read_text())
    assert items["id"].tolist() == sorted(clips)
    for row in items.to_dict("records"):
        copy = tmp_path / "out" / row["video"]
        assert row["video"] == f"videos/{row['id']}.mp4"
        assert sha256(copy) == sha256(sample_copy / row["video"])
        assert copy.stat().st_nlink == 1 and copy.stat().st_ino != (sample_copy / row["video"]).stat().st_ino
        assert row["verified"] == clips[row["id"]]["verified"]


def test_split_verified(sample_copy: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    fetch(local_settings(sample_copy), out)
    items = fetch(local_settings(sample_copy, split="verified"), out)
    clips = json.loads((sample_copy / "clips.json").read_text())
    assert items["id"].tolist() == sorted(k for k, v in clips.items() if v["verified"])
    assert items["verified"].all()
    # the second run replaced the first: no stale videos
    assert sorted(p.name for p in (out / "videos").iterdir()) == sorted(f"{i}.mp4" for i in items["id"])


def test_verified_split_file(tmp_path: Path) -> None:
    folder = tmp_path / "src"
    folder.mkdir()
    shutil.copyfile(OOD_ROBOT, folder / "ood_robot.json")
    (folder / "verified_split.json").write_text(json.dumps({"split": ["clip-5", "clip-1"]}))
    write_folder_manifest(folder)
    assert "verified_split.json" in read_manifest(folder / "manifest.sha256")
    items = fetch(local_settings(folder, split="verified", dataset="ood_robot"), tmp_path / "out")
    assert items["id"].tolist() == ["clip-1", "clip-5"]


def test_split_verified_with_no_verified_clip(ood_folder: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="verified"):
        fetch(local_settings(ood_folder, split="verified", dataset="ood_robot"), tmp_path / "out")


# ------------------------------------------------------------------ malformed input


def _mutate(change: str) -> dict[str, Any]:
    clip = good_clip("clip-bad")
    if change == "four options":
        clip["behaviors"] = clip["behaviors"][:4]
    elif change == "correct out of range":
        clip["correct"] = 5
    elif change == "sensible out of range":
        clip["sensibles"] = [0, -1]
    elif change == "duplicate sensible":
        clip["sensibles"] = [0, 0]
    elif change == "not a string":
        clip["behaviors"][0] = 3
    return {"clip-bad": clip}


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ("four options", "4 options"),
        ("correct out of range", "correct_idx"),
        ("sensible out of range", "sensible_idx"),
        ("duplicate sensible", "duplicate indices"),
        ("not a string", "strings"),
    ],
)
def test_malformed_row(tmp_path: Path, change: str, words: str) -> None:
    folder = tmp_path / "src"
    path = pinned_json(folder, {"clip-ok": good_clip("clip-ok"), **_mutate(change)})
    with pytest.raises(InputError) as caught:
        fetch(local_settings(folder), tmp_path / "out")
    assert str(path) in str(caught.value) and "row clip-bad" in str(caught.value)
    assert words in str(caught.value)
    assert caught.value.row == "clip-bad"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("bad_id", ["a/b", "..", ".hidden", "a..b", "tab\there", "", "a\\b"])
def test_unsafe_ids(tmp_path: Path, bad_id: str) -> None:
    folder = tmp_path / "src"
    path = pinned_json(folder, {bad_id: good_clip(bad_id)})
    with pytest.raises(InputError) as caught:
        fetch(local_settings(folder), tmp_path / "out")
    assert str(path) in str(caught.value)
    assert f"row {bad_id or '#0'}:" in str(caught.value)


def test_id_differing_from_key(tmp_path: Path) -> None:
    folder = tmp_path / "src"
    path = pinned_json(folder, {"clip-a": good_clip("clip-b")})
    with pytest.raises(InputError, match="differs from its key") as caught:
        fetch(local_settings(folder), tmp_path / "out")
    assert str(path) in str(caught.value) and "row clip-a" in str(caught.value)


def test_every_bad_row_is_listed(tmp_path: Path) -> None:
    clips = {"clip-ok": good_clip("clip-ok"), "clip-x": good_clip("clip-x"), "clip-y": good_clip("clip-y")}
    clips["clip-x"]["correct"] = 9
    clips["clip-y"]["sensibles"] = [7]
    path = pinned_json(tmp_path / "src", clips)
    with pytest.raises(InputError) as caught:
        read_folder(path.parent)
    message = str(caught.value)
    assert "row clip-x" in message and "row clip-y" in message and "[7]" in message


def test_rows_read_as_the_official_code_reads_them_are_counted(tmp_path: Path, capsys) -> None:
    clips = {f"clip-{k}": good_clip(f"clip-{k}") for k in range(4)}
    clips["clip-0"]["taxonomy"]["1"] = ["Safety", "Etiquette"]  # an unexpected label
    clips["clip-1"]["desc"] = ""  # an empty description (the real data's last item)
    clips["clip-2"]["behaviors"][1], clips["clip-2"]["justifications"][1] = "", ""  # two empty options
    clips["clip-3"]["justifications"][2], clips["clip-3"]["justifications"][3] = "Helping.", ""
    folder = tmp_path / "src"
    pinned_json(folder, clips)
    items = fetch(local_settings(folder), tmp_path / "out").set_index("id")
    assert len(items) == 4
    assert items.loc["clip-0", "taxonomy"][1] == ["Safety"] and items.loc["clip-1", "description"] == ""
    log = capsys.readouterr().err
    assert "1 rows: unknown taxonomy label 'Etiquette' dropped" in log
    assert "1 rows: empty description" in log
    assert "1 rows: behaviors with 2 empty options" in log
    assert "1 rows: justifications empty elsewhere" in log


def test_duplicate_ids_in_parquet(tmp_path: Path) -> None:
    folder = tmp_path / "src"
    folder.mkdir()
    rows = read_official_json(pinned_json(tmp_path / "json", {"clip-a": good_clip("clip-a")}))
    pd.concat([rows, rows]).to_parquet(folder / "train.parquet", index=False)
    write_manifest(folder / "manifest.sha256", folder, ["train.parquet"])
    with pytest.raises(InputError) as caught:
        fetch(local_settings(folder), tmp_path / "out")
    assert str(folder / "train.parquet") in str(caught.value) and "row clip-a" in str(caught.value)
    assert "duplicate id" in str(caught.value)


def test_two_candidate_items_files_are_refused(tmp_path: Path) -> None:
    folder = tmp_path / "src"
    pinned_json(folder, {"clip-a": good_clip("clip-a")}, name="a.json")
    pinned_json(folder, {"clip-a": good_clip("clip-a")}, name="b.json")
    with pytest.raises(InputError, match=r"a\.json', 'b\.json") as caught:
        fetch(local_settings(folder), tmp_path / "out")
    assert str(folder) in str(caught.value)


def test_bad_manifest_hash(tmp_path: Path) -> None:
    folder = tmp_path / "src"
    path = pinned_json(folder, {"clip-a": good_clip("clip-a")})
    path.write_text(path.read_text().replace("A door.", "A window."))
    with pytest.raises(InputError, match="differs from the manifest") as caught:
        fetch(local_settings(folder), tmp_path / "out")
    assert str(path) in str(caught.value)


def test_file_missing_from_manifest(tmp_path: Path) -> None:
    folder = tmp_path / "src"
    pinned_json(folder, {"clip-a": good_clip("clip-a")})
    (folder / "video" / "clip-a").mkdir(parents=True)
    (folder / "video" / "clip-a" / "video_prev.mp4").write_bytes(b"added after pinning")
    with pytest.raises(InputError, match=r"video/clip-a/video_prev\.mp4 is not pinned"):
        fetch(local_settings(folder), tmp_path / "out")


def test_missing_manifest(tmp_path: Path) -> None:
    folder = tmp_path / "src"
    pinned_json(folder, {"clip-a": good_clip("clip-a")})
    (folder / "manifest.sha256").unlink()
    with pytest.raises(InputError, match="--write-manifest"):
        fetch(local_settings(folder), tmp_path / "out")


def test_video_changed_after_pinning(tmp_path: Path) -> None:
    folder = tmp_path / "src"
    pinned_json(folder, {"clip-a": good_clip("clip-a")})
    (folder / "videos").mkdir()
    video = folder / "videos" / "clip-a.mp4"
    video.write_bytes(b"first")
    write_folder_manifest(folder)
    video.write_bytes(b"second")
    with pytest.raises(InputError, match="differs from the manifest") as caught:
        fetch(local_settings(folder), tmp_path / "out")
    assert str(video) in str(caught.value)


# ------------------------------------------------------------------ the Hugging Face layout


def hf_frame(items: pd.DataFrame, taxonomy: str) -> pd.DataFrame:
    """Items in the HF parquet layout, with the taxonomy column in one of its accepted shapes."""
    frame = items.drop(columns=["video", "strip", "verified"])
    if taxonomy == "lists":
        return frame
    if taxonomy == "json":
        return frame.assign(taxonomy=[json.dumps({str(i): c for i, c in enumerate(t)}) for t in frame["taxonomy"]])
    if taxonomy == "struct":
        return frame.assign(taxonomy=[{str(i): c for i, c in enumerate(t)} for t in frame["taxonomy"]])
    return frame.drop(columns=["taxonomy"])


@pytest.mark.parametrize("taxonomy", ["lists", "json", "struct", "absent"])
def test_parquet_layout_round_trip(ood_folder: Path, tmp_path: Path, taxonomy: str) -> None:
    expected = read_folder(ood_folder, "ood_robot")
    folder = tmp_path / "hf"
    folder.mkdir()
    hf_frame(expected, taxonomy).to_parquet(folder / "train-norm-updated.parquet", index=False)
    write_folder_manifest(folder)
    items = fetch(local_settings(folder), tmp_path / "out")
    if taxonomy == "absent":
        expected = expected.assign(taxonomy=[[[] for _ in range(5)]] * len(expected))
    pd.testing.assert_frame_equal(items, expected)


def test_items_file_round_trip(ood_folder: Path, tmp_path: Path) -> None:
    items = read_folder(ood_folder, "ood_robot")
    write_items(items, tmp_path / "items.parquet")
    pd.testing.assert_frame_equal(read_items(tmp_path / "items.parquet"), items)
    write_items(items.iloc[::-1], tmp_path / "again.parquet")
    assert sha256(tmp_path / "items.parquet") == sha256(tmp_path / "again.parquet")


def test_only_video_prev_is_the_context_video(tmp_path: Path) -> None:
    folder = tmp_path / "src"
    ids = ["clip-a", "clip-b", "clip-c", "clip-d"]
    pinned_json(folder, {i: good_clip(i) for i in ids})
    layout = {
        "clip-a": ["video_prev.mp4", "video_during.mp4", "frame_all_prev.jpg", "frame_all_during.jpg"],
        "clip-b": ["video_during.mp4", "frame_all_during.jpg"],  # the answer's clip: never the context
        "clip-c": ["only.mp4", "prev_part.mp4"],
    }
    for clip_id, names in layout.items():
        (folder / "video" / clip_id).mkdir(parents=True)
        for name in names:
            (folder / "video" / clip_id / name).write_bytes(f"{clip_id}/{name}".encode())
    write_folder_manifest(folder)
    items = fetch(local_settings(folder), tmp_path / "out").set_index("id")
    assert items.loc["clip-a", "video"] == "videos/clip-a.mp4"
    assert (tmp_path / "out" / "videos" / "clip-a.mp4").read_bytes() == b"clip-a/video_prev.mp4"
    assert items.loc["clip-a", "strip"] == "strips/clip-a.jpg"
    assert (tmp_path / "out" / "strips" / "clip-a.jpg").read_bytes() == b"clip-a/frame_all_prev.jpg"
    for clip_id in ("clip-b", "clip-c", "clip-d"):
        assert items.loc[clip_id, "video"] == "" and items.loc[clip_id, "strip"] == ""
    assert sorted(p.name for p in (tmp_path / "out" / "videos").iterdir()) == ["clip-a.mp4"]


# ------------------------------------------------------------------ the command line


def _run_cli(cwd: Path, fetch_params: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["egonormia"]["fetch"] = {**params["egonormia"]["fetch"], **fetch_params}
    (cwd / "params.yaml").write_text(yaml.safe_dump(params))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"}
    return subprocess.run(
        [sys.executable, "-m", "stages.egonormia.fetch", *args], cwd=cwd, env=env, capture_output=True, text=True
    )


def test_cli_fetch_and_write_manifest(tmp_path: Path) -> None:
    folder = tmp_path / "mydata"
    folder.mkdir()
    shutil.copyfile(OOD_ROBOT, folder / "ood_robot.json")
    args = ("--write-manifest", "mydata", "--manifest", "pins.sha256")
    pinned = _run_cli(tmp_path, {}, *args)
    assert pinned.returncode == 0, pinned.stderr
    assert list(read_manifest(tmp_path / "pins.sha256")) == ["ood_robot.json"]
    params = {**local_params(Path("mydata"), manifest=Path("pins.sha256"), dataset="ood_robot")}
    done = _run_cli(tmp_path, params)
    assert done.returncode == 0, done.stderr
    assert len(read_items(tmp_path / "data" / "egonormia" / "fetched" / "items.parquet")) == 11


def test_cli_refuses_unpinned_revision_offline(tmp_path: Path) -> None:
    params = {**local_params(Path("nowhere")), "source": "huggingface", "hf_revision": "main"}
    done = _run_cli(tmp_path, params)
    assert done.returncode == 2  # bad input: egoeval.core.errors.EXIT_BAD_INPUT, never retried
    assert "egonormia.fetch.hf_revision = 'main'" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / ".egoeval-cache").exists() and not (tmp_path / "data").exists()


# ------------------------------------------------------------------ ids


@given(st.text(max_size=40))
def test_accepted_ids_are_single_plain_file_names(text: str) -> None:
    if id_problem(text) is None:
        assert Path(text).name == text and text not in {".", ".."} and not text.startswith(".")
        assert os.sep not in text and "\\" not in text and text.isascii() and text.isprintable()


def test_validate_items_sorts_and_normalizes() -> None:
    rows = [
        {
            "id": i,
            "behaviors": ["a", "b", " ", "d", "e"],
            "justifications": ["a", "b", "", "d", "e"],
            "correct_idx": 1,
            "sensible_idx": [4, 1],
            "taxonomy": [["Safety"], [], [], [], []],
            "description": "",
        }
        for i in ("b-2", "a-1")
    ]
    items = validate_items(rows, "memory")
    assert items["id"].tolist() == ["a-1", "b-2"]
    assert items.loc[0, "behaviors"][2] == "" and items.loc[0, "sensible_idx"] == [1, 4]
    assert not items.loc[0, "verified"]
