"""``egoeval report``: the disagreement search against brute force, the SVG charts, and the page on a reproduced
workspace (self-contained, byte-identical on a rerun, clear errors for missing inputs)."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, copy_workspace, tool_env
from hypothesis import given, settings
from hypothesis import strategies as st

from egoeval.charts import grouped_bars
from egoeval.egohumans.disagreement import (
    MISSED,
    OK,
    SWITCHED,
    frame_disagreement,
    match_frame,
    most_disputed,
    person_states,
)
from egoeval.egonormia.report import leaderboard

PAGE = Path("reports/index.html")


def boxes(rows: list[tuple[int, int, float, float, float, float]]) -> pd.DataFrame:
    """MOT rows (frame, id, x, y, w, h) with conf 1."""
    frame = pd.DataFrame(rows, columns=["frame", "id", "x", "y", "w", "h"])
    frame["conf"] = 1.0
    return frame.astype({"frame": np.int64, "id": np.int64})


def iou(a: pd.Series, b: pd.Series) -> float:
    width = max(0.0, min(a.x + a.w, b.x + b.w) - max(a.x, b.x))
    height = max(0.0, min(a.y + a.h, b.y + b.h) - max(a.y, b.y))
    inter = width * height
    union = a.w * a.h + b.w * b.h - inter
    return inter / union if union > 0 else 0.0


def best_total(gt: pd.DataFrame, pred: pd.DataFrame, threshold: float) -> float:
    """Brute force: the largest total IoU of a one-to-one matching using only pairs at or above the threshold."""
    best = 0.0
    slots = list(range(len(pred))) + [None] * len(gt)
    for choice in set(itertools.permutations(slots, len(gt))):
        total = 0.0
        for g, p in enumerate(choice):
            if p is not None:
                value = iou(gt.iloc[g], pred.iloc[p])
                total += value if value >= threshold else -1e9
        best = max(best, total)
    return best


BOX = st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(1, 5), st.integers(1, 5))


@settings(max_examples=150, deadline=None)
@given(st.lists(BOX, max_size=4), st.lists(BOX, max_size=4), st.sampled_from([0.1, 0.3, 0.5]))
def test_frame_matching_is_the_best_one_to_one_assignment(gt_boxes, pred_boxes, threshold) -> None:
    gt = boxes([(1, i + 1, *b) for i, b in enumerate(gt_boxes)])
    pred = boxes([(1, 100 + i, *b) for i, b in enumerate(pred_boxes)])
    matches = match_frame(gt, pred, threshold)
    assert len(set(matches.values())) == len(matches)  # one to one
    by_id = {int(r.id): r for _, r in pd.concat([gt, pred]).iterrows()}
    assert all(iou(by_id[g], by_id[p]) >= threshold - 1e-12 for g, p in matches.items())
    total = sum(iou(by_id[g], by_id[p]) for g, p in matches.items())
    assert total == pytest.approx(best_total(gt, pred, threshold), abs=1e-9)


def test_states_name_the_switch_and_the_miss() -> None:
    gt = boxes([(f, 1, 10, 10, 20, 40) for f in range(1, 6)])
    pred = boxes([(1, 10, 10, 10, 20, 40), (2, 10, 11, 10, 20, 40), (3, 11, 10, 10, 20, 40), (5, 11, 10, 10, 20, 40)])
    states = person_states(gt, pred, 0.5)
    assert states["state"].tolist() == [OK, OK, SWITCHED, MISSED, OK]
    assert states["track_id"].tolist() == [10, 10, 11, -1, 11]


def reference_states(gt: pd.DataFrame, pred: pd.DataFrame, threshold: float) -> list[tuple[int, int, int, str]]:
    """The states by their definition: frame by frame (rows in file order), each frame's best assignment
    (match_frame), a person switched when matched to another track than the last time."""
    rows, last = [], {}
    for frame, group in gt.iloc[np.argsort(gt["frame"].to_numpy(), kind="stable")].groupby("frame", sort=True):
        matches = match_frame(group, pred[pred["frame"] == frame], threshold)
        for gt_id in group["id"].tolist():
            track = matches.get(gt_id)
            if track is None:
                rows.append((frame, gt_id, -1, MISSED))
                continue
            rows.append((frame, gt_id, track, SWITCHED if last.get(gt_id, track) != track else OK))
            last[gt_id] = track
    return rows


FRAME_BOX = st.tuples(
    st.integers(1, 4), st.integers(0, 3), st.integers(0, 6), st.integers(0, 6), st.integers(1, 5), st.integers(1, 5)
)


@settings(max_examples=150, deadline=None)
@given(st.lists(FRAME_BOX, max_size=14), st.lists(FRAME_BOX, max_size=14), st.sampled_from([0.1, 0.3, 0.5]))
def test_person_states_are_each_frames_best_assignment_in_order(gt_rows, pred_rows, threshold) -> None:
    """Frames where no box has two candidates take every candidate pair at once: the same as solving each frame."""
    gt = boxes(gt_rows).drop_duplicates(["frame", "id"]).reset_index(drop=True)
    runs = {
        "a": boxes(pred_rows).drop_duplicates(["frame", "id"]).reset_index(drop=True),
        "b": boxes(pred_rows[::-1]).drop_duplicates(["frame", "id"]).reset_index(drop=True),
    }
    for pred in runs.values():
        states = person_states(gt, pred, threshold)
        assert list(states.itertuples(index=False, name=None)) == reference_states(gt, pred, threshold)
    table = frame_disagreement(gt, runs, threshold)
    if len(gt):
        states = {run: pd.DataFrame(reference_states(gt, pred, threshold)) for run, pred in runs.items()}
        people = pd.DataFrame({run: s[3] for run, s in states.items()}).nunique(axis=1) > 1
        assert table["people"].tolist() == people.groupby(states["a"][0]).sum().tolist()
        assert table["frame"].tolist() == sorted(set(gt["frame"]))


def test_disagreement_counts_people_whose_fate_differs_and_picks_spread_frames() -> None:
    gt = boxes([(f, p, 30 * p, 10, 20, 40) for f in range(1, 41) for p in (1, 2)])
    perfect = gt.assign(id=gt["id"] + 100)
    broken = perfect[~perfect["frame"].isin([5, 6, 30])]  # both people missed in frames 5, 6 and 30
    table = frame_disagreement(gt, {"perfect": perfect, "broken": broken}, 0.5).set_index("frame")
    assert table.loc[5, "people"] == 2 and table.loc[4, "people"] == 0
    assert table.loc[30, "missed:broken"] == 2 and table.loc[30, "missed:perfect"] == 0
    # frame 7 is where "broken" picks its people up again with the same ids: not a switch
    assert table["switched:broken"].sum() == 0
    picked = most_disputed({"s": (gt, {"perfect": perfect, "broken": broken})}, 0.5, count=5, gap=10)
    assert [(p.sequence, p.frame) for p in picked] == [("s", 5), ("s", 30)]  # frame 6 is within the gap of 5
    assert most_disputed({"s": (gt, {"a": perfect, "b": perfect})}, 0.5, count=3, gap=1) == []


def test_charts_are_inline_svg_with_prefixed_ids_and_identical_on_rerun() -> None:
    table = pd.DataFrame(
        [("blind", "Safety", "m1", 50.0), ("blind", "Safety", "m2", 25.0), ("video", "Privacy", "m1", 100.0)],
        columns=["setting", "category", "model", "accuracy"],
    )
    svg = grouped_bars(table, "setting", "category", "model", "accuracy", "%", "chart-a")
    assert svg.startswith("<svg ") and svg.rstrip().endswith("</svg>")
    ids = re.findall(r'\bid="([^"]+)"', svg)
    assert ids and all(i.startswith("chart-a-") for i in ids)
    assert all(ref.startswith("chart-a-") for ref in re.findall(r'(?:href="#|url\(#)([^")]+)', svg))
    assert "<text" not in svg  # text drawn as paths: no font needed to view it
    assert svg == grouped_bars(table, "setting", "category", "model", "accuracy", "%", "chart-a")


def _legend_entries(svg: str, prefix: str) -> tuple[list[str], float, float]:
    """The legend's swatch styles (its frame left out), the legend's lowest y and the first axes' top y (SVG units)."""
    legend = svg[svg.index(f'id="{prefix}-legend_1"') :]
    swatches = [part.split("</g>", 1)[0] for part in re.split(rf'<g id="{prefix}-patch_\d+">', legend)[2:]]
    styles = [" ".join(re.findall(r'style="([^"]*)"', swatch)) for swatch in swatches]
    frame = [float(y) for y in re.findall(r"L [\d.]+ ([\d.]+)", legend.split("</g>", 1)[0])]
    axes = svg[svg.index(f'id="{prefix}-axes_1"') :]
    top = min(float(y) for y in re.findall(r"L [\d.]+ ([\d.]+)", axes.split("</g>", 1)[0]))
    return styles, max(frame), top


