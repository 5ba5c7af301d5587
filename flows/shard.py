"""Scale-out: a stage's sharded form (dvc.yaml ``meta.scale_out``) run over a Dask cluster (prefect-dask).

Each benchmark declares its sharded forms (``Benchmark.scale_out``: an ``egoeval.core.benchmarks.ScaleOut`` that plans
the shards, runs one and merges them; EgoNormia's inference, EgoHumans' YOLO detection). This flow runs one Prefect task
per shard on the cluster (a scheduler at params ``flows.dask_address``, else a ``LocalCluster`` of
``flows.dask_workers`` processes) and writes the stage's output, byte-identical to the single-process stage.

Workers read inputs by absolute path, so a real cluster needs the project on a shared filesystem.
``python -m flows.shard STAGE [--root DIR] [--shards N]`` runs the sharded form of a dvc.yaml stage (e.g.
``egonormia_infer``, ``egohumans_detect@yolo``); the nightly flow runs them in place of ``dvc repro`` for those stages
when ``flows.dask_address`` is set, then ``dvc commit``s the stage.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pandas as pd
from distributed import LocalCluster
from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.client.orchestration import get_client
from prefect_dask import DaskTaskRunner

from egoeval.core.benchmarks import ScaleOut, benchmark, benchmark_names
from egoeval.core.errors import InputError
from egoeval.core.settings import Params, workspace_settings
from egoeval.dvc_project import pipeline_stages
from flows.config import flow_settings


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


@task(name="shard", cache_policy=NO_CACHE)
def run_shard(form: ScaleOut, shard: Any) -> pd.DataFrame:
    """One shard of a stage's work, on a worker."""
    return form.run(shard)


def run_shards(form: ScaleOut, shards: list[Any]) -> list[pd.DataFrame]:
    """Every shard as one task on the flow's task runner, the tables in shard order (call inside a flow)."""
    futures = [run_shard.submit(form, shard) for shard in shards]
    return [future.result() for future in futures]


@flow(name="sharded-stage")
def sharded_flow(
    benchmark_name: str, form_name: str, root: str, shards: int = 0, options: dict[str, Any] | None = None
) -> str:
    """A stage's sharded form under ``root``: plan, one task per shard, merge; returns the output's path."""
    options = options or {}
    base = Path(root).resolve()
    settings = workspace_settings(base)  # validated whole: a bad key anywhere stops the run
    form = sharded_form(benchmark_name, form_name, settings)
    planned = form.plan(base, shards or settings.flows.dask_workers, **options)
    return str(form.merge(base, run_shards(form, planned), **options))


def sharded_form(benchmark_name: str, form_name: str, settings: Params) -> ScaleOut:
    """The benchmark's sharded form of that name under ``settings`` (it receives its own section); InputError naming
    dvc.yaml when there is none."""
    own = benchmark(benchmark_name) if benchmark_name in benchmark_names() else None
    form = own.scale_out(form_name, settings.section(own)) if own is not None else None
    if form is None:
        said = f"meta.scale_out.form {form_name!r}: benchmark {benchmark_name!r} (meta.benchmark) has no such form"
        raise InputError("dvc.yaml", said)
    return form


def run_sharded_stage(root: str, benchmark_name: str, scale_out: dict[str, str], shards: int = 0) -> str:
    """dvc.yaml's ``meta.scale_out`` of a stage on the cluster of params ``flows``."""
    options = {key: value for key, value in scale_out.items() if key != "form"}
    runner = task_runner(root, shards or None)
    return sharded_flow.with_options(task_runner=runner)(benchmark_name, scale_out["form"], root, shards, options)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.shard", description=__doc__.splitlines()[0])
    parser.add_argument("stage", help="a dvc.yaml stage with meta.scale_out, e.g. egonormia_infer")
    parser.add_argument("--root", type=Path, default=Path("."))
    parser.add_argument("--shards", type=int, default=0, help="shards (default: params flows.dask_workers)")
    args = parser.parse_args(argv)
    root = str(args.root.resolve())
    sharded = {info.name: info for info in pipeline_stages(root) if info.scale_out}
    if args.stage not in sharded:
        parser.error(f"{args.stage!r} has no sharded form; stages with one: {', '.join(sorted(sharded))}")
    info = sharded[args.stage]
    print(run_sharded_stage(root, info.benchmark or "", info.scale_out, args.shards))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
