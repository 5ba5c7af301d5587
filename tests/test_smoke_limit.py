"""Smoke runs: egonormia.fetch.limit (a seeded sample stratified by norm category) and egohumans.fetch.limit."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, copy_workspace, dvc, write_params
from hypothesis import given
from hypothesis import strategies as st
from test_egohumans_official_layout import SET, build_official_download

from egoeval.egohumans.fetching import fetch as egohumans_fetch
from egoeval.egohumans.fetching import write_root_manifest
from egoeval.egohumans.settings import FetchSettings as EgoHumansFetch
from egoeval.egonormia.fetching import fetch
from egoeval.egonormia.schema import CATEGORIES, N_OPTIONS, limit_items, read_folder, stratified_quotas, stratum
from egoeval.egonormia.settings import FetchSettings

SAMPLE = REPO / "data" / "egonormia" / "sample"
STRATA = (*CATEGORIES, "none")


def items_table(correct_labels: list[list[str]]) -> pd.DataFrame:
    """Items whose correct option (index 1) carries the given categories; the other columns as the schema has them."""
    n = len(correct_labels)
    return pd.DataFrame(
        {
            "id": [f"clip-{k:05d}" for k in range(n)],
            "correct_idx": [1] * n,
            "taxonomy": [[["Safety"], labels, [], [], []] for labels in correct_labels],
        }
    )


labels = st.lists(st.sampled_from(CATEGORIES), max_size=3, unique=True)


@given(st.dictionaries(st.sampled_from(STRATA), st.integers(1, 400), min_size=1), st.integers(1, 2000))
def test_quotas_are_each_within_one_clip_of_the_proportional_share(sizes: dict[str, int], limit: int) -> None:
    quotas = stratified_quotas(sizes, limit)
    total = sum(sizes.values())
    assert sum(quotas.values()) == min(limit, total)
    for name, size in sizes.items():
        exact = Fraction(min(limit, total) * size, total)
        assert 0 <= quotas[name] <= size and abs(quotas[name] - exact) < 1, (name, quotas, exact)


@given(st.lists(labels, min_size=1, max_size=300), st.integers(1, 300), st.integers(0, 2**32 - 1))
def test_a_limited_sample_is_stratified_seeded_and_deterministic(
    correct_labels: list[list[str]], limit: int, seed: int
) -> None:
    items = items_table(correct_labels)
    sample = limit_items(items, limit, seed)
    assert len(sample) == min(limit, len(items))
    assert sample["id"].is_monotonic_increasing and set(sample["id"]) <= set(items["id"])
    assert sample.equals(limit_items(items, limit, seed))  # the same seed, the same clips
    strata = items.assign(stratum=[stratum(t, k) for t, k in zip(items["taxonomy"], items["correct_idx"], strict=True)])
    sizes = strata["stratum"].value_counts()
    drawn = strata[strata["id"].isin(sample["id"])]["stratum"].value_counts()
    for name, size in sizes.items():  # every category in proportion, within one clip
        assert abs(drawn.get(name, 0) - Fraction(len(sample) * int(size), len(items))) < 1, (name, drawn, sizes)


def test_the_stratum_is_the_correct_options_first_category() -> None:
    taxonomy = [[] for _ in range(N_OPTIONS)]
    taxonomy[2] = ["Politeness", "Safety"]
    assert stratum(taxonomy, 2) == "Safety"  # CATEGORIES order, not the file's
    assert stratum(taxonomy, 0) == "none"


def test_different_seeds_draw_different_clips() -> None:
    items = items_table([[CATEGORIES[k % 3]] for k in range(90)])
    draws = {tuple(limit_items(items, 9, seed)["id"]) for seed in range(5)}
    assert len(draws) > 1


def sample_fetch_settings(**changes: object) -> FetchSettings:
    base = yaml.safe_load((REPO / "params.yaml").read_text())["egonormia"]["fetch"]
    base.update(path=str(SAMPLE), manifest=str(SAMPLE / "manifest.sha256"), **changes)
    return FetchSettings.model_validate(base)


def test_fetch_with_a_limit_copies_only_the_sampled_clips(tmp_path: Path) -> None:
    everything = read_folder(SAMPLE, "egonormia")
    items = fetch(sample_fetch_settings(limit=6, limit_seed=3), tmp_path / "fetched")
    assert list(items["id"]) == list(limit_items(everything, 6, 3)["id"])
    assert list(pd.read_parquet(tmp_path / "fetched" / "items.parquet")["id"]) == list(items["id"])
    media = {p.stem for sub in ("videos", "strips") for p in (tmp_path / "fetched" / sub).iterdir()}
    assert media <= set(items["id"])  # only the sampled clips' media is copied


def test_no_limit_fetches_every_clip_byte_for_byte_as_before(tmp_path: Path) -> None:
    """limit null (the default) is the whole split: the same table as a fetch without the key at all."""
    fetch(sample_fetch_settings(), tmp_path / "default")
    fetch(sample_fetch_settings(limit=10_000), tmp_path / "large")
    assert len(pd.read_parquet(tmp_path / "default" / "items.parquet")) == len(read_folder(SAMPLE, "egonormia"))
    for name in ("items.parquet",):
        assert (tmp_path / "default" / name).read_bytes() == (tmp_path / "large" / name).read_bytes()


@pytest.mark.bad_input
@pytest.mark.parametrize(("key", "value"), [("egonormia", 0), ("egonormia", "ten"), ("egohumans", -1)])
def test_a_bad_limit_exits_2_naming_the_key(tmp_path: Path, key: str, value: object) -> None:
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params[key]["fetch"]["limit"] = value
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    run = subprocess.run(
        [sys.executable, "-m", f"stages.{key}.fetch"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": str(Path(sys.executable).parent)},
    )
    assert run.returncode == 2, run.stderr
    assert f"{key}.fetch.limit" in run.stderr and "Traceback" not in run.stderr
    assert list(tmp_path.iterdir()) == [tmp_path / "params.yaml"]


@pytest.mark.slow
def test_dvc_repro_with_limits_is_a_smoke_run(reproduced: Path, tmp_path: Path) -> None:
    root = copy_workspace(reproduced, tmp_path / "repo")
    write_params(root, {"egonormia": {"fetch": {"limit": 5, "limit_seed": 1}}, "egohumans": {"fetch": {"limit": 1}}})
    run = dvc(root, "repro")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    items = pd.read_parquet(root / "data/egonormia/fetched/items.parquet")
    assert list(items["id"]) == list(limit_items(read_folder(SAMPLE, "egonormia"), 5, 1)["id"])
    metrics = json.loads((root / "metrics/egonormia.json").read_text())
    entries = [entry for models in metrics.values() for entry in models.values()]
    assert entries and all(entry["limit"] == {"clips": 5, "seed": 1} and entry["n"] <= 5 for entry in entries)
    sequences = json.loads((root / "data/egohumans/fetched/sequences.json").read_text())
    assert sequences["limit"] == 1 and len(sequences["sequences"]) == 1
    scored = pd.read_csv(root / "plots/egohumans/sequences.csv")
    assert set(scored["sequence"]) - {"COMBINED"} == {sequences["sequences"][0]["name"]}
    # the page labels the smoke run under the heading of every section of both benchmarks
    page = (root / "reports/index.html").read_text(encoding="utf-8")
    sections = re.findall(r'<section id="(egonormia-\w+|egohumans-\w+)"><h2>[^<]*</h2>(<p class="smoke">)?', page)
    assert len(sections) == 9 and [anchor for anchor, label in sections if not label] == []
    assert "Smoke run</b>: EgoHumans on the first 1 sequence(s) by name (egohumans.fetch.limit)" in page
    assert "Smoke run</b>: EgoNormia on dataset sample, the bundled synthetic sample" in page


def official_download_settings(root: Path, limit: int | None) -> EgoHumansFetch:
    return EgoHumansFetch.model_validate(
        {
            "source": "local",
            "path": str(root),
            "annotation": f"{SET}/tracking_{{modality}}.json",
            "modality": "ego_rgb",
            "manifest": str(root / "manifest.sha256"),
            "detections": None,
            "duplicate_videos": "error",
            "camera_model": "aria_fisheye",
            "limit": limit,
        }
    )


def test_egohumans_limit_keeps_only_the_first_sequences(tmp_path: Path) -> None:
    root = tmp_path / "egohumans"
    build_official_download(root)
    write_root_manifest(root, official_download_settings(root, None), ["gt", "official"])
    whole = egohumans_fetch(official_download_settings(root, None), tmp_path / "all", ["gt", "official"])
    names = sorted(s["name"] for s in whole["sequences"])
    assert len(names) == 2 and "limit" not in whole
    summary = egohumans_fetch(official_download_settings(root, 1), tmp_path / "one", ["gt", "official"])
    assert summary["limit"] == 1 and [s["name"] for s in summary["sequences"]] == names[:1]
    for table in ("images.parquet", "detections_official.parquet"):
        assert set(pd.read_parquet(tmp_path / "one" / table)["sequence"]) <= {names[0]}
    assert sorted(p.stem for p in (tmp_path / "one" / "gt").iterdir()) == names[:1]
    kept = pd.read_parquet(tmp_path / "all" / "detections_official.parquet").query("sequence == @names[0]")
    assert (
        pd.read_parquet(tmp_path / "one" / "detections_official.parquet")
        .reset_index(drop=True)
        .equals(kept.reset_index(drop=True))
    )
