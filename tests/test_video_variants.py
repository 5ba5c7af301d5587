"""The video setting's variants (issue 31): the strip (official), separate frames and the native clip, from params to
request bodies, the loopback endpoint, the estimate and the paired comparisons."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import qwen2_vl_oracle
from conftest import write_params, write_test_video
from openai_server import KeyedPolicy, OpenAIServer, prompt_usage
from test_infer import KEY_ENV, make_items, model_spec
from videos import decode_all_frames

from egoeval.backends import ImagePart, TextPart, VideoPart
from egoeval.backends.openai import request_body
from egoeval.cli import main as egoeval_main
from egoeval.core.io.atomic import write_parquet
from egoeval.egonormia.artifacts import DESCRIPTIONS, FETCHED, ITEMS, RESPONSES, is_setting, is_variant
from egoeval.egonormia.descriptions import from_dataset
from egoeval.egonormia.estimate import estimate, video_tokens
from egoeval.egonormia.frames import write_frames
from egoeval.egonormia.inference import inference_inputs, run_inference
from egoeval.egonormia.ledger import answer_ledgers
from egoeval.egonormia.paired import Run, compare_models, paired_table
from egoeval.egonormia.protocols import frames_parts, native_parts, strip_parts
from egoeval.egonormia.protocols import official as official_protocol
from egoeval.egonormia.scoring import Outcomes
from egoeval.egonormia.settings import EgoNormiaSettings, ScoreSettings, VideoVariant
from egoeval.significance import csv_bytes
from egoeval.video import mp4_shape, read_sampled_frames, spread, uniform_indices

FRAMES4 = {"kind": "frames", "count": 4, "height": 32}
NATIVE = {"kind": "native", "max_bytes": 2_000_000, "height": 32, "fps": 5.0}
BEHAVIORS = ["Wave", "Wait", "Leave", "Shout", ""]


def test_each_variant_has_its_stable_name() -> None:
    names = [VideoVariant.model_validate(v).name for v in ({"kind": "strip"}, FRAMES4, NATIVE)]
    assert names == ["video", "video:frames4", "video:native"]
    assert VideoVariant.model_validate({"kind": "frames", "per_second": 0.5, "height": 32}).name == "video:frames0.5fps"
    assert all(is_setting(name) for name in names) and [is_variant(name) for name in names] == [False, True, True]


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("variants", "named"),
    [
        ([{"kind": "strip"}, {"kind": "frames", "height": 32}], "exactly one of count"),
        ([{"kind": "strip"}, {"kind": "frames", "count": 65, "height": 32}], "count"),
        ([{"kind": "strip"}, {"kind": "frames", "count": 4, "height": 32, "fps": 2.0}], "fps does not apply"),
        ([FRAMES4], "exactly one variant must be kind strip"),
        ([{"kind": "strip"}, FRAMES4, FRAMES4], "'video:frames4'"),
        ([{"kind": "strip"}, {"kind": "native"}], "max_bytes"),
        ([{"kind": "strip"}, {**NATIVE, "max_bytes": 10**9}], "max_bytes"),
    ],
)
def test_bad_variants_are_refused_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], variants: list, named: str
) -> None:
    params = write_params(tmp_path, {"egonormia": {"frames": {"variants": variants}}})
    assert params["egonormia"]["frames"]["variants"] == variants
    code = egoeval_main(["check-params", str(tmp_path / "params.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and "egonormia.frames.variants" in err and named in err, err
    assert "Traceback" not in err


def test_frames_variant_equals_a_full_decode_at_uniform_indices(tmp_path: Path) -> None:
    path = write_test_video(tmp_path / "clip.mp4", seconds=2.0, fps=30.0)
    everything = decode_all_frames(path)
    indices, times = uniform_indices(len(everything), 30.0, 8)
    assert indices == [round(x) for x in np.linspace(0, 59, 8)] and indices[0] == 0 and indices[-1] == 59
    assert times == [i / 30.0 for i in indices]
    for reader in ("decord", "pyav"):
        sampled = read_sampled_frames(path, spread(8), reader=reader)
        assert sampled.indices == indices and sampled.times == times
        assert np.array_equal(sampled.frames, everything[indices]), reader
    assert uniform_indices(3, 30.0, 8)[0] == [0, 1, 2]  # a clip shorter than the count: every frame, once


def test_each_variants_request_body_is_the_hand_written_one() -> None:
    """The official protocol's action call under each variant, as the OpenAI-compatible backend sends it."""
    strip, one, two, clip = b"\xff\xd8\xffstrip", b"\xff\xd8\xffone", b"\xff\xd8\xfftwo", b"\0\0\0\x18ftypmp42clip"
    text = official_protocol.action_prompt("video", BEHAVIORS)

    def body(visual: tuple) -> dict[str, Any]:
        return request_body("m", official_protocol.action_request("video", BEHAVIORS, visual=visual))

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    def sent(content: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "model": "m",
            "messages": [{"role": "user", "content": content}],
            "temperature": 0.0,
            "max_tokens": 2000,
        }

    image = {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + b64(strip)}}
    assert body(strip_parts(strip)) == sent([image, {"type": "text", "text": text}])
    assert body(frames_parts([(0.0, one), (1.5, two)])) == sent(
        [
            {"type": "text", "text": "Frame 1 of 2, at 0.00 s:"},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + b64(one)}},
            {"type": "text", "text": "Frame 2 of 2, at 1.50 s:"},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + b64(two)}},
            {"type": "text", "text": text},
        ]
    )
    assert body(native_parts(clip)) == sent(
        [
            {"type": "video_url", "video_url": {"url": "data:video/mp4;base64," + b64(clip)}},
            {"type": "text", "text": text},
        ]
    )
    # the variants' prompt text is the video setting's: only the parts showing the clip differ
    assert official_protocol.action_prompt("video:frames8", BEHAVIORS) == text
    assert strip_parts(strip) == (ImagePart(strip),) and native_parts(clip) == (VideoPart(clip),)
    assert isinstance(frames_parts([(0.0, one)])[0], TextPart)