@pytest.mark.parametrize("runs", [10, 12, 25])
def test_grouped_bars_give_every_series_its_own_look_and_the_legend_on_top(runs: int) -> None:
    table = pd.DataFrame(
        [(m, "COMBINED", f"tracker{r}-gt", 40.0 + r) for m in ("IDF1", "MOTA", "HOTA") for r in range(runs)],
        columns=["metric", "sequence", "run", "value"],
    )
    svg = grouped_bars(table, "metric", "sequence", "run", "value", "%", "runs")
    styles, legend_bottom, axes_top = _legend_entries(svg, "runs")
    assert len(styles) == runs and len(set(styles)) == runs  # no two runs drawn alike
    assert legend_bottom <= axes_top  # the legend stands above the bars, not below them
    height = float(re.search(r'height="([\d.]+)pt"', svg).group(1))
    assert height <= 0.75 * 900  # points: at most 900 px on the page


def test_grouped_bars_write_each_bars_n() -> None:
    table = pd.DataFrame(
        [("video", "cooperation", "chance", 100.0, 1), ("video", "safety", "chance", 50.0, 12)],
        columns=["setting", "category", "model", "accuracy", "n"],
    )
    svg = grouped_bars(table, "setting", "category", "model", "accuracy", "%", "cat", count="n")
    assert "<!-- n=1 -->" in svg and "<!-- n=12 -->" in svg  # matplotlib keeps each text as a comment


