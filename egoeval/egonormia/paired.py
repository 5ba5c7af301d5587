"""EgoNormia's paired comparisons (``plots/egonormia/paired.csv``; the statistics live in ``egoeval.significance``).

Rows, for every split scored (the fetched split and, when it is ``full``, its ``verified`` subset):

- every pair of models asked in the same setting under the same protocol (``setting`` = blind, pipeline or video;
  ``model_a`` before ``model_b`` in case-insensitive order): action, justification and both by the exact McNemar
  test, sensible IoU by the paired bootstrap's p-value; every metric's ``diff`` with its paired bootstrap interval;
- per model, the gain of seeing the clip: ``setting`` = ``video-blind`` or ``pipeline-blind``, ``model_a`` =
  ``model_b`` = the model, ``a`` its score in the first setting and ``b`` in ``blind``, by the same tests;
- per model, each video variant against the official strip (``egonormia.frames.variants``): ``setting`` =
  ``<variant>-video`` (``video:frames8-video``), ``a`` the variant's score, ``b`` the strip's, by the same tests (a
  variant is not the official protocol: its rows are never among the published figures).

``n`` is the clips both sides count (a protocol that leaves a clip out of n for either side leaves it out of the
pair), so ``a`` and ``b`` can differ from ``metrics/egonormia.json`` where the two sides leave out different clips.
The bootstrap draws ``egonormia.score.bootstrap_samples`` resamples from ``bootstrap_seed``: the same as the
metrics' intervals on the same number of clips. ``p_holm``: Holm-adjusted within each (setting, split, metric).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from egoeval.core.errors import InputError
from egoeval.egonormia.artifacts import is_variant
from egoeval.egonormia.scoring import Outcomes
from egoeval.egonormia.settings import EgoNormiaSettings, ScoreSettings
from egoeval.significance import (
    PairedRow,
    compare_binary,
    compare_continuous,
    oriented,
    read_paired,
    resamples,
    text_table,
    with_holm,
)

BINARY = ("action", "justification", "both")
GAINS = (("video", "blind"), ("pipeline", "blind"))


@dataclass(frozen=True)
class Run:
    """One model on one setting, over every item: its outcomes (``counted``: the item is in its n) and protocol."""

    protocol: str
    outcomes: Outcomes


def paired_table(
    runs: dict[tuple[str, str], Run], verified: np.ndarray, split: str, settings: ScoreSettings
) -> pd.DataFrame:
    """Every comparison above as a table in ``egoeval.significance.COLUMNS`` order."""
    splits = [(split, np.ones(len(verified), dtype=bool))]
    if split == "full":
        splits.append(("verified", np.asarray(verified, dtype=bool)))
    rows: list[PairedRow] = []
    for split_name, in_split in splits:
        for setting in sorted({setting for setting, _ in runs}):
            models = sorted((m for s, m in runs if s == setting), key=_name_order)
            for model_a, model_b in combinations(models, 2):
                a, b = runs[setting, model_a], runs[setting, model_b]
                if a.protocol == b.protocol:
                    rows += _compare(setting, split_name, (model_a, model_b), a, b, in_split, settings)
        for first, second in [*GAINS, *variant_gains(runs)]:
            for model in sorted({m for s, m in runs if s == first and (second, m) in runs}, key=_name_order):
                a, b = runs[first, model], runs[second, model]
                if a.protocol == b.protocol:
                    rows += _compare(f"{first}-{second}", split_name, (model, model), a, b, in_split, settings)
    return with_holm(rows)


def variant_gains(runs: dict[tuple[str, str], Run]) -> list[tuple[str, str]]:
    """(variant, ``video``) for every video variant other than the strip that was run: its difference from the
    official strip, per model, on the same clips."""
    return [(setting, "video") for setting in sorted({s for s, _ in runs if is_variant(s)})]


def is_gain(setting: str) -> bool:
    """Whether a paired.csv row's setting is a model's own difference between two settings (``video-blind``,
    ``video:frames8-video``), not a pair of models in one setting."""
    return "-" in setting


def _name_order(name: str) -> tuple[str, str]:
    return name.casefold(), name


def _compare(
    setting: str,
    split: str,
    names: tuple[str, str],
    run_a: Run,
    run_b: Run,
    in_split: np.ndarray,
    settings: ScoreSettings,
) -> list[PairedRow]:
    a, b = run_a.outcomes, run_b.outcomes
    units = in_split & a.in_n & b.in_n
    n = int(units.sum())
    if n == 0:
        return []
    indices = resamples(n, settings.bootstrap_samples, settings.bootstrap_seed)
    a, b = a.subset(units), b.subset(units)
    rows = [
        compare_binary(
            setting, split, metric, names, getattr(a, metric), getattr(b, metric), indices, settings.confidence
        )
        for metric in BINARY
    ]
    iou_a, iou_b = a.sensible_iou * 100.0, b.sensible_iou * 100.0
    rows.append(compare_continuous(setting, split, "sensible_iou", names, iou_a, iou_b, indices, settings.confidence))
    return rows


def compare_models(path: Path, metrics: dict[str, Any], settings: EgoNormiaSettings, model_a: str, model_b: str) -> str:
    """``egoeval compare metrics/egonormia.json --models A B``: every row of ``path`` (paired.csv) comparing A with B
    (A minus B), and each one's gains from seeing the clip, as an aligned table under a line naming what it is
    (``recorded_data``: the data the metrics were really scored on)."""
    table = read_paired(path)
    known = sorted(set(table["model_a"]) | set(table["model_b"]), key=_name_order)
    for model in (model_a, model_b):
        if model not in known:
            raise InputError(path, f"no comparison of model {model!r} (models: {', '.join(known) or 'none'})")
    gain = table["setting"].map(is_gain).astype(bool)
    variant = gain & table["setting"].map(lambda setting: is_variant(setting.split("-")[0])).astype(bool)
    pairs = oriented(table[~gain], model_a, model_b)
    own_gains, variant_rows = table[gain & ~variant], table[variant]
    protocols = recorded_protocols(metrics)
    level = f"{settings.score.confidence:.0%}"
    lines = [
        f"Paired comparisons ({path}): protocol {', '.join(protocols) or 'unknown'}, {recorded_data(metrics)}; "
        f"n = clips both sides count; intervals: {level} paired bootstrap; p Holm over each setting, split and metric.",
        "",
    ]
    if model_a == model_b:
        lines.append(f"{model_a} against itself: only its gains.")
    elif pairs.empty:
        lines.append(f"{model_a} and {model_b} were never asked in the same setting.")
    else:
        lines += [f"a = {model_a}, b = {model_b}:", text_table(pairs)]
    for model in dict.fromkeys((model_a, model_b)):
        gains = own_gains[own_gains["model_a"] == model]
        if not gains.empty:
            lines += [
                "",
                f"{model}'s gains from seeing the clip (a = video or pipeline, b = blind):",
                text_table(gains),
            ]
        shown = variant_rows[variant_rows["model_a"] == model]
        if not shown.empty:
            lines += [
                "",
                f"{model}: each video variant minus the strip (a = the variant, NOT the official protocol; b = video, "
                "the official strip):",
                text_table(shown),
            ]
    return "\n".join(lines)


def recorded_protocols(metrics: Any) -> list[str]:
    """The protocols metrics/egonormia.json's entries were asked under, sorted."""
    if not isinstance(metrics, dict):
        return []
    runs = (entry for models in metrics.values() if isinstance(models, dict) for entry in models.values())
    return sorted({str(entry["protocol"]) for entry in runs if isinstance(entry, dict) and entry.get("protocol")})


