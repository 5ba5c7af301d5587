"""The ``flows`` section of a project's params.yaml, with defaults for keys it leaves out."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from egoeval.io import InputError, load_params

PREFECT_DIR = Path(".egoeval-cache/prefect")  # under the project root: task results and the last report
RESULTS_DIR = PREFECT_DIR / "results"
REPORT_FILE = PREFECT_DIR / "report.md"
REPORT_ARTIFACT_KEY = "egoeval-nightly-report"


@dataclass(frozen=True)
class FlowSettings:
    schedule_cron: str = "0 2 * * *"  # nightly at 02:00
    timezone: str = "UTC"
    baseline: str = "metrics/baseline.json"  # the accepted metrics; its dvc.lock snapshot sits beside it
    tolerance: float = 0.5  # points a metric may move beyond its baseline bootstrap interval, on each side
    gate: list[str] | None = None  # metric names (last key) the regression rule checks; None: every metric
    retries: int = 3  # retries of a stage that failed transiently (exit code 75)
    retry_backoff_s: float = 10.0  # first retry delay; doubles each retry, with jitter
    dask_address: str | None = None  # a Dask scheduler for scale-out; None starts a LocalCluster
    dask_workers: int = 2  # workers of that LocalCluster

    @classmethod
    def load(cls, root: str | os.PathLike[str]) -> FlowSettings:
        """Read ``flows`` from ``<root>/params.yaml`` (every key optional)."""
        path = Path(root) / "params.yaml"
        section: dict[str, Any] = (load_params(path=path) or {}).get("flows") or {} if path.exists() else {}
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(section) - known)
        if unknown:
            raise InputError(path, f"unknown keys in flows: {unknown}")
        return cls(**section)

    @property
    def baseline_lock(self) -> str:
        """The dvc.lock snapshot kept beside the baseline: metrics/baseline.json -> metrics/baseline.lock.json."""
        path = Path(self.baseline)
        return (path.parent / f"{path.stem}.lock.json").as_posix()
