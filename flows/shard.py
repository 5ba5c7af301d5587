"""Scale-out: EgoNormia inference and EgoHumans YOLO detection spread over a Dask cluster (prefect-dask).

Each flow splits the work into shards, runs one Prefect task per shard on the cluster (a scheduler at params
``flows.dask_address``, else a ``LocalCluster`` of ``flows.dask_workers`` processes), merges the shards in the
stage's canonical order and writes the stage's output file, byte-identical to the single-process stage:

- inference: clips go to shards by a stable hash of their id; every answer depends only on its clip (seeded
  permutations, the durable response cache), and the merged table is sorted like ``run_inference`` sorts it;
- detection: the frames, in the stage's order, are cut into the stage's batches (``yolo_batch``) and whole batches go
  to shards, so every frame is predicted in the same batch as in a single-process run.

Workers read inputs by absolute path, so a real cluster needs the project on a shared filesystem.
``python -m flows.shard infer|detect [--root DIR] [--shards N]`` runs one of them; the nightly flow runs them in
place of ``dvc repro`` for those stages when ``flows.dask_address`` is set, then ``dvc commit``s the stage.
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
from distributed import LocalCluster
from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.client.orchestration import get_client
from prefect_dask import DaskTaskRunner

from egoeval.egohumans import detection
from egoeval.egohumans.artifacts import FETCHED
from egoeval.egohumans.formats import DETECTION_COLUMNS, empty_detections, sort_detections
from egoeval.egonormia import inference
from egoeval.egonormia.artifacts import RESPONSES
from egoeval.io import write_parquet
from egoeval.settings import benchmark_settings
from flows.config import flow_settings

RESPONSE_ORDER = ["id", "setting", "model", "subtask"]  # run_inference's row order (unique per row)


def shard_of(key: str, shards: int) -> int:
    """A stable shard number for a key (the same on every machine and Python process)."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") % shards


def local_cluster(n_workers: int) -> LocalCluster:
    """Single-threaded worker processes that report to this run's Prefect API (the temporary server's too)."""
    with get_client(sync_client=True) as client:
        api_url = str(client.api_url)
    return LocalCluster(
        n_workers=n_workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        env={"PREFECT_API_URL": api_url},
    )


def task_runner(root: str | Path, workers: int | None = None) -> DaskTaskRunner:
    """The cluster named by params ``flows.dask_address``, else a LocalCluster of ``flows.dask_workers`` processes."""
    settings = flow_settings(root)
    if settings.dask_address:
        return DaskTaskRunner(address=settings.dask_address)
    return DaskTaskRunner(cluster_class=local_cluster, cluster_kwargs={"n_workers": workers or settings.dask_workers})


# ---------------------------------------------------------------- EgoNormia inference


@task(name="infer-shard", cache_policy=NO_CACHE)
def infer_shard(inputs: inference.InferenceInputs) -> pd.DataFrame:
    """``run_inference`` on one shard's clips."""
    return inference.run_inference(*inputs)


def sharded_inference(inputs: inference.InferenceInputs, shards: int) -> pd.DataFrame:
    """``run_inference``'s table, computed shard by shard on the flow's task runner (call inside a flow)."""
    items = inputs.items
    if items.empty:
        return inference.run_inference(*inputs)
    parts = items.groupby(items["id"].map(lambda clip: shard_of(str(clip), shards)), sort=True)
    futures = [infer_shard.submit(inputs._replace(items=part.reset_index(drop=True))) for _, part in parts]
    tables = [future.result() for future in futures]
    return pd.concat(tables, ignore_index=True).sort_values(RESPONSE_ORDER, ignore_index=True)


@flow(name="egonormia-infer-sharded")
def infer_flow(root: str = ".", shards: int = 0) -> str:
    """The egonormia_infer stage, sharded by clip: writes data/egonormia/responses.parquet under ``root``."""
    base = Path(root).resolve()
    inputs = inference.inference_inputs(base)
    responses = sharded_inference(inputs, shards or flow_settings(base).dask_workers)
    inference.check_failures(responses, inputs.infer.max_failure_rate)
    write_parquet(base / RESPONSES, responses)
    return str(base / RESPONSES)


# ---------------------------------------------------------------- EgoHumans YOLO detection


@task(name="detect-shard", cache_policy=NO_CACHE)
def detect_shard(images: pd.DataFrame, params: dict[str, Any], arch_only: bool) -> pd.DataFrame:
    """``detect_images`` over one shard's frames (whole batches of the single-process run, in its order)."""
    return detection.detect_images(detection.load_yolo(params, arch_only), images, params)


@flow(name="egohumans-detect-sharded")
def detect_flow(root: str = ".", shards: int = 0, arch_only: bool = False) -> str:
    """The egohumans_detect stage in yolo mode, sharded by batch: writes data/egohumans/detections/yolo.parquet."""
    base = Path(root).resolve()
    params = benchmark_settings("egohumans", base / "params.yaml").detect.model_dump()
    images = detection.read_images(base / FETCHED)
    images["path"] = [p if Path(p).is_absolute() else str(base / p) for p in images["path"]]
    shards = shards or flow_settings(base).dask_workers
    batch = int(params["yolo_batch"])
    shard = (images.index // batch) % shards  # whole batches, dealt round-robin
    model_params = {**params}
    if params.get("yolo_weights") and params["yolo_weights"] != detection.ARCH_ONLY:
        model_params["yolo_weights"] = str(base / params["yolo_weights"])
    futures = [
        detect_shard.submit(part.reset_index(drop=True), model_params, arch_only)
        for _, part in images.groupby(shard, sort=True)
    ]
    table = sort_detections(pd.concat([empty_detections(), *(f.result() for f in futures)], ignore_index=True))
    out = base / detection.OUT_DIR / "yolo.parquet"
    write_parquet(out, table[DETECTION_COLUMNS])
    return str(out)


# ---------------------------------------------------------------- the sharded forms dvc.yaml names (meta.scale_out)


def _infer_form(root: str) -> str:
    return infer_flow.with_options(task_runner=task_runner(root))(root=root)


def _detect_form(root: str, mode: str) -> str:
    """YOLO detection sharded by batch; the other modes are a quick read of boxes, run in place."""
    if mode != "yolo":
        out = Path(root) / detection.OUT_DIR / f"{mode}.parquet"
        params = benchmark_settings("egohumans", Path(root) / "params.yaml").detect.model_dump()
        detection.detect(mode, Path(root) / FETCHED, out, params)
        return str(out)
    return detect_flow.with_options(task_runner=task_runner(root))(root=root)


SCALE_OUT: dict[str, Callable[..., str]] = {"infer": _infer_form, "detect": _detect_form}
"""``meta.scale_out`` in dvc.yaml -> the sharded form (``root``, then the meta's other keys -> output path)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.shard", description=__doc__.splitlines()[0])
    parser.add_argument("work", choices=["infer", "detect"])
    parser.add_argument("--root", type=Path, default=Path("."))
    parser.add_argument("--shards", type=int, default=0, help="shards (default: params flows.dask_workers)")
    parser.add_argument("--arch-only", action="store_true", help="detect: the untrained YOLO architecture")
    args = parser.parse_args(argv)
    root = str(args.root.resolve())
    runner = task_runner(root, args.shards or None)
    if args.work == "infer":
        out = infer_flow.with_options(task_runner=runner)(root=root, shards=args.shards)
    else:
        out = detect_flow.with_options(task_runner=runner)(root=root, shards=args.shards, arch_only=args.arch_only)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
