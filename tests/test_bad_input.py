"""Bad inputs of the model stages not covered elsewhere: each names its file and row, and loses nothing else.

(Dataset rows, ids, manifests, videos, MOTChallenge rows, annotations and pickles: test_egonormia_fetch.py,
test_frames.py, test_mot_io.py, test_egohumans_formats.py and test_egohumans_stages.py.)
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import forked
import pandas as pd
import pytest
from conftest import EGOEVAL, TEST_DATA, infer_stage, write_params
from PIL import Image

from egoeval.core.errors import InputError
from egoeval.core.stage_shell import command_env, run_stage
from egoeval.egohumans.formats import read_det_txt, read_tracking_annotation
from egoeval.egonormia.artifacts import read_items
from egoeval.egonormia.inference import run_inference
from egoeval.egonormia.predictions import parse_responses
from egoeval.egonormia.protocols import registry
from egoeval.egonormia.schema import read_official_json
from egoeval.egonormia.settings import InferSettings, ModelSpec
from egoeval.tracking.mot import read_mot

pytestmark = pytest.mark.bad_input
CHANCE = [ModelSpec(backend="random", name="chance")]


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
    params = InferSettings(
        settings=["blind", "pipeline", "video"], seed=0, max_failure_rate=0.1, cache_dir=str(tmp_path)
    )
    return run_inference(items, index, frames, descriptions(items), CHANCE, params, registry()["official"])


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
    assert run_stage(infer_stage, benchmark="egonormia") == 2
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


# ---------------------------------------------------------------- files the stages and commands read


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"this is not a database, just text" * 40, "DatabaseError: file is not a database"),
        (None, "OperationalError: unable to open database file"),  # a folder where the file should be
    ],
)
def test_an_unusable_response_cache_names_its_file(tmp_path: Path, content: bytes | None, reason: str) -> None:
    cache = tmp_path / "cache" / "responses.sqlite"
    if content is None:
        cache.mkdir(parents=True)
    else:
        cache.parent.mkdir(parents=True)
        cache.write_bytes(content)
    items = make_items(2)
    index = write_frames(tmp_path / "frames", items)
    params = InferSettings(settings=["blind"], seed=0, max_failure_rate=0.1, cache_dir=str(tmp_path / "cache"))
    with pytest.raises(InputError) as caught:
        run_inference(items, index, tmp_path / "frames", descriptions(items), CHANCE, params, registry()["official"])
    assert caught.value.path == str(cache) and reason in str(caught.value) and "move it away" in str(caught.value)


def test_a_clip_listed_twice_in_the_official_json_is_an_error(tmp_path: Path) -> None:
    record = json.loads((TEST_DATA / "egonormia" / "ood_robot.json").read_text())
    clip, entry = next(iter(record.items()))
    body = json.dumps({clip: entry})[1:-1]
    path = tmp_path / "final_data.json"
    path.write_text("{" + body + ", " + body + "}")  # json.loads alone would keep the second copy silently
    with pytest.raises(InputError) as caught:
        read_official_json(path)
    assert caught.value.path == str(path) and f"the key {clip!r} appears twice" in str(caught.value)


def test_an_annotation_repeating_a_key_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "tracking_ego_rgb.json"
    path.write_text('{"videos": [], "images": [], "annotations": [], "images": []}')
    with pytest.raises(InputError, match="the key 'images' appears twice"):
        read_tracking_annotation(path)


@pytest.mark.parametrize("reader", ["det.txt", "mot"])
def test_a_latin1_byte_in_a_detections_file_names_file_and_line(tmp_path: Path, reader: str) -> None:
    path = tmp_path / "det.txt"
    path.write_bytes(b"1,-1,10,10,5,5,0.9\n2,-1,10,10,5,5,0.9 caf\xe9\n")
    with pytest.raises(InputError) as caught:
        read_det_txt(path, "seq") if reader == "det.txt" else read_mot(path, kind="pred")
    assert caught.value.path == str(path) and "UTF-8" in str(caught.value)


SCORE_NORMS_BAD = {
    "empty object": ("{}", "no clip carries a model entry"),
    "a list": ("[1, 2]", "the top level is not an object of clips"),
    "not JSON": ("{not json", "not a readable JSON file"),
    "a repeated clip": ('{"c": {}, "c": {}}', "the key 'c' appears twice"),
    "no best entry": ('{"c": {"m": {"sensible": {}}}}', "clip 'c', model 'm'"),
    "short results": ('{"c": {"m": {"best": {"results": [1], "correct": [1, 1]}, "sensible": {}}}}', "two entries"),
}


@pytest.mark.parametrize("case", sorted(SCORE_NORMS_BAD))
def test_score_norms_refuses_what_it_cannot_score(tmp_path: Path, case: str) -> None:
    content, message = SCORE_NORMS_BAD[case]
    path = tmp_path / "eval.json"
    path.write_text(content)
    run = forked.run([EGOEVAL, "score-norms", "--official-eval", str(path)], Path.cwd(), dict(os.environ))
    assert run.returncode == 2 and message in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert str(path) in run.stderr and run.stdout == ""


def test_score_norms_into_a_closed_pipe_stops_quietly(tmp_path: Path) -> None:
    models = {f"model-{m}": {"best": {"results": [0, 0], "correct": [0, 1]}, "sensible": {}} for m in range(20000)}
    path = tmp_path / "eval.json"
    path.write_text(json.dumps({"clip": models}))
    run = subprocess.run(
        f"'{EGOEVAL}' score-norms --official-eval '{path}' | head -n 2; echo \"status ${{PIPESTATUS[0]}}\"",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
    )
    assert run.stdout.splitlines()[0].split()[:2] == ["model", "n"] and run.stdout.splitlines()[-1] == "status 141"
    assert "BrokenPipeError" not in run.stderr and "Traceback" not in run.stderr, run.stderr


# ---------------------------------------------------------------- a stage run before the stages it needs

MISSING_UPSTREAM = {
    "stages.egonormia.frames": "data/egonormia/fetched/items.parquet",
    "stages.egonormia.describe": "data/egonormia/fetched/items.parquet",
    "stages.egonormia.infer": "data/egonormia/fetched/items.parquet",
    "stages.egonormia.parse": "data/egonormia/fetched/items.parquet",
    "stages.egonormia.score": "data/egonormia/fetched/items.parquet",
    "stages.egohumans.detect --mode gt": "data/egohumans/fetched/sequences.json",
    "stages.egohumans.track --tracker bytetrack --mode gt": "data/egohumans",
    "stages.egohumans.score": "data/egohumans",
}


@pytest.mark.parametrize("command", sorted(MISSING_UPSTREAM))
def test_a_stage_without_its_inputs_names_the_missing_file(tmp_path: Path, command: str) -> None:
    write_params(tmp_path)
    run = forked.run([sys.executable, "-m", *command.split()], tmp_path, command_env())
    assert run.returncode == 2, run.stdout + run.stderr
    (line,) = [line for line in run.stderr.splitlines() if line.startswith("error: bad input: ")]
    assert MISSING_UPSTREAM[command] in line and "Traceback" not in run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]  # nothing written