def workspace(root: Path, model: dict[str, Any], n: int = 3) -> dict[str, Any]:
    """A workspace at ``root`` (items with real context videos, the dataset's descriptions; the frames stage's work is
    the caller's) and its params' egonormia section: the video setting only, every variant, under ``official``."""
    items = make_items(n)
    videos = root / FETCHED / "videos"
    videos.mkdir(parents=True)
    for i, clip in enumerate(items["id"]):
        write_test_video(videos / f"{clip}.mp4", seconds=1.0 + i % 2, fps=15.0)
    items["video"] = [f"videos/{clip}.mp4" for clip in items["id"]]
    items["strip"] = ""
    write_parquet(root / ITEMS, items)
    write_parquet(root / DESCRIPTIONS, from_dataset(items))
    changes = {
        "protocol": "official",
        "frames": {"variants": [{"kind": "strip"}, FRAMES4, NATIVE], "workers": 1, "frame_height": 32},
        "model": model,
        "baselines": [],
        "infer": {"settings": ["video"], "cache_dir": "cache"},
    }
    return write_params(root, {"egonormia": changes})["egonormia"]


@pytest.mark.parametrize("rule", ["openai", "qwen2_vl"])
def test_every_variant_end_to_end_through_the_loopback_endpoint(tmp_path: Path, monkeypatch, rule: str) -> None:
    """The frames stage renders each variant; the loopback endpoint receives and records the multi-image and video
    parts; the estimate before the run counts exactly the run's calls and tokens, the endpoint counting images by
    either token rule (the model entry's token_rule says which); a rerun comes from the cache."""
    monkeypatch.setenv(KEY_ENV, "sk-variants")
    monkeypatch.chdir(tmp_path)
    with OpenAIServer(policy=KeyedPolicy.from_items(make_items(3)), token_rule=rule) as server:
        spec = model_spec(server, video_input=True, token_rule=rule, price={"input": 1.0, "output": 2.0})
        settings = EgoNormiaSettings.model_validate(workspace(tmp_path, spec))
        write_frames(settings.frames)
        predicted = {row["setting"]: row for row in estimate(settings, tmp_path)}
        assert not server.requests  # the estimate sends nothing
        responses = run_inference(*inference_inputs(settings, tmp_path))
        sent = list(server.requests)
        again = run_inference(*inference_inputs(settings, tmp_path))
        assert len(server.requests) == len(sent)  # the rerun: every call from the response cache
    pd.testing.assert_frame_equal(responses, again)
    assert sorted(set(responses["setting"])) == ["video", "video:frames4", "video:native"]
    assert (responses["error"] == "").all(), responses["error"].unique()
    by_parts: dict[str, list[dict[str, Any]]] = {"video": [], "video:frames4": [], "video:native": []}
    for request in sent:
        kinds = [part["type"] for part in request.body["messages"][0]["content"]]
        if "video_url" in kinds:
            by_parts["video:native"].append(request.body)
            assert kinds == ["video_url", "text"]
        elif kinds.count("image_url") == 4:
            by_parts["video:frames4"].append(request.body)
            assert kinds == ["text", "image_url"] * 4 + ["text"]  # each frame after its time stamp, in time order
        else:
            by_parts["video"].append(request.body)
            assert kinds == ["image_url", "text"]
    ledgers = answer_ledgers(responses, {"keyed-vlm": None})
    for setting, bodies in by_parts.items():
        answered = responses[(responses["setting"] == setting) & responses["response"].notna()]
        assert len(bodies) == len(answered) == predicted[setting]["calls"] == predicted[setting]["new"] > 0
        # every image and clip by the endpoint's rule; the text differs only where a justification call quotes the
        # behaviour the estimate's stand-in reply chose (a few characters)
        reported = sum(prompt_usage(body, rule) for body in bodies)
        assert abs(predicted[setting]["prompt_tokens"] - reported) <= 2 * len(bodies)
        # the metrics' ledger: each variant's own calls and the tokens the endpoint reported for them
        assert ledgers[setting, "keyed-vlm"]["calls"] == len(bodies)
        assert ledgers[setting, "keyed-vlm"]["prompt_tokens"] == reported
    frames_body = by_parts["video:frames4"][0]["messages"][0]["content"]
    stamps = [part["text"] for part in frames_body[0:8:2]]
    assert stamps[0] == "Frame 1 of 4, at 0.00 s:" and stamps[-1].startswith("Frame 4 of 4, at ")
    clip = base64.b64decode(by_parts["video:native"][0]["messages"][0]["content"][0]["video_url"]["url"].split(",")[1])
    frames, width, height = mp4_shape(clip)
    assert height == 32 and frames in (5, 10)  # 1 s or 2 s re-encoded at 5 fps, 32 px high
    (tmp_path / "sent.mp4").write_bytes(clip)
    decoded = qwen2_vl_oracle.opencv_frames(tmp_path / "sent.mp4")  # what vLLM hands the processor: every frame
    assert decoded.shape == (frames, height, width, 3)
    assert video_tokens(frames, width, height) == qwen2_vl_oracle.video_tokens(decoded)
    written = (tmp_path / "data/egonormia/frames/frames4/index.parquet", tmp_path / "data/egonormia/frames/native")
    assert written[0].is_file() and written[1].is_dir() and not (tmp_path / RESPONSES).exists()


