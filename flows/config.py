"""Where the nightly flow keeps its files, and its settings (params.yaml ``flows``, read by egoeval.core.settings)."""

from __future__ import annotations

import os
from pathlib import Path

from egoeval.core.settings import FlowsSettings, workspace_settings

PREFECT_DIR = Path(".egoeval-cache/prefect")  # under the project root: the last report
REPORT_FILE = PREFECT_DIR / "report.md"
REPORT_ARTIFACT_KEY = "egoeval-nightly-report"


def flow_settings(root: str | os.PathLike[str]) -> FlowsSettings:
    """params.yaml of the project at ``root``, validated whole (a bad key anywhere stops the run); its ``flows``."""
    return workspace_settings(root).flows


def baseline_lock(baseline: str) -> str:
    """The dvc.lock snapshot kept beside the baseline: metrics/baseline.json -> metrics/baseline.lock.json."""
    path = Path(baseline)
    return (path.parent / f"{path.stem}.lock.json").as_posix()