DATASET_NAMES = {
    "sample": "the bundled synthetic sample (not EgoNormia's clips)",
    "ood_robot": "EgoNormia's ood_robot set",
}


def _entries(metrics: Any) -> list[dict[str, Any]]:
    if not isinstance(metrics, dict):
        return []
    return [
        e for models in metrics.values() if isinstance(models, dict) for e in models.values() if isinstance(e, dict)
    ]


def smoke_limit(metrics: Any) -> dict[str, Any] | None:
    """A smoke run's ``limit`` (``{clips, seed}``, egonormia.fetch.limit) as metrics/egonormia.json records it beside
    its figures; None for a run over the whole split."""
    return next((entry["limit"] for entry in _entries(metrics) if isinstance(entry.get("limit"), dict)), None)


def recorded_data(metrics: Any) -> str:
    """The data metrics/egonormia.json's rows were scored on, in words: dataset (the bundled sample said to be the
    synthetic sample), split, clips and, in a smoke run, its limit; from the rows themselves, not from params."""
    described = []
    for dataset, split, clips in sorted(
        {
            (str(e.get("dataset", "unrecorded")), str(e.get("split", "unrecorded")), e.get("items"))
            for e in _entries(metrics)
        },
        key=str,
    ):
        named = f"dataset {dataset}" + (f", {DATASET_NAMES[dataset]}" if dataset in DATASET_NAMES else "")
        described.append(f"{named}, {split} split" + (f", {clips} clips" if clips is not None else ""))
    said = "; ".join(described) or "dataset unrecorded"
    limit = smoke_limit(metrics)
    if limit is not None:
        said += f" (a smoke run: egonormia.fetch.limit {limit.get('clips')}, seed {limit.get('seed')})"
    return said