def test_charts_do_not_depend_on_the_machines_font_cache() -> None:
    """A font cache listing a system DejaVu Sans of another version first (or only) once changed a report's glyphs
    between two clones: charts draw with matplotlib's own copy whatever the cache lists."""
    from matplotlib import font_manager

    from egoeval.charts import BUNDLED_FONTS, FAMILY, use_bundled_font

    table = pd.DataFrame([("blind", "Safety", "fig", 50.0)], columns=["setting", "category", "model", "accuracy"])
    manager = font_manager.fontManager
    saved = list(manager.ttflist)
    system = [e for e in saved if e.name == FAMILY and not any(e.fname == str(p) for p in BUNDLED_FONTS)]
    svgs = []
    try:
        for listed in ([], system, system[::-1]):  # the cache lists no DejaVu, or only other copies
            manager.ttflist = [e for e in saved if e.name != FAMILY] + listed
            use_bundled_font.cache_clear()
            svgs.append(grouped_bars(table, "setting", "category", "model", "accuracy", "%", "c"))
            found = font_manager.findfont(font_manager.FontProperties(family=FAMILY))
            assert found == str(BUNDLED_FONTS[0])
    finally:
        manager.ttflist = saved
        use_bundled_font.cache_clear()
        manager.addfont(BUNDLED_FONTS[0])  # clears findfont's cache
    assert svgs[0] == svgs[1] == svgs[2]


def entry(action: float, both: float) -> dict[str, object]:
    values = {"action": action, "justification": both, "both": both, "sensible_iou": 20.0}
    return {
        **values,
        "protocol": "official",
        "n": 16,
        "coverage": 1.0,
        "parse_failure_rate": 0.0,
        "call_failure_rate": 0.0,
        "ci95": {k: [v - 5, v + 5] for k, v in values.items()},
    }


PUBLISHED_FIGURES = {"action": 45.5, "justification": 18.2, "both": 9.1, "sensible_iou": 25.0, "n": 11}


def published_table(model: str) -> dict:
    """A published-results table (ood_robot, full split, eval) with ``model``'s PUBLISHED_FIGURES in the video
    setting, its source named."""
    table = {"dataset": "ood_robot", "split": "full", "as": "eval", "primary": True}
    table |= {"figures": {"video": {model: dict(PUBLISHED_FIGURES)}}}  # a copy: a test may change it
    return table | {"repository": "o/r", "commit": "c0ffee", "path": "a results file", "licence": "MIT", "sha256": "ab"}


