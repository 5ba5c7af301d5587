"""The nightly flow: every stage of dvc.yaml as a Prefect task, in DVC's order, "Cached" exactly when DVC skips it.

params.yaml is validated whole first: a bad key fails the run before any stage. Then each stage's task asks DVC, at
the moment it runs (its upstream outputs are final then), whether ``dvc repro`` would re-run the stage:

- no: the task ends in the state **Cached** (type COMPLETED) with DVC's fingerprint of the stage (its command, its
  deps' DVC hashes, its params) and nothing runs. DVC's own records (dvc.lock, the DVC cache) are the cache: there is
  no second cache to fall out of step;
- yes: the task runs ``dvc repro --single-item <stage>`` (dvc.lock is updated; DVC's own lock keeps concurrent runs
  apart) and ends Completed.

Retries (params ``flows.retries``, exponential backoff from ``flows.retry_backoff_s`` with jitter) happen only when a
stage exits 75 (transient: network, 5xx); bad input (exit 2: a bad file, a bad param, a permanent API error) fails at
once. A failed stage skips its downstream stages, not the other branches. With ``flows.dask_address`` set, a stage
that declares a sharded form in dvc.yaml (``meta.scale_out``, see flows/shard.py) runs it on that Dask cluster, then
``dvc commit`` records it; its outputs are the same bytes.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.states import Completed, Failed, State
from prefect.tasks import exponential_backoff

from egoeval.core.errors import EXIT_BAD_INPUT, EXIT_TRANSIENT, FlowFailed, InputError, StageFailed, TransientFailure
from egoeval.core.io.atomic import atomic_write_text
from egoeval.core.settings import FlowsSettings
from egoeval.core.stage_shell import command_env
from egoeval.dvc_project import (
    StageInfo,
    benchmark_metrics,
    lock_snapshot,
    pipeline_stages,
    stage_outputs,
    stage_state,
    with_upstream,
)
from egoeval.reported import load_json
from flows.config import REPORT_ARTIFACT_KEY, REPORT_FILE, baseline_lock, flow_settings
from flows.nightly_report import build_report

KEEPER = Path(__file__).with_name("keeper.py")  # run by its path: the project (cwd) may have a flows/ of its own
_EXIT_RE = re.compile(r"exited with (-?\d+)\s*$")  # DVC: "failed to run: <cmd>, exited with <code>"


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
    command = [sys.executable, str(KEEPER), *command]  # the group dies with this process, however it dies
    tail: deque[str] = deque(maxlen=30)
    with subprocess.Popen(
        command,
        cwd=root,
        env=_stage_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        start_new_session=True,  # its own process group (led by flows.keeper): a stopped flow stops DVC and the stage
    ) as proc:
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                line = line.rstrip()
                if line.strip():
                    tail.append(line)
                    logger.info("%s", line)
        except BaseException:  # SIGTERM (Prefect raises it here), Ctrl-C, a cancelled run
            stop_process_group(proc)
            for line in proc.stdout:  # the stage's last words: what it stopped and what it kept
                logger.info("%s", line.rstrip())
            raise
    if proc.returncode != 0:
        codes = [int(m.group(1)) for line in tail if (m := _EXIT_RE.search(line))]
        raise StageFailed(stage, codes[-1] if codes else None, "\n".join(tail))


def stop_process_group(proc: subprocess.Popen[str], grace_s: float = 10.0) -> None:
    """SIGTERM to the keeper of a child's process group, which passes it to the group once (DVC and the stage it
    runs: the stage stops within seconds and says what it kept), SIGKILL to whatever is left of the group after
    ``grace_s``."""
    deadline = time.monotonic() + grace_s
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
        while time.monotonic() < deadline:
            proc.poll()  # reap DVC as soon as it exits
            os.killpg(proc.pid, 0)  # ProcessLookupError once no process of the group is left
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _run_sharded(root: str, stage: str, benchmark: str, scale_out: dict[str, str]) -> None:
    """The stage's sharded form on the Dask cluster, then ``dvc commit`` records it in dvc.lock like a repro would."""
    from flows.shard import run_sharded_stage

    try:
        run_sharded_stage(root, benchmark, scale_out)
    except InputError as error:
        raise StageFailed(stage, EXIT_BAD_INPUT, str(error)) from error
    except TransientFailure as error:
        raise StageFailed(stage, EXIT_TRANSIENT, str(error)) from error
    _dvc(root, stage, "commit", "--force", stage)