def test_the_batch_api_asks_a_frames_variant_as_online(tmp_path: Path, monkeypatch) -> None:
    from test_batch import FAST_POLL

    monkeypatch.setenv(KEY_ENV, "sk-variants")
    monkeypatch.chdir(tmp_path)
    with OpenAIServer(policy=KeyedPolicy.from_items(make_items(2))) as server:
        spec = model_spec(server, backend="openai_batch", video_input=True, **FAST_POLL)
        settings = EgoNormiaSettings.model_validate(workspace(tmp_path, spec, n=2))
        write_frames(settings.frames)
        responses = run_inference(*inference_inputs(settings, tmp_path))
    assert server.batches_created >= 1 and all(r.via == "batch" for r in server.requests)
    assert (responses["error"] == "").all() and "video:frames4" in set(responses["setting"])
    frames_calls = [
        r for r in server.requests if sum(p["type"] == "image_url" for p in r.body["messages"][0]["content"]) == 4
    ]
    assert len(frames_calls) == len(
        responses[(responses["setting"] == "video:frames4") & responses["response"].notna()]
    )


@pytest.mark.bad_input
def test_native_to_an_undeclared_endpoint_is_refused_before_any_call(tmp_path: Path, monkeypatch, capsys) -> None:
    from conftest import infer_stage

    from egoeval.core.stage_shell import run_stage

    monkeypatch.setenv(KEY_ENV, "sk-variants")
    monkeypatch.chdir(tmp_path)
    with OpenAIServer(policy=KeyedPolicy.from_items(make_items(3))) as server:
        workspace(tmp_path, model_spec(server, video_input=False))
        code = run_stage(infer_stage, benchmark="egonormia")
        assert not server.requests
    err = capsys.readouterr().err
    assert code == 2 and "egonormia.model.video_input" in err and "video:native" in err, err
    assert "Traceback" not in err