def test_the_leaderboard_ranks_by_both_with_intervals_and_shows_published_figures_apart() -> None:
    metrics = {"video": {"weak": entry(30.0, 10.0), "strong": entry(20.0, 15.0), "protocol": "official"}}
    table = published_table("gpt-4o")
    published = {"tables": [table]}
    page = leaderboard(metrics, published, "ood_robot")  # our rows are the published dataset, split and protocol
    rows = re.findall(r"<tr>(.*?)</tr>", page.split("<tbody>")[1])
    what = "<td>official</td><td>ood_robot</td><td>full</td>"
    assert rows[0].startswith(f"<td>1</td><td>strong</td>{what}<td>16</td>")  # ranked by both: 15 before 10
    assert "[10.0, 20.0]" in rows[0] and rows[1].startswith("<td>2</td><td>weak</td>")
    assert rows[2].startswith("<td>3</td><td>gpt-4o") and "published · eval" in rows[2]  # ranked among ours
    assert f"{what}<td>11</td>" in rows[2] and "<i>45.5</i>" in rows[2]
    assert "ood_robot, full split, eval: o/r a results file at commit c0ffee" in page and "apart" not in page
    missing = leaderboard(metrics, published, "egonormia")
    assert "No published figures of dataset egonormia, full split are bundled (figures for: ood_robot/full)" in missing
    assert "No published figures of dataset ood_robot, verified split" in leaderboard(
        metrics, published, "ood_robot", "verified"
    )
    table["figures"]["video"]["gpt-4o"]["n"] = None  # a source that gives no n says so
    assert "<td>None</td>" not in leaderboard(metrics, published, "ood_robot")
    assert "<td>not given</td>" in leaderboard(metrics, published, "ood_robot")


def test_the_sample_is_never_ranked_among_published_rows_and_ties_share_a_rank() -> None:
    metrics = {"video": {"b-model": entry(30.0, 75.0), "A-model": entry(20.0, 75.0), "c": entry(1.0, 1.0)}}
    figures = {"action": 72.3, "justification": 67.2, "both": 66.4, "sensible_iou": 56.2, "n": None}
    table = {"dataset": "egonormia", "split": "full", "as": "leaderboard", "primary": True}
    table |= {"repository": "o/r", "commit": "c0ffee", "path": "p", "licence": "MIT", "sha256": "ab"}
    published = {"tables": [table | {"figures": {"video": {"Gemini": figures}}}]}
    page = leaderboard(metrics, published, "egonormia", "full", {"dataset": "sample", "split": "full"})
    ours, apart = page.split('<h4 class="apart">')
    rows = re.findall(r"<tr>(.*?)</tr>", ours.split("<tbody>")[1])
    assert [re.findall(r"<td>(.*?)</td>", row)[:6] for row in rows] == [
        ["1", "A-model", "official", "sample", "full", "16"],  # a tie shares rank 1; names by case-folded order
        ["1", "b-model", "official", "sample", "full", "16"],
        ["3", "c", "official", "sample", "full", "16"],
    ]
    assert "Gemini" not in ours and "published ·" not in ours
    assert "Not comparable with the rows above" in apart and "dataset sample (published: egonormia)" in apart
    (published_row,) = re.findall(r"<tr>(.*?)</tr>", apart.split("<tbody>")[1])
    assert re.findall(r"<td>(.*?)</td>", published_row)[:6] == [
        "1",
        "Gemini",
        "official",
        "egonormia",
        "full",
        "not given",
    ]


