"""The nightly flow: every stage of dvc.yaml as a Prefect task, in DVC's order, cached exactly when DVC would skip it.

For each stage, right before it runs (its upstream outputs are final then), DVC gives a cache key (sha256 of the
stage's command, its deps' DVC hashes and its params' values) and whether ``dvc repro`` would re-run it. The task
is called with that key and ``refresh_cache=changed``:

- DVC would skip the stage: the task resolves from its result record under the key -> Cached, nothing runs. When no
  record exists yet (the stage was reproduced outside Prefect), the flow first records DVC's lock entry under the key,
  so the state is Cached all the same.
- DVC would run it: the task body runs ``dvc repro --single-item <stage>`` (dvc.lock is updated; DVC's own lock keeps
  concurrent runs apart) and its result record is rewritten.

Task results live under ``<root>/.egoeval-cache/prefect/results``, so caching survives across processes and servers.
Retries (params ``flows.retries``, exponential backoff from ``flows.retry_backoff_s`` with jitter) happen only when a
stage exits 75 (transient: network, 5xx); bad input (exit 2) and any other failure fail at once. A failed stage
skips its downstream stages, not the other branches. With ``flows.dask_address`` set, the stages that have a sharded
form (flows/shard.py) run it on that Dask cluster, then ``dvc commit`` records them; their outputs are the same bytes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.filesystems import LocalFileSystem
from prefect.results import ResultStore
from prefect.serializers import JSONSerializer
from prefect.states import Completed, Failed, State
from prefect.tasks import exponential_backoff

from egoeval.io import InputError, atomic_write_text
from egoeval.stage import EXIT_BAD_INPUT, EXIT_TRANSIENT, TransientFailure, command_env
from flows.config import REPORT_ARTIFACT_KEY, REPORT_FILE, RESULTS_DIR, FlowSettings
from flows.dvc_stages import StageInfo, lock_snapshot, pipeline_stages, stage_outputs, stage_state, with_upstream
from flows.report import build_report, load_json

_EXIT_RE = re.compile(r"exited with (-?\d+)\s*$")  # DVC: "failed to run: <cmd>, exited with <code>"


class StageFailed(RuntimeError):
    """A stage's ``dvc repro`` failed; ``exit_code`` is the stage command's own code when DVC reported one."""

    def __init__(self, stage: str, exit_code: int | None, tail: str) -> None:
        super().__init__(f"stage {stage!r} failed (exit code {exit_code}):\n{tail}")
        self.stage, self.exit_code, self.tail = stage, exit_code, tail

    def __reduce__(self) -> tuple[Any, ...]:
        return StageFailed, (self.stage, self.exit_code, self.tail)

    @property
    def transient(self) -> bool:
        return self.exit_code == EXIT_TRANSIENT


def retry_transient(task: Any, task_run: Any, state: State) -> bool:
    """Retry only a stage that failed transiently (exit 75); bad input (exit 2) and any other failure fail at once."""
    exc = state.result(raise_on_failure=False)
    return isinstance(exc, StageFailed) and exc.transient


def _stage_env() -> dict[str, str]:
    """Stage commands run with this interpreter's ``python``; DVC's analytics stay off unless asked for."""
    return command_env(DVC_NO_ANALYTICS=os.environ.get("DVC_NO_ANALYTICS", "1"))


def _dvc(root: str, stage: str, *args: str) -> None:
    """Run a DVC command for a stage, streaming its output to the task log; raise StageFailed when it fails."""
    logger = get_run_logger()
    command = [sys.executable, "-m", "dvc", *args]
    logger.info("$ %s", " ".join(command))
    tail: deque[str] = deque(maxlen=30)
    with subprocess.Popen(
        command, cwd=root, env=_stage_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            if line.strip():
                tail.append(line)
                logger.info("%s", line)
    if proc.returncode != 0:
        codes = [int(m.group(1)) for line in tail if (m := _EXIT_RE.search(line))]
        raise StageFailed(stage, codes[-1] if codes else None, "\n".join(tail))


def _run_sharded(root: str, stage: str, cmd: str) -> None:
    """The stage's sharded form on the Dask cluster, then ``dvc commit`` records it in dvc.lock like a repro would."""
    from flows.shard import sharded_form

    form = sharded_form(cmd)
    assert form is not None, cmd
    try:
        form(root)
    except InputError as error:
        raise StageFailed(stage, EXIT_BAD_INPUT, str(error)) from error
    except TransientFailure as error:
        raise StageFailed(stage, EXIT_TRANSIENT, str(error)) from error
    _dvc(root, stage, "commit", "--force", stage)


@task(name="stage", persist_result=True, result_serializer=JSONSerializer(), retry_condition_fn=retry_transient)
def run_stage(root: str, stage: str, key: str, scale_out_cmd: str | None = None) -> dict[str, Any]:
    """Reproduce one stage (``dvc repro --single-item``, or its sharded form given its command); return its outputs."""
    if scale_out_cmd:
        _run_sharded(root, stage, scale_out_cmd)
    else:
        _dvc(root, stage, "repro", "--single-item", stage)
    return {"stage": stage, "key": key, "outs": stage_outputs(root, stage)}


class NightlyFailed(RuntimeError):
    """A nightly run failed (a stage, or a metric beyond the baseline); ``summary`` is the run's summary."""

    def __init__(self, message: str, summary: dict[str, Any]) -> None:
        super().__init__(message)
        self.summary = summary

    def __reduce__(self) -> tuple[Any, ...]:
        return NightlyFailed, (str(self), self.summary)


