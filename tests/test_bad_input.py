"""Bad inputs of the model stages not covered elsewhere: each names its file and row, and loses nothing else.

(Dataset rows, ids, manifests, videos, MOTChallenge rows, annotations and pickles: test_egonormia_fetch.py,
test_frames.py, test_mot_io.py, test_egohumans_formats.py and test_egohumans_stages.py.)
"""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
from conftest import write_params
from PIL import Image

from egoeval.egonormia.artifacts import read_items
from egoeval.egonormia.inference import run_inference
from egoeval.io import InputError
from stages.egonormia import infer as infer_stage
from stages.egonormia.parse import parse_responses

CHANCE = [{"backend": "random", "name": "chance"}]


def make_items(n: int) -> pd.DataFrame:
    rows = [
        {
            "id": f"clip-{i}",
            "behaviors": [f"Act {k} in clip {i}" for k in range(4)] + [""],
            "justifications": [f"Why {k} in clip {i}" for k in range(4)] + [""],
            "correct_idx": 0,
            "sensible_idx": [0],
            "description": f"Room {i}.",
        }
        for i in range(n)
    ]
    return pd.DataFrame(rows)


def write_frames(folder: Path, items: pd.DataFrame) -> pd.DataFrame:
    folder.mkdir(parents=True, exist_ok=True)
    for clip in items["id"]:
        buffer = io.BytesIO()
        Image.new("RGB", (32, 16), (90, 90, 90)).save(buffer, format="JPEG")
        (folder / f"{clip}.jpg").write_bytes(buffer.getvalue())
    return pd.DataFrame({"id": items["id"], "image": items["id"] + ".jpg", "error": ""})


def descriptions(items: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"id": items["id"], "description": items["description"], "source": "dataset", "error": ""})


def infer(items: pd.DataFrame, index: pd.DataFrame, frames: Path, tmp_path: Path) -> pd.DataFrame:
    params = {"settings": ["blind", "pipeline", "video"], "seed": 0, "max_failure_rate": 0.1, "cache_dir": tmp_path}
    return run_inference(items, index, frames, descriptions(items), CHANCE, params)


@pytest.mark.parametrize(
    ("image", "reason"),
    [
        ("clip-1.jpg", "frames unavailable: cannot read clip-1.jpg: No such file or directory"),
        ("../clip-1.jpg", "frames unavailable: '../clip-1.jpg' is not a plain file name"),
        ("sub/clip-1.jpg", "frames unavailable: 'sub/clip-1.jpg' is not a plain file name"),
    ],
)
def test_a_missing_or_escaping_frames_image_fails_only_its_clip(tmp_path: Path, image: str, reason: str) -> None:
    items = make_items(3)
    frames = tmp_path / "frames"
    index = write_frames(frames, items)
    (frames / "clip-1.jpg").rename(tmp_path / "clip-1.jpg")  # outside the frames folder: must not be read
    index.loc[index["id"] == "clip-1", "image"] = image
    responses = infer(items, index, frames, tmp_path)
    failed = responses[responses["error"] != ""]
    assert set(zip(failed["id"], failed["setting"], strict=True)) == {("clip-1", "video")}
    assert len(failed) == 3 and set(failed["error"]) == {reason}  # action, justification and sensible
    assert responses["response"].notna().sum() == len(responses) - 3  # every other answer is there


def test_items_with_a_wrong_option_count_name_file_and_row(tmp_path: Path) -> None:
    items = make_items(3)
    items.at[2, "behaviors"] = items.at[2, "behaviors"][:4]
    path = tmp_path / "items.parquet"
    items.to_parquet(path, index=False)
    with pytest.raises(InputError) as caught:
        read_items(path)
    assert str(caught.value) == f"{path}, row clip-2: behaviors must hold 5 strings"


def test_items_with_a_duplicate_id_name_file_and_row(tmp_path: Path) -> None:
    items = make_items(3)
    items.loc[2, "id"] = "clip-0"
    path = tmp_path / "items.parquet"
    items.to_parquet(path, index=False)
    with pytest.raises(InputError, match=r"items\.parquet, row clip-0: duplicate id"):
        read_items(path)


def test_the_infer_stage_reports_bad_items_in_one_line_and_writes_nothing(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    items = make_items(2)
    items.at[1, "justifications"] = [*items.at[1, "justifications"], "A sixth reason."]
    Path("data/egonormia/fetched").mkdir(parents=True)
    items.to_parquet("data/egonormia/fetched/items.parquet", index=False)
    write_params(
        tmp_path,
        {"egonormia": {"baselines": [], "infer": {"settings": ["blind"], "seed": 0, "cache_dir": ".cache"}}},
    )
    assert infer_stage.main([]) == 2
    where = "data/egonormia/fetched/items.parquet, row clip-1"
    assert capsys.readouterr().err.splitlines() == [f"error: bad input: {where}: justifications must hold 5 strings"]
    assert not Path("data/egonormia/responses.parquet").exists()


@pytest.mark.parametrize(
    ("column", "row", "value", "message"),
    [
        ("id", 4, "clip-9", "id 'clip-9' is not in"),
        ("permutation", 5, [0, 1, 2, 2, 4], "does not reorder 5 options"),
        ("subtask", 7, "action", "second response for the same id"),  # row 6 is clip-0/video/chance/action
    ],
)
def test_bad_responses_name_file_and_row(tmp_path: Path, column: str, row: int, value: object, message: str) -> None:
    items = make_items(3)
    responses = infer(items, write_frames(tmp_path / "frames", items), tmp_path / "frames", tmp_path)
    responses.at[row, column] = value
    path = tmp_path / "responses.parquet"
    with pytest.raises(InputError) as caught:
        parse_responses(items, responses, responses_path=path)
    assert caught.value.path == str(path) and caught.value.row == row
    assert message in str(caught.value)