def test_the_cost_table_shows_each_runs_ledger_and_says_what_was_not_reported() -> None:
    from egoeval.egonormia.report import ledger_section

    paid = {"calls": 1234, "prompt_tokens": 2_345_678, "completion_tokens": 4567, "cost_usd": 5.910865}
    paid |= {"calls_without_usage": 0, "cost_is_lower_bound": False}
    partly = paid | {"calls_without_usage": 34, "cost_is_lower_bound": True}  # some calls reported no usage
    local = dict.fromkeys(paid) | {"calls": 48, "calls_without_usage": 48}
    metrics = {
        "video": {"gpt": entry(30.0, 10.0) | {"ledger": paid}, "gpt-partly": {"ledger": partly}},
        "blind": {"chance": {"ledger": local}},
    }
    page = ledger_section(metrics)
    rows = [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", page.split("<tbody>")[1])]
    assert rows == [  # settings in the benchmark's order; thousands separated; what no call reported is a dash
        ["blind", "chance", "48", "48", "–", "–", "–"],
        ["video", "gpt", "1,234", "0", "2,345,678", "4,567", "5.9109"],
        ["video", "gpt-partly", "1,234", "34", "2,345,678", "4,567", "≥ 5.9109"],  # a lower bound, said so
    ]


def test_a_served_model_and_a_smoke_run_are_said_beside_the_models_numbers() -> None:
    served = entry(30.0, 10.0) | {"ledger": {"calls": 48}, "served_models": {"vlm-2026-01-01": 40, "vlm": 8}}
    smoke = entry(20.0, 5.0) | {"limit": {"clips": 8, "seed": 0}}
    page = leaderboard({"video": {"vlm": served, "chance": smoke}}, {"tables": []}, "egonormia")
    rows = {
        cells[1].split(" ")[0]: cells
        for cells in (
            re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", page.split("<tbody>")[1])
        )
    }
    assert "served as vlm-2026-01-01 (40 of 48 calls), vlm (8 of 48 calls)" in rows["vlm"][1]
    assert "smoke run" not in rows["vlm"][1] and "served" not in rows["chance"][1]
    assert '<span class="tag smoke">smoke run: limit 8</span>' in rows["chance"][1]
    assert "<i>served as</i>: the endpoint named another model" in page  # explained where it is shown, only there
    assert "<i>served as</i>" not in leaderboard({"video": {"chance": smoke}}, {"tables": []}, "egonormia")


def test_the_paired_caption_names_the_data_the_metrics_were_scored_on() -> None:
    from egoeval.egonormia.paired import recorded_data
    from egoeval.egonormia.report import paired_section

    sample = {"video": {"chance": entry(1.0, 1.0) | {"dataset": "sample", "split": "full", "items": 16}}}
    caption = paired_section(pd.DataFrame(), ["official"], recorded_data(sample), 0.95)
    assert "dataset egonormia" not in caption
    assert "dataset sample, the bundled synthetic sample (not EgoNormia&#x27;s clips), full split, 16 clips;" in caption
    smoke = {"video": {"m": entry(1.0, 1.0) | {"dataset": "egonormia", "split": "verified", "items": 8}}}
    smoke["video"]["m"]["limit"] = {"clips": 8, "seed": 3}
    assert recorded_data(smoke) == (
        "dataset egonormia, verified split, 8 clips (a smoke run: egonormia.fetch.limit 8, seed 3)"
    )


def test_the_params_digest_is_of_the_values_not_the_files_layout(tmp_path: Path) -> None:
    import yaml

    from egoeval.core.settings import load_settings
    from egoeval.markup import params_digest

    params = yaml.safe_load((REPO / "params.yaml").read_text())
    (tmp_path / "same.yaml").write_text(yaml.safe_dump(params, sort_keys=True, width=60))  # no comments, reordered
    params["egonormia"]["score"]["bootstrap_samples"] = 999
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(params))
    digests = {
        name: params_digest(load_settings(path).egonormia)
        for name, path in (
            ("ours", REPO / "params.yaml"),
            ("same", tmp_path / "same.yaml"),
            ("other", tmp_path / "other.yaml"),
        )
    }
    assert digests["ours"] == digests["same"] != digests["other"] and re.fullmatch(r"[0-9a-f]{64}", digests["ours"])


@pytest.mark.bad_input
def test_a_file_the_provenance_names_is_hashed_or_named_missing(tmp_path: Path) -> None:
    import hashlib

    from egoeval.core.errors import InputError
    from egoeval.markup import file_digests

    (tmp_path / "a.json").write_text("{}")
    assert file_digests(tmp_path, ["a.json"]) == f"a.json sha256 {hashlib.sha256(b'{}').hexdigest()}"
    with pytest.raises(InputError, match=r"data/manifest\.sha256: file not found"):
        file_digests(tmp_path, ["a.json", "data/manifest.sha256"])


def report(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "egoeval.cli", "report", *args]
    return subprocess.run(command, cwd=root, env=tool_env(), capture_output=True, text=True, check=False)


