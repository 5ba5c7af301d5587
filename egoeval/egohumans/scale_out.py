"""The egohumans_detect stage in shards (``meta.scale_out: {form: detect, mode: ...}``). YOLO: the frames, in the
stage's order, are cut into the stage's batches (``yolo_batch``) and whole batches go to shards, so every frame is
predicted in the same batch as in a single-process run and the output is byte-identical. The other modes are a quick
read of boxes: one shard."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from egoeval.core.benchmarks import ScaleOut
from egoeval.core.io.atomic import write_parquet
from egoeval.egohumans import detection
from egoeval.egohumans.artifacts import FETCHED
from egoeval.egohumans.formats import DETECTION_COLUMNS, empty_detections, sort_detections
from egoeval.egohumans.settings import DetectSettings, EgoHumansSettings


@dataclass(frozen=True)
class DetectionShard:
    mode: str
    fetched: Path
    settings: DetectSettings
    data_root: Path  # egohumans.fetch.path: frames are read only inside it
    images: pd.DataFrame | None = None  # YOLO: whole batches of the stage's frames, absolute paths
    arch_only: bool = False


class ShardedDetection(ScaleOut):
    def __init__(self, settings: EgoHumansSettings) -> None:
        self.settings = settings  # the ``egohumans`` section of the workspace it runs in

    def plan(self, root: Path, shards: int, mode: str = "yolo", arch_only: bool = False, **options: Any) -> list[Any]:
        settings, data_root = self.settings.detect, root / self.settings.fetch.path
        if mode != "yolo":
            return [DetectionShard(mode, root / FETCHED, settings, data_root)]
        weights = settings.yolo_weights
        if weights and weights != detection.ARCH_ONLY:
            settings = settings.model_copy(update={"yolo_weights": str(root / weights)})
        images = detection.read_images(root / FETCHED)
        images["path"] = [p if Path(p).is_absolute() else str(root / p) for p in images["path"]]
        shard = (images.index // settings.yolo_batch) % shards  # whole batches, dealt round-robin
        return [
            DetectionShard(mode, root / FETCHED, settings, data_root, part.reset_index(drop=True), arch_only)
            for _, part in images.groupby(shard, sort=True)
        ]

    def run(self, shard: DetectionShard) -> pd.DataFrame:
        if shard.images is None:
            return detection.detections(shard.mode, shard.fetched, shard.settings, shard.data_root)
        model = detection.load_yolo(shard.settings, shard.arch_only)
        return detection.detect_images(model, shard.images, shard.settings, shard.data_root)

    def merge(self, root: Path, parts: list[pd.DataFrame], mode: str = "yolo", **options: Any) -> Path:
        if mode == "yolo":
            table = sort_detections(pd.concat([empty_detections(), *parts], ignore_index=True))
        else:
            (table,) = parts  # as the stage writes it
        out = root / detection.OUT_DIR / f"{mode}.parquet"
        write_parquet(out, table[DETECTION_COLUMNS])
        return out
