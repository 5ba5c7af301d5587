"""Raw model responses -> chosen options, in stored order, with every failure named (the egonormia_parse stage).

Inputs: data/egonormia/fetched/items.parquet, data/egonormia/responses.parquet (one row per
id × setting × model × subtask). Outputs:

- data/egonormia/predictions.parquet: one row per item × (setting, model) pair seen in the responses (a pair
  misses no item: an absent response is a call failure "no response recorded"), sorted by setting, model, id;
  columns id, setting, model, protocol, action, justification (stored index, -1 when unusable), sensible
  (sorted stored indices, empty when unusable) and action_error, justification_error, sensible_error ("" when
  fine, "call failed: <error>" or "parse: <reason>").

How answers are read is the protocol's the responses were asked under (their ``protocol`` column,
``egoeval.egonormia.protocols``): ``egoeval`` reads ``Answer:`` lines; ``official`` reads as the official code does
(the last integer, the last bracketed list) and couples action and justification: when either is invalid, both
are wrong; a refusal or an empty completion is an invalid answer there, not a failed call.
- data/egonormia/predictions_eval.json: the same predictions in the official eval-JSON layout, under the official
  results' names (``result_names.results_key``: ``blind_<model>``, ``desc_<model>`` for the pipeline setting, the bare
  name for video), so the official scorer files each run where the published ones are and gives exactly our
  stage's numbers. A video variant other than the strip (``video:frames8``, ``video:native``: not the official
  protocol's input) has no run there; predictions.parquet holds it. An item the protocol leaves out of n is left
  out of that model key; the sensible entry is the protocol's (``official``: what the official code records,
  ``[-1, -1]`` for an invalid answer, ``[-2, -2]`` for a failed call; ``egoeval``: ``{}``, which the scorer counts
  as 0, for an unusable answer and for an empty answer to an empty gold set,
  where our IoU is 0 too); -1 never equals a correct index.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from egoeval.core.errors import InputError
from egoeval.core.io.atomic import json_bytes, parquet_bytes
from egoeval.core.io.bounded import read_parquet
from egoeval.core.io.commit import outputs_together
from egoeval.egonormia.artifacts import (
    EVAL_JSON,
    ITEMS,
    PREDICTION_COLUMNS,
    PREDICTION_SCHEMA,
    PREDICTIONS,
    RESPONSES,
    SETTINGS,
    SUBTASKS,
    is_setting,
    is_variant,
    read_table,
    require_columns,
)
from egoeval.egonormia.protocols import recorded
from egoeval.egonormia.result_names import results_key
from egoeval.egonormia.scoring import CALL_FAILED, PARSE_FAILED

ITEM_COLUMNS = ("id", "behaviors", "justifications", "correct_idx", "sensible_idx")
PARSED_COLUMNS = ("id", "setting", "model", "protocol", "subtask", "permutation", "response", "error")
NO_RESPONSE = CALL_FAILED + "no response recorded"


def parse_responses(
    items: pd.DataFrame, responses: pd.DataFrame, items_path: Path = ITEMS, responses_path: Path = RESPONSES
) -> pd.DataFrame:
    """The predictions table (see the module docstring) from the items and the raw responses."""
    require_columns(items, ITEM_COLUMNS, items_path)
    require_columns(responses, PARSED_COLUMNS, responses_path)
    if items["id"].duplicated().any():
        raise InputError(items_path, f"duplicate id {items['id'][items['id'].duplicated()].iloc[0]!r}")
    options = {
        str(item.id): {
            "action": list(item.behaviors),
            "justification": list(item.justifications),
            "sensible": list(item.behaviors),
        }
        for item in items.itertuples(index=False)
    }
    keys = responses[["id", "setting", "model", "subtask"]].astype(str)
    protocols = responses.groupby(["setting", "model"])["protocol"].unique()
    mixed = [f"{setting}/{model}" for (setting, model), seen in protocols.items() if len(seen) != 1]
    if mixed:
        raise InputError(responses_path, f"{mixed[0]} mixes protocols {sorted(protocols[mixed[0]])}")
    protocol_of = {pair: recorded(seen[0], responses_path) for pair, seen in protocols.items()}
    duplicated = keys.duplicated()
    if duplicated.any():
        raise InputError(
            responses_path,
            "second response for the same id, setting, model, subtask",
            row=int(np.flatnonzero(duplicated)[0]),
        )
    pairs = sorted(set(zip(keys["setting"], keys["model"], strict=True)))
    grid: dict[tuple[str, str, str], dict[str, Any]] = {
        (clip, setting, model): _unanswered() for setting, model in pairs for clip in sorted(options)
    }
    rows = zip(
        keys.itertuples(index=False), responses["permutation"], responses["response"], responses["error"], strict=True
    )
    for row, (key, permutation, response, error) in enumerate(
        tqdm(rows, total=len(responses), desc="parse", unit="answer", file=sys.stderr)
    ):
        if key.id not in options:
            raise InputError(responses_path, f"id {key.id!r} is not in {items_path}", row=row)
        if not is_setting(key.setting):
            raise InputError(
                responses_path,
                f"setting {key.setting!r} is not one of {', '.join(SETTINGS)} or a video variant",
                row=row,
            )
        if key.subtask not in SUBTASKS:
            raise InputError(responses_path, f"subtask {key.subtask!r} is not one of {', '.join(SUBTASKS)}", row=row)
        shown = options[key.id][key.subtask]
        perm = [] if permutation is None else [int(p) for p in permutation]
        if sorted(perm) != list(range(len(shown))):
            raise InputError(responses_path, f"permutation {perm} does not reorder {len(shown)} options", row=row)
        text = response if isinstance(response, str) else None
        failed = error if isinstance(error, str) else ""
        value, reason = protocol_of[(key.setting, key.model)].read(key.subtask, text, failed, perm, shown)
        cell = grid[(key.id, key.setting, key.model)]
        cell[key.subtask], cell[f"{key.subtask}_error"] = value, reason
    records = []
    for (clip, setting, model), cell in grid.items():
        protocol = protocol_of[(setting, model)]
        protocol.settle(cell)
        records.append({"id": clip, "setting": setting, "model": model, "protocol": protocol.name, **cell})
    table = pd.DataFrame.from_records(records, columns=list(PREDICTION_COLUMNS))
    table = table.astype({"action": "int64", "justification": "int64"})
    return table.sort_values(["setting", "model", "id"], ignore_index=True)


def _unanswered() -> dict[str, Any]:
    return {
        "action": -1,
        "justification": -1,
        "sensible": [],
        **{f"{subtask}_error": NO_RESPONSE for subtask in SUBTASKS},
    }


def eval_json(items: pd.DataFrame, predictions: pd.DataFrame, source: Path = RESPONSES) -> dict[str, dict[str, Any]]:
    """The predictions in the official eval-JSON layout (see the module docstring for what each entry means);
    ``source`` is the table the model names come from."""
    gold = {
        str(item.id): (int(item.correct_idx), sorted(int(i) for i in item.sensible_idx))
        for item in items.itertuples(index=False)
    }
    layout: dict[str, dict[str, Any]] = {clip: {} for clip in sorted(gold)}
    for (setting, model), group in predictions.groupby(["setting", "model"], sort=True):
        if is_variant(str(setting)):  # not the official protocol's input: no run of the official layout
            continue
        protocol = recorded(group["protocol"].iloc[0], source)
        try:
            key = results_key(str(setting), str(model))
        except ValueError as error:
            raise InputError(source, str(error)) from None
        excluded = protocol.excluded(group)
        for row, left_out in zip(group.itertuples(index=False), excluded, strict=True):
            if left_out:
                continue
            correct, sensible_gold = gold[row.id]
            sensible = [int(i) for i in row.sensible]
            layout[row.id][key] = {
                "best": {"results": [int(row.action), int(row.justification)], "correct": [correct, correct]},
                "sensible": protocol.sensible_entry(sensible, row.sensible_error, sensible_gold),
            }
    return layout


def write_predictions() -> None:
    """The egonormia_parse stage: read the items and responses, write the predictions table and its eval-JSON layout
    together, and say per subtask how many answers were usable."""
    with outputs_together(PREDICTIONS, EVAL_JSON) as outputs:
        items = read_table(ITEMS, list(ITEM_COLUMNS))
        if not RESPONSES.is_file():
            raise InputError(RESPONSES, "file not found (run the infer stage first)")
        predictions = parse_responses(items, read_parquet(RESPONSES))
        outputs.write(PREDICTIONS, parquet_bytes(predictions, PREDICTION_SCHEMA))
        outputs.write(EVAL_JSON, json_bytes(eval_json(items, predictions)))
    for subtask in SUBTASKS:
        reasons = predictions[f"{subtask}_error"]
        calls = int(reasons.str.startswith(CALL_FAILED).sum())
        parses = int(reasons.str.startswith(PARSE_FAILED).sum())
        print(
            f"parse: {subtask}: {len(reasons) - calls - parses} usable, {parses} unparseable, "
            f"{calls} failed calls of {len(reasons)}",
            file=sys.stderr,
        )