@pytest.mark.slow
def test_the_stage_writes_a_self_contained_page_that_a_rerun_reproduces(reproduced: Path, tmp_path: Path) -> None:
    page = (reproduced / PAGE).read_text(encoding="utf-8")
    for section in (
        "egonormia-leaderboard",
        "egonormia-categories",
        "egonormia-ledger",
        "egonormia-clips",
        "egohumans-runs",
        "egohumans-crossview",
        "egohumans-frames",
    ):
        assert f'<section id="{section}">' in page
    # nothing is fetched from elsewhere: every image is a data: URI, no stylesheet or script is linked; the only
    # links lead to the clips' logs beside the page (reports/clips/, the egonormia_clip_logs stage)
    sources = [s for s in re.findall(r'(?:src|href)="([^"#][^"]*)"', page) if not s.startswith("clips/")]
    assert sources and all(s.startswith("data:image/") for s in sources), {s[:40] for s in sources}
    assert "<link" not in page and "@import" not in page and "url(http" not in page
    assert page.count('<article class="clip"') == 16 and page.count('<img class="frames"') == 16
    assert page.count('<div class="disagreement">') == 4
    assert page.count('<table class="tracking">') == 3  # IDF1, MOTA, HOTA: sequences x (tracker, mode)
    # the sample is not the published data: its runs stand apart from the published rows egohumans.compare maps
    assert "bytetrack-file: IDF1" not in page and "<code>bytetrack-file</code> (mapped to ByteTrack)" in page
    # the leaderboard shows every (setting, model) with its interval, and the categories chart is there
    # (blind, pipeline, video and the sample's second video variant, marked as not the official protocol)
    assert page.count('<table class="leaderboard">') == 4 and "[95% CI]" in page
    assert '<h3>video:frames8 <span class="tag">not the official protocol</span></h3>' in page
    assert re.search(r'<figure class="category-chart"><svg ', page)
    again = report(reproduced, "--out", str(tmp_path / "again.html"))
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again.html").read_text(encoding="utf-8") == page


MADE = re.compile(r"<tr><td>made</td><td>([^<]*)</td></tr>")


@pytest.mark.slow
def test_a_stamped_copy_says_when_and_from_which_commit_and_the_pipelines_page_stays_as_it_was(
    reproduced: Path, tmp_path: Path
) -> None:
    page = (reproduced / PAGE).read_text(encoding="utf-8")
    assert not MADE.search(page)  # the pipeline's page: no time, no commit
    before = datetime.now(UTC).replace(microsecond=0)
    stamped = report(reproduced, "--stamp", "--out", str(tmp_path / "shared.html"))
    after = datetime.now(UTC)
    assert stamped.returncode == 0, stamped.stderr
    copy = (tmp_path / "shared.html").read_text(encoding="utf-8")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=reproduced, capture_output=True, text=True, check=True)
    when, commit = MADE.search(copy).group(1).split(", ", 1)
    assert before <= datetime.strptime(when, "%Y-%m-%d %H:%M:%S UTC").replace(tzinfo=UTC) <= after
    # the reproduced workspace is its commit when dvc repro rewrote every output as committed (dvc.lock fresh)
    status = ["git", "status", "--porcelain", "--untracked-files=no"]
    clean = not subprocess.run(status, cwd=reproduced, capture_output=True, text=True, check=True).stdout.strip()
    assert commit == f"commit {head.stdout.strip()}" + ("" if clean else " with uncommitted changes")
    # a tracked file changed since that commit is said (in a copy: the reproduced workspace is shared)
    changed = copy_workspace(reproduced, tmp_path / "ws")
    (changed / "params.yaml").write_text((changed / "params.yaml").read_text() + "\n")
    assert report(changed, "--stamp", "--out", str(tmp_path / "changed.html")).returncode == 0
    changed_copy = (tmp_path / "changed.html").read_text(encoding="utf-8")
    assert MADE.search(changed_copy).group(1).endswith(f"commit {head.stdout.strip()} with uncommitted changes")
    provenance = '<section id="provenance">'
    assert copy.split(provenance)[0] == page.split(provenance)[0]  # everything else is the pipeline's page
    rows = re.findall(r"<tr>.*?</tr>", page.split(provenance)[1])
    assert re.findall(r"<tr>.*?</tr>", copy.split(provenance)[1]) == [*rows, MADE.search(copy).group(0)]
    refused = report(reproduced, "--stamp")  # never over the pipeline's page
    assert refused.returncode == 2 and "--stamp writes a copy to share" in refused.stderr, refused.stderr
    assert (reproduced / PAGE).read_text(encoding="utf-8") == page


@pytest.mark.slow
@pytest.mark.bad_input
def test_a_missing_input_is_named(reproduced: Path, tmp_path: Path) -> None:
    root = copy_workspace(reproduced, tmp_path / "repo")
    (root / "data/egonormia/predictions.parquet").unlink()
    result = report(root, "--out", str(tmp_path / "page.html"))
    assert result.returncode == 2
    assert "data/egonormia/predictions.parquet: file not found (run the stages before this one)" in result.stderr
    assert not (tmp_path / "page.html").exists()
