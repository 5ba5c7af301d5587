"""The egonormia_score stage's work: predictions -> metrics/egonormia.json, its headline rows and the plots' tables.

metrics/egonormia.json: ``{setting: {model: {protocol, dataset, split, excluded, action, justification, both,
sensible_iou (percent), n, items (the clips of the run, before any exclusion), coverage, parse_failure_rate,
call_failure_rate (shares 0-1), ci95: {metric: [low, high]}, ledger: {the calls behind the answers, their usage
tokens and cost (egoeval.egonormia.ledger; from data/egonormia/responses.parquet, prices of egonormia.model and
baselines)},
verified: {the same for the verified split; metrics null when it has no items}[, limit: {clips, seed}]
[, served_models: {the model the endpoint named as serving the replies: calls}]}}}``;
metrics/egonormia/<setting>/<model>.json: its headline row for ``dvc metrics show`` (egoeval.headline).
``dataset`` and ``split`` say which items (``sample`` for the bundled synthetic sample); ``limit`` only in a smoke run
(egonormia.fetch.limit); ``served_models`` only where the endpoint named another model than the one requested
(``egoeval.egonormia.ledger.served_models``); ``protocol`` is the one the answers were asked under, and it says which
items count (``egoeval.egonormia.protocols``): under ``official`` n is the official scorer's, an item whose action or
justification call failed is left out, and one whose sensible answer and gold are both empty is not counted in n
though its action and justification stay in the sums; ``excluded`` counts both. Under ``egoeval`` every item stays in n.
plots/egonormia/categories.csv: action accuracy (percent) per setting, model and norm category of the correct
option. plots/egonormia/paired.csv: every pair of models per setting and each model's video-minus-blind and
pipeline-minus-blind gains (egoeval.egonormia.paired). The math lives in egoeval.egonormia.scoring; every
(setting, model) pair must cover every item (the parse stage sees to it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from egoeval.core.errors import InputError
from egoeval.core.io.atomic import json_bytes
from egoeval.core.io.bounded import read_parquet
from egoeval.core.io.commit import outputs_together
from egoeval.egonormia.artifacts import (
    CATEGORIES_FILE,
    HEADLINE_DIR,
    ITEMS,
    METRICS_FILE,
    PAIRED_FILE,
    PREDICTION_COLUMNS,
    PREDICTIONS,
    RESPONSES,
    SETTINGS,
    SUBTASKS,
    is_setting,
    read_table,
    require_columns,
)
from egoeval.egonormia.ledger import LEDGER_COLUMNS, answer_ledgers, served_models
from egoeval.egonormia.paired import Run, paired_table
from egoeval.egonormia.protocols import recorded
from egoeval.egonormia.scoring import Outcomes, category_accuracy, headline_rows, outcomes, summarize
from egoeval.egonormia.settings import EgoNormiaSettings, ScoreSettings
from egoeval.headline import write_rows
from egoeval.significance import csv_bytes

ITEM_COLUMNS = ("id", "correct_idx", "sensible_idx", "taxonomy", "verified")
CATEGORY_COLUMNS = ["setting", "model", "category", "n", "accuracy"]


def score(
    items: pd.DataFrame,
    predictions: pd.DataFrame,
    settings: ScoreSettings,
    predictions_path: Path = PREDICTIONS,
    split: str = "full",
    dataset: str = "egonormia",
) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
    """(metrics by setting and model, per-category table, paired comparisons) for every (setting, model) pair in
    the predictions; ``split`` and ``dataset`` say which items they are (egonormia.fetch: split, rows_dataset)."""
    require_columns(items, ITEM_COLUMNS, ITEMS)
    require_columns(predictions, PREDICTION_COLUMNS, predictions_path)
    items = items.sort_values("id", ignore_index=True)
    ids = items["id"].astype(str)
    correct = items["correct_idx"].astype("int64").to_numpy()
    gold_sets = [[int(i) for i in gold] for gold in items["sensible_idx"]]
    verified = items["verified"].astype(bool).to_numpy()
    categories = [list(taxonomy[k]) for taxonomy, k in zip(items["taxonomy"], correct, strict=True)]
    sample = {
        "samples": settings.bootstrap_samples,
        "seed": settings.bootstrap_seed,
        "confidence": settings.confidence,
    }
    metrics: dict[str, Any] = {}
    category_rows = []
    runs: dict[tuple[str, str], Run] = {}
    for (setting, model), group in predictions.groupby(["setting", "model"], sort=True):
        if not is_setting(setting):
            raise InputError(
                predictions_path,
                f"setting {setting!r} is not one of {', '.join(SETTINGS)} or a video variant",
            )
        if len(group) != len(ids) or set(group["id"].astype(str)) != set(ids):
            raise InputError(predictions_path, f"{setting}/{model} does not cover exactly the {len(ids)} items")
        group = group.set_index(group["id"].astype(str)).loc[ids]
        protocols = sorted(set(group["protocol"].astype(str)))
        if len(protocols) != 1:
            raise InputError(predictions_path, f"{setting}/{model} mixes protocols {protocols}")
        protocol = recorded(protocols[0], predictions_path)
        kept = ~protocol.excluded(group)
        counted = ~protocol.uncounted(group, gold_sets)
        result = outcomes(group["action"], group["justification"], list(group["sensible"]), correct, gold_sets)
        result = Outcomes(result.action, result.justification, result.sensible_iou, counted)
        errors = {subtask: group[f"{subtask}_error"].tolist() for subtask in SUBTASKS}
        runs[str(setting), str(model)] = Run(
            protocols[0], Outcomes(result.action, result.justification, result.sensible_iou, kept & counted)
        )
        result, errors = result.subset(kept), _subset_errors(errors, kept)
        entry = {
            "protocol": protocols[0],
            "dataset": dataset,
            "split": split,
            "excluded": int((~(kept & counted)).sum()),
        }
        entry |= summarize(result, errors, **sample) | {"items": len(ids)}
        in_verified = verified[kept]
        entry["verified"] = summarize(result.subset(in_verified), _subset_errors(errors, in_verified), **sample)
        entry["verified"]["items"] = int(verified.sum())
        metrics.setdefault(str(setting), {})[str(model)] = entry
        kept_categories = [c for c, keep in zip(categories, kept, strict=True) if keep]
        for category, n, accuracy in category_accuracy(result.action, kept_categories):
            category_rows.append((setting, model, category, n, accuracy))
    table = pd.DataFrame(category_rows, columns=CATEGORY_COLUMNS)
    paired = paired_table(runs, verified, split, settings)
    return metrics, table.sort_values(["setting", "model", "category"], ignore_index=True), paired


def _subset_errors(errors: dict[str, list[str]], mask: np.ndarray) -> dict[str, list[str]]:
    return {
        subtask: [reason for reason, keep in zip(reasons, mask, strict=True) if keep]
        for subtask, reasons in errors.items()
    }


def write_metrics(params: EgoNormiaSettings) -> None:
    """The egonormia_score stage: score the predictions and write the metrics, their headline rows, the categories
    and the paired comparisons together."""
    with outputs_together(METRICS_FILE, HEADLINE_DIR, CATEGORIES_FILE, PAIRED_FILE) as outputs:
        items = read_table(ITEMS, list(ITEM_COLUMNS))
        if not PREDICTIONS.is_file():
            raise InputError(PREDICTIONS, "file not found (run the parse stage first)")
        predictions = read_parquet(PREDICTIONS)
        metrics, categories, paired = score(
            items, predictions, params.score, split=params.fetch.split, dataset=params.fetch.rows_dataset
        )
        prices = {model.name: model.price for model in (params.model, *params.baselines)}
        responses = read_parquet(RESPONSES, LEDGER_COLUMNS)
        ledgers = answer_ledgers(responses, prices)
        for setting, models in metrics.items():
            for model, entry in models.items():
                entry["ledger"] = ledgers.get((setting, model))
                answers = responses[(responses["setting"] == setting) & (responses["model"] == model)]
                served = served_models(answers, model)
                if served is not None:  # the endpoint named another model: said beside the numbers it produced
                    entry["served_models"] = served
        if params.fetch.limit is not None:  # a smoke run says so beside every figure it produced
            for entry in (entry for models in metrics.values() for entry in models.values()):
                entry["limit"] = {"clips": params.fetch.limit, "seed": params.fetch.limit_seed}
        outputs.write(METRICS_FILE, json_bytes(metrics))
        write_rows(outputs.path(HEADLINE_DIR), headline_rows(metrics))
        outputs.write(CATEGORIES_FILE, categories.to_csv(index=False, lineterminator="\n").encode())
        outputs.write(PAIRED_FILE, csv_bytes(paired))
