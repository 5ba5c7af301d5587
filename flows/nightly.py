"""The nightly run: ``python -m flows.nightly [--once | --accept-baseline | --work-pool POOL] [--root DIR]``.

- no option: serve the ``nightly`` deployment on the cron schedule of params ``flows.schedule_cron`` and
  ``flows.timezone`` (needs a Prefect server: set ``PREFECT_API_URL``);
- ``--once``: one full run now, in this process (without ``PREFECT_API_URL``, on a temporary local server); prints a
  per-stage summary and exits non-zero unless the run ends Completed; SIGTERM or Ctrl-C stops it within seconds,
  the running stage (DVC and its command) and the temporary server with it;
- ``--work-pool POOL``: register the deployment with that work pool (a worker runs it) instead of serving it here;
- ``--accept-baseline``: make the current metrics the baseline the next runs are compared with.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import prefect
from prefect.events.worker import EventsWorker
from prefect.logging.handlers import APILogWorker
from prefect.schedules import Cron
from prefect.settings import (
    PREFECT_API_URL,
    PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
    get_current_settings,
    temporary_settings,
)

from egoeval.core.errors import FlowFailed, InputError, Interrupted
from egoeval.core.io.atomic import json_bytes
from egoeval.core.io.commit import outputs_together
from egoeval.core.settings import FlowsSettings
from egoeval.core.stage_shell import signals_interrupt
from egoeval.dvc_project import lock_snapshot, pipeline_stages, stage_state
from flows.config import baseline_lock, flow_settings
from flows.pipeline import StageOutcome, current_metrics, format_summary, nightly_flow

DEPLOYMENT = "nightly"
SERVER_STOP_S = 5.0  # the temporary server's grace after SIGTERM before it is killed


@contextlib.contextmanager
def temporary_server() -> Iterator[None]:
    """Prefect's temporary server for one run (the app Prefect's own temporary server runs, on a free loopback port),
    in a session of its own: a terminal's Ctrl-C reaches this process and the run's stage, not the server, so the
    flow reports how the run ended to a server that is still there, and the server stops when the block ends."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server_env = {"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
    command = [sys.executable, "-m", "uvicorn", "--app-dir", str(prefect.__module_path__.parent), "--factory"]
    command += ["prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--log-level", "error", "--lifespan", "on"]
    env = {**os.environ, **server_env, **get_current_settings().to_environment_variables(exclude_unset=True)}
    server = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, start_new_session=True)
    api_url = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()
        while not _healthy(api_url):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the temporary Prefect server on {api_url} did not start (exit {server.poll()})")
            time.sleep(0.2)
        with temporary_settings(updates={PREFECT_API_URL: api_url}):
            try:
                yield
            finally:  # the run's last logs and events reach the server while it is there (not retried at exit)
                APILogWorker.drain_all(timeout=SERVER_STOP_S, at_exit=False)
                EventsWorker.drain_all(timeout=SERVER_STOP_S, at_exit=False)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=SERVER_STOP_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def _healthy(api_url: str) -> bool:
    try:
        return httpx.get(f"{api_url}/health", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def run_once(root: Path) -> int:
    """One run; print the per-stage summary and the final state; 0 when Completed."""
    if PREFECT_API_URL.value():
        return _report_run(root)
    print(
        "nightly: starting a temporary Prefect server (no PREFECT_API_URL set; waiting up to "
        f"{PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()} s for it to start)",
        file=sys.stderr,
        flush=True,
    )
    with temporary_server():
        return _report_run(root)


def _report_run(root: Path) -> int:
    state = nightly_flow(root=str(root), return_state=True)
    data = state.result(raise_on_failure=False)
    if isinstance(data, FlowFailed):
        data = data.summary
    if isinstance(data, dict) and "stages" in data:
        print(format_summary([StageOutcome(**row) for row in data["stages"]]))
        print(f"report: {data['report']}")
    print(f"flow run: {state.name}" + (f"\n{state.message}" if state.message else ""))
    return 0 if state.is_completed() else 1


def accept_baseline(root: Path) -> int:
    """Write the baseline (metrics of every benchmark) and its dvc.lock snapshot; refuse while a stage is stale."""
    settings = flow_settings(root)
    stages = pipeline_stages(root)
    stale = [info.name for info in stages if stage_state(root, info.name).changed]
    if stale:
        print(f"the pipeline is not up to date ({', '.join(stale)}): run it first", file=sys.stderr)
        return 1
    metrics, _ = current_metrics(str(root), stages)
    baseline, inputs = root / settings.baseline, root / baseline_lock(settings.baseline)
    with outputs_together(baseline, inputs) as outputs:
        outputs.write(baseline, json_bytes(metrics))
        outputs.write(inputs, json_bytes(lock_snapshot(root)))
    print(f"baseline: {settings.baseline} ({', '.join(sorted(metrics))}), inputs: {baseline_lock(settings.baseline)}")
    return 0


def schedule(settings: FlowsSettings) -> Cron:
    return Cron(settings.schedule_cron, timezone=settings.timezone)


def _server_configured() -> bool:
    """Schedules need a Prefect server that outlives this process (a temporary one cannot schedule)."""
    if PREFECT_API_URL.value():
        return True
    print(
        "no Prefect server: start one (`prefect server start`) and point at it "
        "(`prefect config set PREFECT_API_URL=http://127.0.0.1:4200/api`), or run once with --once",
        file=sys.stderr,
    )
    return False


def serve(root: Path) -> int:
    """Serve the deployment here: a scheduled run starts in a subprocess of this one."""
    if not _server_configured():
        return 2
    settings = flow_settings(root)
    nightly_flow.serve(name=DEPLOYMENT, schedules=[schedule(settings)], parameters={"root": str(root)}, limit=1)
    return 0


def deploy(root: Path, work_pool: str) -> int:
    """Register the deployment with a work pool; a worker of that pool (on a machine with this checkout) runs it."""
    if not _server_configured():
        return 2
    settings = flow_settings(root)
    code = Path(__file__).resolve().parents[1]  # the checkout holding flows/ (the project may be another folder)
    nightly_flow.from_source(source=str(code), entrypoint="flows/pipeline.py:nightly_flow").deploy(
        name=DEPLOYMENT,
        work_pool_name=work_pool,
        schedules=[schedule(settings)],
        parameters={"root": str(root)},
        concurrency_limit=1,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m flows.nightly", description="Run once, serve or deploy the nightly egoeval flow."
    )
    parser.add_argument("--root", type=Path, default=Path("."), help="the DVC project (default: .)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="run once now, locally, and exit")
    mode.add_argument("--accept-baseline", action="store_true", help="accept the current metrics as the baseline")
    mode.add_argument("--work-pool", metavar="POOL", help="deploy to this work pool instead of serving")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    try:
        flow_settings(root)  # params.yaml validated whole before anything starts
    except InputError as error:
        print(f"error: bad input: {error}", file=sys.stderr)
        return 2
    if args.once:
        try:
            with signals_interrupt():
                return run_once(root)
        except Interrupted as stop:
            print(
                f"nightly: stopped by {stop}: the running stage stopped with it (its last good outputs stay); the "
                "stages that had finished keep their outputs and dvc.lock entries; run again to go on",
                file=sys.stderr,
            )
            return 128 + stop.signum
    if args.accept_baseline:
        return accept_baseline(root)
    if args.work_pool:
        return deploy(root, args.work_pool)
    return serve(root)


if __name__ == "__main__":
    raise SystemExit(main())