def test_paired_rows_compare_each_variant_with_the_strip_per_model(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    n = 40

    def run(p: float) -> Run:
        right = rng.random(n) < p
        outcome = Outcomes(right, right & (rng.random(n) < 0.8), rng.random(n), np.ones(n, dtype=bool))
        return Run("official", outcome)

    runs = {("video", "m"): run(0.3), ("video:frames8", "m"): run(0.7), ("blind", "m"): run(0.2)}
    score = ScoreSettings(bootstrap_samples=200, bootstrap_seed=0, confidence=0.95)
    table = paired_table(runs, np.ones(n, dtype=bool), "sample", score)
    variant = table[table["setting"] == "video:frames8-video"]
    assert sorted(variant["metric"]) == ["action", "both", "justification", "sensible_iou"]
    assert (variant["model_a"] == "m").all() and (variant["model_b"] == "m").all()
    action = variant[variant["metric"] == "action"].iloc[0]
    assert action["a"] == pytest.approx(100 * runs["video:frames8", "m"].outcomes.action.mean())
    assert action["b"] == pytest.approx(100 * runs["video", "m"].outcomes.action.mean())
    assert "p_holm" in variant.columns and {"video-blind"} <= set(table["setting"])
    (tmp_path / "paired.csv").write_bytes(csv_bytes(table))
    settings = EgoNormiaSettings.model_validate(write_params(tmp_path)["egonormia"])
    shown = compare_models(tmp_path / "paired.csv", {}, settings, "m", "m")
    assert "m: each video variant minus the strip (a = the variant, NOT the official protocol; b = video" in shown
    assert "video:frames8-video" in shown and "m's gains from seeing the clip" in shown


@pytest.mark.bad_input
def test_a_clip_over_max_bytes_or_unreadable_fails_only_itself(tmp_path: Path) -> None:
    from egoeval.core.errors import ArtifactUnavailable
    from egoeval.egonormia.artifacts import VariantStore
    from egoeval.egonormia.frames import extract_variant
    from egoeval.egonormia.settings import FramesSettings

    fetched = tmp_path / "fetched"
    fetched.mkdir()
    write_test_video(fetched / "good.mp4", seconds=1.0, fps=15.0)
    (fetched / "bad.mp4").write_bytes(b"\0\0\0\x18ftypmp42 not a video")
    items = pd.DataFrame({"id": ["bad", "good", "none"], "video": ["bad.mp4", "good.mp4", ""], "strip": ""})
    settings = FramesSettings.model_validate(
        {"source": "video", "reader": "decord", "fps": 1.0, "frame_height": 32, "max_width": 8000}
        | {"jpeg_quality": 90, "workers": 1}
    )
    small = VideoVariant.model_validate({"kind": "native", "max_bytes": 1024})  # the fetched clip as it is: too big
    index = extract_variant(items, fetched, tmp_path / "native", settings, small).set_index("id")
    assert "over the native variant's max_bytes 1,024" in index.loc["good", "error"]
    assert "cannot open video" in index.loc["bad", "error"] and "no context video" in index.loc["none", "error"]
    write_parquet(tmp_path / "native" / "index.parquet", index.reset_index())
    store = VariantStore(tmp_path / "native")
    for clip in ("bad", "good", "none", "unknown"):
        with pytest.raises(ArtifactUnavailable, match=r"^frames unavailable: "):
            store.video(clip)
    frames = extract_variant(items.iloc[1:2], fetched, tmp_path / "frames4", settings, VideoVariant(**FRAMES4))
    write_parquet(tmp_path / "frames4" / "index.parquet", frames)
    (tmp_path / "frames4" / frames["files"].iloc[0][1]).write_bytes(b"GIF89a")  # a frame replaced since
    with pytest.raises(ArtifactUnavailable, match="is not a JPEG"):
        VariantStore(tmp_path / "frames4").images("good")


def test_the_leaderboard_marks_a_variant_and_never_ranks_published_figures_in_it() -> None:
    import re

    from test_html_report import entry, published_table

    from egoeval.egonormia.report import leaderboard, ledger_section

    metrics = {"video": {"m": entry(30.0, 10.0)}, "video:frames8": {"m": entry(40.0, 20.0)}}
    page = leaderboard(metrics, {"tables": [published_table("g")]}, "ood_robot")
    strip, variant = page.split("<h3>video</h3>")[1].split("<h3>video:frames8")
    assert variant.startswith(' <span class="tag">not the official protocol</span></h3>')
    assert "published · eval" in strip  # ranked among ours in the official setting only
    variant_rows = re.findall(r"<tr>(.*?)</tr>", variant.split("<tbody>")[1].split("</tbody>")[0])
    assert len(variant_rows) == 1 and "published" not in variant_rows[0] and "<td>m</td>" in variant_rows[0]
    ledger = ledger_section(metrics)  # every table that shows a variant's rows marks them
    assert '<td>video:frames8 <span class="tag">not the official protocol</span></td>' in ledger
    assert "<td>video</td>" in ledger


@pytest.mark.slow
def test_every_variant_through_dvc_repro_with_the_cache_a_kill_and_a_resume(tmp_path: Path) -> None:
    """``dvc repro`` in a fresh copy asks the loopback endpoint under every variant; SIGKILLed mid-run, the rerun sends
    only what the response cache lacks; a forced rerun sends nothing and writes the same responses."""
    import os
    import signal
    import sqlite3
    import subprocess
    import time

    from conftest import copy_repo, dvc, tool_env

    root = copy_repo(tmp_path / "repo")
    with OpenAIServer(latency_s=0.2) as server:
        model = {"backend": "openai", "name": "loopback-vlm", "base_url": server.url, "api_key_env": KEY_ENV}
        model |= {"concurrency": 2, "timeout_s": 30, "max_retries": 0, "video_input": True}
        variants = [{"kind": "strip"}, FRAMES4, NATIVE]
        changes = {"model": model, "baselines": [], "fetch": {"limit": 4}, "frames": {"variants": variants}}
        write_params(root, {"egonormia": changes | {"infer": {"settings": ["video"]}}})
        env = tool_env(**{KEY_ENV: "sk-variants"})
        ready = dvc(root, "repro", "egonormia_describe")
        assert ready.returncode == 0, ready.stdout[-2000:] + ready.stderr[-2000:]
        server.policy = KeyedPolicy.from_items(pd.read_parquet(root / ITEMS))  # every answer usable: every call made
        run = subprocess.Popen(
            ["dvc", "repro", "egonormia_infer"], cwd=root, env=env, start_new_session=True, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 300
        while len(server.requests) < 6:
            assert time.monotonic() < deadline and run.poll() is None, "no model calls"
            time.sleep(0.02)
        os.killpg(run.pid, signal.SIGKILL)
        run.communicate(timeout=60)
        with sqlite3.connect(root / ".egoeval-cache/responses.sqlite") as db:
            kept = db.execute("SELECT count(*) FROM responses").fetchone()[0]
        first = len(server.requests)
        resumed = dvc(root, "repro", "egonormia_infer", **{KEY_ENV: "sk-variants"})
        assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
        second = len(server.requests) - first
        written = (root / RESPONSES).read_bytes()
        forced = dvc(root, "repro", "-f", "-s", "egonormia_infer", **{KEY_ENV: "sk-variants"})
        assert forced.returncode == 0, forced.stdout[-2000:] + forced.stderr[-2000:]
        assert len(server.requests) == first + second  # every answer from the response cache
    responses = pd.read_parquet(root / RESPONSES)
    assert (root / RESPONSES).read_bytes() == written
    assert sorted(set(responses["setting"])) == ["video", "video:frames4", "video:native"]
    assert (responses["error"] == "").all() and not responses["response"].isna().any()
    calls = responses["request_key"].nunique()
    assert 0 < kept < calls and second == calls - kept  # the rerun paid only for what the killed run had not kept
    kinds = {tuple(p["type"] for p in r.body["messages"][0]["content"]) for r in server.requests}
    assert kinds == {("image_url", "text"), ("text", "image_url") * 4 + ("text",), ("video_url", "text")}


def test_a_reencoded_clip_is_the_same_bytes_every_time(tmp_path: Path) -> None:
    """The native variant's clip enters its requests' keys: a rerun of the frames stage must not move them."""
    from egoeval.video import encode_mp4

    frames = np.random.default_rng(0).integers(0, 256, (10, 33, 49, 3), dtype=np.uint8)
    first = encode_mp4(frames, 5.0)
    assert first == encode_mp4(frames, 5.0) and first[4:8] == b"ftyp"
    assert mp4_shape(first) == (10, 48, 32)  # odd sides cut to even
