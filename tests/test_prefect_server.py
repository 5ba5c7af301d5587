"""The nightly run as the user guide's "Schedule" section sets it up, on a real Prefect server: ``prefect server
start`` on 127.0.0.1 (its own PREFECT_HOME, analytics off), a process work pool, the deployment registered from
params with ``python -m flows.nightly --work-pool``, a worker, a run triggered through the API, its report artifact
read back through the Prefect client; server and worker stopped at the end with no process of theirs left behind.

The project the worker runs is the small toy DVC pipeline of test_flows.py (the real one is test_flows.py's
``test_real_pipeline_once_twice_then_scaled_out``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import dvc, free_port, nightly_env, running, start, wait_healthy
from test_flows import DVC_YAML, PARAMS, STEP, TOY_PARAMS

pytestmark = pytest.mark.slow
POOL = "egoeval-test"
DEPLOYMENT = "egoeval-nightly/nightly"
RUN_TIMEOUT_S = 600


def processes_with(marker: str) -> list[int]:
    """Pids of live processes whose environment holds ``marker`` (our own PREFECT_HOME=...)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                environ = (entry / "environ").read_bytes().split(b"\0")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker.encode() in environ and state != "Z":
                found.append(int(entry.name))
    return found


def toy_project(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "metrics").mkdir()
    (root / "src/step.py").write_text(STEP)
    (root / "src/input.txt").write_text("hello\n")
    (root / "dvc.yaml").write_text(DVC_YAML)
    (root / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    (root / "toy.yaml").write_text(yaml.safe_dump(TOY_PARAMS))
    (root / ".gitignore").write_text("runs.log\n.egoeval-cache/\n")
    assert subprocess.run(["git", "init", "-q"], cwd=root).returncode == 0
    assert dvc(root, "init", "-q").returncode == 0
    return root


def prefect(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).with_name("prefect")), *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def prefect_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of this test's Prefect processes (own PREFECT_HOME, a free port on 127.0.0.1); afterwards
    any process still carrying that PREFECT_HOME is killed (the test itself asserts there is none)."""
    home = tmp_path / "prefect-home"
    env = nightly_env(
        home,
        PREFECT_API_URL=f"http://127.0.0.1:{free_port()}/api",
        PREFECT_SERVER_UI_ENABLED="false",
        PREFECT_WORKER_QUERY_SECONDS="2",
    )
    yield env
    for pid in processes_with(f"PREFECT_HOME={home}"):
        os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def serving_the_deployment(env: dict[str, str], root: Path, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """`prefect server start` as the user guide runs it (log in ``tmp_path``), the work pool created and the nightly
    deployment of ``root`` registered on it (`python -m flows.nightly --work-pool`); yields the server process."""
    port = env["PREFECT_API_URL"].split(":")[-1].split("/")[0]
    server_log = tmp_path / "server.log"
    server = start(env, server_log, "server", "start", "--host", "127.0.0.1", "--port", port, "--analytics-off")
    with running(server, server_log):
        wait_healthy(env, server, server_log)
        created = prefect(env, "work-pool", "create", POOL, "--type", "process")
        assert created.returncode == 0, created.stdout + created.stderr
        command = [sys.executable, "-m", "flows.nightly", "--work-pool", POOL, "--root", str(root)]
        deployed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        yield server


def test_a_worker_runs_the_nightly_deployment_triggered_through_the_api(
    prefect_env: dict[str, str], tmp_path: Path
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId
    from prefect.settings import PREFECT_API_URL, PREFECT_HOME, temporary_settings

    from flows.config import REPORT_ARTIFACT_KEY

    env = prefect_env
    root = toy_project(tmp_path / "toy")
    worker_log = tmp_path / "worker.log"
    with serving_the_deployment(env, root, tmp_path):
        settings = {PREFECT_API_URL: env["PREFECT_API_URL"], PREFECT_HOME: env["PREFECT_HOME"]}
        with temporary_settings(settings), get_client(sync_client=True) as client:
            deployment = client.read_deployment_by_name(DEPLOYMENT)
            (schedule,) = deployment.schedules
            assert schedule.schedule.cron == PARAMS["flows"]["schedule_cron"]  # the schedule comes from params
            assert schedule.schedule.timezone == PARAMS["flows"]["timezone"]
            assert deployment.work_pool_name == POOL and deployment.parameters == {"root": str(root)}

            with running(start(env, worker_log, "worker", "start", "--pool", POOL), worker_log) as worker:
                run = client.create_flow_run_from_deployment(deployment.id)  # what `prefect deployment run` does
                deadline = time.monotonic() + RUN_TIMEOUT_S
                while not (run := client.read_flow_run(run.id)).state.is_final():
                    assert worker.poll() is None, worker_log.read_text()[-3000:]
                    assert time.monotonic() < deadline, worker_log.read_text()[-3000:]
                    time.sleep(2)
                os.killpg(worker.pid, signal.SIGTERM)  # its run done: the worker stops at once
                sent = time.monotonic()
                worker.wait(timeout=60)
                stopped_s = time.monotonic() - sent
            assert run.state.is_completed(), f"{run.state}\n" + worker_log.read_text()[-3000:]
            assert stopped_s < 5, f"the idle worker took {stopped_s:.1f} s to stop:\n{worker_log.read_text()[-3000:]}"
            artifacts = client.read_artifacts(
                artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[run.id]))
            )
    (report,) = [artifact.data for artifact in artifacts if artifact.key == REPORT_ARTIFACT_KEY]
    assert "## toy" in report and "No baseline yet" in report
    assert (root / "metrics/toy.json").is_file()  # the worker's flow run ran the pipeline in the project
    assert processes_with(f"PREFECT_HOME={env['PREFECT_HOME']}") == []  # server, worker and flow run all gone


SLOW_PREPARE = 'if step == "prepare":\n    import time; time.sleep(600)  # the stage a stopped worker must take down'


def alive_in(pids: list[int]) -> list[int]:
    """Those of ``pids`` still running (not zombies)."""
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


def test_a_worker_stops_within_seconds_on_sigterm_or_ctrl_c_and_takes_its_runs_stage_along(
    prefect_env: dict[str, str], tmp_path: Path
) -> None:
    """`prefect worker start` as the user guide runs it, a flow run's stage in flight: SIGTERM to the worker alone
    (`kill`) and Ctrl-C (SIGINT to a terminal's foreground job, its whole process group) each stop it within 5 s
    without a traceback, and the run's processes (Prefect's flow-run process, which the
    worker kills, and the stage's DVC and command, which flows.keeper takes down with it) are gone within 5 s more."""
    env = prefect_env
    root = toy_project(tmp_path / "toy")
    step = root / "src/step.py"
    step.write_text(step.read_text().replace('if step == "prepare":', SLOW_PREPARE))
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    marker = f"PREFECT_HOME={env['PREFECT_HOME']}"
    with serving_the_deployment(env, root, tmp_path) as server:
        for how in ("kill", "ctrl-c"):  # SIGTERM to the worker alone; SIGINT to its process group (a terminal)
            (root / "runs.log").unlink(missing_ok=True)
            worker_log = tmp_path / f"worker-{how}.log"
            with running(start(env, worker_log, "worker", "start", "--pool", POOL), worker_log) as worker:
                triggered = prefect(env, "deployment", "run", DEPLOYMENT)
                assert triggered.returncode == 0, triggered.stdout + triggered.stderr
                deadline = time.monotonic() + RUN_TIMEOUT_S
                log = root / "runs.log"
                while not (log.exists() and "prepare" in log.read_text()):  # the stage is running
                    assert worker.poll() is None and time.monotonic() < deadline, worker_log.read_text()[-3000:]
                    time.sleep(0.5)
                run_processes = [pid for pid in processes_with(marker) if pid not in (server.pid, worker.pid)]
                if how == "kill":
                    os.kill(worker.pid, signal.SIGTERM)
                else:
                    os.killpg(worker.pid, signal.SIGINT)
                sent = time.monotonic()
                try:
                    worker.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    raise AssertionError(f"{how}: the worker outlived 5 s:\n{worker_log.read_text()[-3000:]}") from None
                while alive_in(run_processes) and time.monotonic() < sent + 10:
                    time.sleep(0.1)
            told = worker_log.read_text()
            assert alive_in(run_processes) == [], (how, run_processes, told[-3000:])
            assert len(run_processes) >= 4, run_processes  # the flow-run process, the keeper, DVC, the stage
            assert "Traceback" not in told and "stopped!" in told, (how, told[-3000:])
    assert processes_with(marker) == []