@task(name="stage", cache_policy=NO_CACHE, persist_result=False, retry_condition_fn=retry_transient)
def run_stage(root: str, stage: str, benchmark: str = "", scale_out: dict[str, str] | None = None) -> Any:
    """Reproduce one stage unless DVC would skip it: then end Cached with DVC's fingerprint, running nothing."""
    logger = get_run_logger()
    current = stage_state(root, stage)
    logger.info("stage %s: DVC key %s, DVC would %s", stage, current.key[:12], "run" if current.changed else "skip")
    if not current.changed:
        outs = stage_outputs(root, stage)
        return Completed(
            name="Cached", message="DVC: up to date", data={"stage": stage, "key": current.key, "outs": outs}
        )
    if scale_out:
        _run_sharded(root, stage, benchmark, scale_out)
    else:
        _dvc(root, stage, "repro", "--single-item", stage)
    # the key is the inputs' (checked before the run), not whether it ran: no second look at DVC's index
    return {"stage": stage, "key": current.key, "outs": stage_outputs(root, stage)}


@dataclass(frozen=True)
class StageOutcome:
    stage: str
    state: str  # Prefect's final state name: Completed, Cached, Failed; "Skipped" after an upstream failure
    seconds: float
    message: str = ""


def run_stages(root: str, settings: FlowsSettings, stages: list[StageInfo]) -> list[StageOutcome]:
    """Run the stages one after the other; a failed stage skips its downstream stages, not the other branches."""
    blocked: set[str] = set()
    outcomes: list[StageOutcome] = []
    for info in stages:
        if blocked.intersection(info.upstream):
            blocked.add(info.name)
            outcomes.append(StageOutcome(info.name, "Skipped", 0.0, "an upstream stage failed"))
            continue
        start = time.monotonic()
        state = run_stage.with_options(
            task_run_name=info.name,
            retries=settings.retries,
            retry_delay_seconds=exponential_backoff(settings.retry_backoff_s),
            retry_jitter_factor=0.5,
        )(root, info.name, info.benchmark or "", info.scale_out if settings.dask_address else None, return_state=True)
        outcomes.append(StageOutcome(info.name, state.name, time.monotonic() - start, state.message or ""))
        if not state.is_completed():
            blocked.add(info.name)
    return outcomes


def current_metrics(root: str, stages: list[StageInfo]) -> tuple[dict[str, Any], dict[str, set[str]]]:
    """``{benchmark: metrics JSON}`` of every metrics file on disk (benchmarks as dvc.yaml's ``meta`` names them), and
    per benchmark the stages feeding it. A benchmark with several metrics files gets ``{file stem: content}``."""
    metrics: dict[str, Any] = {}
    feeding: dict[str, set[str]] = {}
    by_name = {info.name: info for info in stages}
    for benchmark, paths in sorted(benchmark_metrics(stages).items()):
        contents = {Path(path).stem: load_json(Path(root) / path) for path in paths}
        present = {stem: content for stem, content in contents.items() if content is not None}
        if present:
            metrics[benchmark] = next(iter(present.values())) if len(paths) == 1 else present
        writers = [name for name, info in by_name.items() if set(info.metrics) & set(paths)]
        feeding[benchmark] = with_upstream(stages, writers)
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
    try:
        settings = flow_settings(root)  # params.yaml validated whole: a bad key stops the run before any stage
    except InputError as error:
        return Failed(message=f"bad params, nothing ran: {error}")
    stages = pipeline_stages(root)
    outcomes = run_stages(root, settings, stages)
    metrics, feeding = current_metrics(root, stages)
    baseline = load_json(Path(root) / settings.baseline)
    report = build_report(
        current=metrics,
        baseline=baseline,
        lock_now=lock_snapshot(root),
        lock_baseline=load_json(Path(root) / baseline_lock(settings.baseline)),
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
        return Failed(message=message, data=FlowFailed(message, data))
    return Completed(message=f"{len(outcomes)} stages completed or cached; metrics within the baseline", data=data)