@dataclass(frozen=True)
class StageOutcome:
    stage: str
    state: str  # Prefect's final state name: Completed, Cached, Failed; "Skipped" after an upstream failure
    seconds: float
    message: str = ""


def _sharded_stages(stages: list[StageInfo]) -> set[str]:
    """Stages with a sharded form (EgoNormia inference, EgoHumans YOLO detection)."""
    from flows.shard import sharded_form

    return {info.name for info in stages if sharded_form(info.cmd) is not None}


def _record_dvc_result(store: ResultStore, root: str, stage: str, key: str) -> None:
    """DVC says the stage is up to date but Prefect holds no record under its key: record DVC's lock entry."""
    if not store.exists(key):
        store.write({"stage": stage, "key": key, "outs": stage_outputs(root, stage)}, key=key)


def run_stages(root: str, settings: FlowSettings, stages: list[StageInfo]) -> list[StageOutcome]:
    """Run the stages one after the other; a failed stage skips its downstream stages, not the other branches."""
    logger = get_run_logger()
    results = Path(root) / RESULTS_DIR
    store = ResultStore(result_storage=LocalFileSystem(basepath=str(results)), serializer=JSONSerializer())
    blocked: set[str] = set()
    outcomes: list[StageOutcome] = []
    sharded = _sharded_stages(stages) if settings.dask_address else set()
    for info in stages:
        if blocked.intersection(info.upstream):
            blocked.add(info.name)
            outcomes.append(StageOutcome(info.name, "Skipped", 0.0, "an upstream stage failed"))
            continue
        start = time.monotonic()
        current = stage_state(root, info.name)
        logger.info("stage %s: key %s, DVC would %s", info.name, current.key[:12], "run" if current.changed else "skip")
        if not current.changed:
            _record_dvc_result(store, root, info.name, current.key)
        state = run_stage.with_options(
            task_run_name=info.name,
            cache_key_fn=lambda *_, key=current.key: key,
            refresh_cache=current.changed,
            result_storage=results,
            retries=settings.retries,
            retry_delay_seconds=exponential_backoff(settings.retry_backoff_s),
            retry_jitter_factor=0.5,
        )(root, info.name, current.key, info.cmd if info.name in sharded else None, return_state=True)
        outcomes.append(StageOutcome(info.name, state.name, time.monotonic() - start, state.message or ""))
        if not state.is_completed():
            blocked.add(info.name)
    return outcomes


def current_metrics(root: str, stages: list[StageInfo]) -> tuple[dict[str, Any], dict[str, set[str]]]:
    """``{benchmark: metrics JSON}`` of every metrics file on disk, and per benchmark the stages feeding it."""
    metrics: dict[str, Any] = {}
    feeding: dict[str, set[str]] = {}
    for info in stages:
        for path in info.metrics:
            name = Path(path).stem
            content = load_json(Path(root) / path)
            if content is not None:
                metrics[name] = content
            feeding[name] = with_upstream(stages, [info.name])
    return metrics, feeding


def summary_rows(outcomes: list[StageOutcome]) -> list[list[str]]:
    """Per stage: name, final state, seconds, and for a stage that did not complete the last line of its error."""
    done = ("Completed", "Cached")
    return [
        [o.stage, o.state, f"{o.seconds:.1f}", "" if o.state in done else (o.message.splitlines() or [""])[-1][:300]]
        for o in outcomes
    ]


def format_summary(outcomes: list[StageOutcome]) -> str:
    """A plain-text table: stage, final state, seconds."""
    width = max([len(o.stage) for o in outcomes] + [5])
    lines = [f"{'stage':<{width}}  {'state':<9}  seconds"]
    lines += [f"{o.stage:<{width}}  {o.state:<9}  {o.seconds:7.1f}" for o in outcomes]
    return "\n".join(lines)


@flow(name="egoeval-nightly", persist_result=False)
def nightly_flow(root: str = ".") -> State:
    """Reproduce the whole pipeline, publish the report artifact, fail on a stage failure or a moved metric."""
    logger = get_run_logger()
    root = str(Path(root).resolve())
    settings = FlowSettings.load(root)
    stages = pipeline_stages(root)
    outcomes = run_stages(root, settings, stages)
    metrics, feeding = current_metrics(root, stages)
    baseline = load_json(Path(root) / settings.baseline)
    report = build_report(
        current=metrics,
        baseline=baseline,
        lock_now=lock_snapshot(root),
        lock_baseline=load_json(Path(root) / settings.baseline_lock),
        feeding=feeding,
        tolerance=settings.tolerance,
        gate=settings.gate,
        stage_rows=summary_rows(outcomes),
        baseline_path=settings.baseline,
    )
    atomic_write_text(Path(root) / REPORT_FILE, report.markdown)
    create_markdown_artifact(key=REPORT_ARTIFACT_KEY, markdown=report.markdown, description="metrics vs. baseline")
    summary = format_summary(outcomes)
    logger.info("stage summary:\n%s", summary)
    data = {"stages": [asdict(o) for o in outcomes], "report": str(Path(root) / REPORT_FILE)}
    failed = [o.stage for o in outcomes if o.state not in ("Completed", "Cached")]
    problems = []
    if failed:
        problems.append(f"stages not completed: {', '.join(failed)}")
    if report.regressions:
        problems.append("metric regression:\n" + report.failure_message())
    if problems:
        message = "\n".join(problems)
        return Failed(message=message, data=NightlyFailed(message, data))
    return Completed(message=f"{len(outcomes)} stages completed or cached; metrics within the baseline", data=data)
