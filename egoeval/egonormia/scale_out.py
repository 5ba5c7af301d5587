"""The egonormia_infer stage in shards (``meta.scale_out: {form: infer}``): clips go to shards by a stable hash of
their id. Every answer depends only on its clip (seeded permutations, the durable response cache), and the merged table
is sorted as ``run_inference`` sorts it, so the output is byte-identical to the single-process stage's.

A model's ``concurrency`` is one budget for the whole run: the shards split it (their calls in flight add up to at most
``concurrency``, however many workers run them), so there are never more shards than the smallest budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from egoeval.core.benchmarks import ScaleOut, budget_share, shard_of
from egoeval.core.io.atomic import write_parquet
from egoeval.egonormia import inference
from egoeval.egonormia.artifacts import RESPONSES
from egoeval.egonormia.settings import EgoNormiaSettings, ModelSpec

RESPONSE_ORDER = ["id", "setting", "model", "subtask"]  # run_inference's row order (unique per row)


def split(inputs: inference.InferenceInputs, shards: int) -> list[inference.InferenceInputs]:
    """``run_inference``'s arguments for each shard of the clips, each model's concurrency split between them."""
    items = inputs.items
    if items.empty:
        return [inputs]
    shards = max(1, min([shards, *(model.concurrency for model in inputs.models)]))  # a call slot per model and shard
    groups = items.groupby(items["id"].map(lambda clip: shard_of(str(clip), shards)), sort=True)
    parts = [part.reset_index(drop=True) for _, part in groups]
    return [
        inputs._replace(items=part, models=[_share(model, i, len(parts)) for model in inputs.models])
        for i, part in enumerate(parts)
    ]


def _share(model: ModelSpec, shard: int, shards: int) -> ModelSpec:
    """The model as one shard runs it: its part of the model's concurrency."""
    return model.model_copy(update={"concurrency": budget_share(model.concurrency, shard, shards)})


def combine(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """The shards' answers as ``run_inference`` returns them for all clips."""
    return pd.concat(parts, ignore_index=True).sort_values(RESPONSE_ORDER, ignore_index=True)


class ShardedInference(ScaleOut):
    def __init__(self, settings: EgoNormiaSettings) -> None:
        self.settings = settings  # the ``egonormia`` section of the workspace it runs in

    def plan(self, root: Path, shards: int, **options: Any) -> list[inference.InferenceInputs]:
        return split(inference.inference_inputs(self.settings, root), shards)

    def run(self, shard: inference.InferenceInputs) -> pd.DataFrame:
        return inference.run_inference(*shard)

    def merge(self, root: Path, parts: list[pd.DataFrame], **options: Any) -> Path:
        responses = combine(parts)
        inference.check_failures(responses, self.settings.infer.max_failure_rate)
        write_parquet(root / RESPONSES, responses)
        return root / RESPONSES
