"""The nightly run as the user guide's "Schedule" section sets it up, on a real Prefect server: ``prefect server
start`` on 127.0.0.1 (its own PREFECT_HOME, analytics off), a process work pool, the deployment registered from
params with ``python -m flows.nightly --work-pool``, the project's worker (``python -m flows.worker``, Prefect's
process worker), a run triggered through the API, its report artifact read back through the Prefect client; the
worker stopped by SIGTERM and by Ctrl-C with one line, idle and with a run in flight; server and worker stopped at
the end with no process of theirs left behind.

The server, the pool and the deployment are started once for the module (``served``); each test writes the toy
step it needs. The project the worker runs is the small toy DVC pipeline of test_flows.py (the real one is
test_flows.py's ``test_real_pipeline_once_twice_then_scaled_out``).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import dvc, free_port, nightly_env, running, start, wait_healthy
from test_flows import DVC_YAML, PARAMS, STEP, TOY_PARAMS

pytestmark = pytest.mark.slow
POOL = "egoeval-test"
DEPLOYMENT = "egoeval-nightly/nightly"
RUN_TIMEOUT_S = 600
WORKER = [sys.executable, "-m", "flows.worker", "--pool", POOL]  # as the user guide's Schedule section runs it
POLL_S = 0.2  # the tests' own waits


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


@dataclass
class Served:
    """The module's Prefect server with the pool and the deployment of ``root`` on it."""

    env: dict[str, str]
    root: Path
    server: subprocess.Popen[str]
    logs: Path

    @property
    def marker(self) -> str:
        return f"PREFECT_HOME={self.env['PREFECT_HOME']}"

    def others(self) -> list[int]:
        """Live processes of this Prefect home outside the server's process group: workers and their runs."""
        return [pid for pid in processes_with(self.marker) if group_of(pid) != self.server.pid]


def group_of(pid: int) -> int | None:
    """The process group of ``pid`` (None once it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])
    except OSError:
        return None


@contextlib.contextmanager
def serving_the_deployment(env: dict[str, str], root: Path, logs: Path) -> Iterator[subprocess.Popen[str]]:
    """`prefect server start` as the user guide runs it (log in ``logs``), the work pool created and the nightly
    deployment of ``root`` registered on it (`python -m flows.nightly --work-pool`); yields the server process."""
    port = env["PREFECT_API_URL"].split(":")[-1].split("/")[0]
    server_log = logs / "server.log"
    server = start(env, server_log, "server", "start", "--host", "127.0.0.1", "--port", port, "--analytics-off")
    with running(server, server_log):
        wait_healthy(env, server, server_log)
        created = prefect(env, "work-pool", "create", POOL, "--type", "process")
        assert created.returncode == 0, created.stdout + created.stderr
        command = [sys.executable, "-m", "flows.nightly", "--work-pool", POOL, "--root", str(root)]
        deployed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        yield server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server, pool and deployment for the module (a server takes up to 70 s to start under load); afterwards no
    process of its PREFECT_HOME is left (any still there is killed, and fails the module's last test)."""
    logs = tmp_path_factory.mktemp("prefect")
    home = logs / "prefect-home"
    env = nightly_env(
        home,
        PREFECT_API_URL=f"http://127.0.0.1:{free_port()}/api",
        PREFECT_SERVER_UI_ENABLED="false",
        PREFECT_WORKER_QUERY_SECONDS="0.5",  # the worker picks a triggered run up within about a second
    )
    root = toy_project(logs / "toy")
    try:
        with serving_the_deployment(env, root, logs) as server:
            yield Served(env, root, server, logs)
        assert processes_with(f"PREFECT_HOME={home}") == []  # server, workers and flow runs all gone
    finally:
        for pid in processes_with(f"PREFECT_HOME={home}"):
            os.kill(pid, signal.SIGKILL)


def set_step(root: Path, step: str) -> None:
    """The toy pipeline's step as this test needs it; no log or metrics of an earlier run left."""
    (root / "src/step.py").write_text(step)
    (root / "runs.log").unlink(missing_ok=True)
    (root / "metrics/toy.json").unlink(missing_ok=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)


@dataclass
class Worker:
    """A running ``python -m flows.worker`` (its own process group, as a terminal's job) and its two streams."""

    process: subprocess.Popen[str]
    out: Path
    err: Path

    def told(self) -> str:
        """The ends of its stdout and stderr, for a failure's message."""
        return f"stdout:\n{self.out.read_text()[-2000:]}\nstderr:\n{self.err.read_text()[-3000:]}"

    def tracebacks(self) -> int:
        return (self.out.read_text() + self.err.read_text()).count("Traceback")

    def stop(self, signum: int, group: bool) -> tuple[float, str, str]:
        """``signum`` to the worker (or its process group); the seconds it took to exit (at most 5) and what it
        wrote to stdout and stderr after the signal."""
        out_before, err_before = len(self.out.read_bytes()), len(self.err.read_bytes())
        if group:
            os.killpg(self.process.pid, signum)
        else:
            os.kill(self.process.pid, signum)
        sent = time.monotonic()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the worker outlived 5 s after {signum!r}:\n{self.told()}") from None
        stopped_s = time.monotonic() - sent
        return stopped_s, self.out.read_bytes()[out_before:].decode(), self.err.read_bytes()[err_before:].decode()


@contextlib.contextmanager
def worker_of(env: dict[str, str], logs: Path, name: str, *options: str) -> Iterator[Worker]:
    """``python -m flows.worker --pool POOL OPTIONS`` running, its stdout and stderr in ``logs``/``name``.out, .err."""
    out, err = logs / f"{name}.out", logs / f"{name}.err"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        command = [*WORKER, *options]
        process = subprocess.Popen(command, env=env, stdout=stdout, stderr=stderr, start_new_session=True, text=True)
    with running(process, err):
        yield Worker(process, out, err)


def assert_one_line(signum: int, stopped_s: float, out: str, err: str, in_flight: str) -> str:
    """The worker stopped within 5 s saying exactly one line on stderr, how it stopped and what became of the run
    (``in_flight``, a regular expression); no Prefect shutdown message, no traceback. The line's run part."""
    name = signal.Signals(signum).name
    assert stopped_s < 5, (name, stopped_s, err)
    line = re.fullmatch(rf"worker: stopped by {name} after \d+ s; ({in_flight})\n", err)
    assert line, (name, err, out)  # nothing else on stderr after the signal
    assert "stopped!" not in out and "Received" not in out and "Traceback" not in out, (name, out)
    return line.group(1)


def test_a_worker_runs_the_nightly_deployment_triggered_through_the_api(served: Served) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId
    from prefect.settings import PREFECT_API_URL, PREFECT_HOME, temporary_settings

    from flows.config import REPORT_ARTIFACT_KEY

    env, root = served.env, served.root
    set_step(root, STEP)
    settings = {PREFECT_API_URL: env["PREFECT_API_URL"], PREFECT_HOME: env["PREFECT_HOME"]}
    with temporary_settings(settings), get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name(DEPLOYMENT)
        (schedule,) = deployment.schedules
        assert schedule.schedule.cron == PARAMS["flows"]["schedule_cron"]  # the schedule comes from params
        assert schedule.schedule.timezone == PARAMS["flows"]["timezone"]
        assert deployment.work_pool_name == POOL and deployment.parameters == {"root": str(root)}

        with worker_of(env, served.logs, "worker-run") as worker:
            run = client.create_flow_run_from_deployment(deployment.id)  # what `prefect deployment run` does
            deadline = time.monotonic() + RUN_TIMEOUT_S
            while not (run := client.read_flow_run(run.id)).state.is_final():
                assert worker.process.poll() is None and time.monotonic() < deadline, worker.told()
                time.sleep(POLL_S)
            stopped_s, out, err = worker.stop(signal.SIGTERM, group=False)  # its run done: it stops at once
        assert run.state.is_completed(), f"{run.state}\n{worker.told()}"
        assert_one_line(signal.SIGTERM, stopped_s, out, err, "no run in flight")
        assert worker.process.returncode == 128 + signal.SIGTERM
        assert worker.tracebacks() == 0, worker.told()
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[run.id]))
        )
    (report,) = [artifact.data for artifact in artifacts if artifact.key == REPORT_ARTIFACT_KEY]
    assert "## toy" in report and "No baseline yet" in report
    assert (root / "metrics/toy.json").is_file()  # the worker's flow run ran the pipeline in the project
    assert served.others() == []  # the worker and its flow run are gone


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


def test_a_worker_stops_within_seconds_on_sigterm_or_ctrl_c_with_one_line_and_takes_its_runs_stage_along(
    served: Served,
) -> None:
    """`python -m flows.worker` as the user guide runs it, a flow run's stage in flight: SIGTERM to the worker alone
    (`kill`) and Ctrl-C (SIGINT to a terminal's foreground job, its whole process group) each stop it within 5 s
    with one line naming the run it marked Crashed, no traceback, exit 128 + the signal; the run's processes
    (Prefect's flow-run process, which the worker kills, and the stage's DVC and command, which flows.keeper takes
    down with it) are gone within 5 s more, and the API holds the run Crashed."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, PREFECT_HOME, temporary_settings

    env, root = served.env, served.root
    set_step(root, STEP.replace('if step == "prepare":', SLOW_PREPARE))
    settings = {PREFECT_API_URL: env["PREFECT_API_URL"], PREFECT_HOME: env["PREFECT_HOME"]}
    for signum, group in ((signal.SIGTERM, False), (signal.SIGINT, True)):  # `kill`; a terminal's Ctrl-C
        (root / "runs.log").unlink(missing_ok=True)
        name = f"egoeval-{signum.name.lower()}"  # --name: the runs it marks Crashed are found by its name
        with worker_of(env, served.logs, name, "--name", name) as worker:
            if signum == signal.SIGTERM:  # the user guide's command once; the API (quicker) the other time
                triggered = prefect(env, "deployment", "run", DEPLOYMENT)
                assert triggered.returncode == 0, triggered.stdout + triggered.stderr
                (run_id,) = re.findall(r"UUID: ([0-9a-f-]{36})", triggered.stdout)
            else:
                with temporary_settings(settings), get_client(sync_client=True) as client:
                    run_id = str(
                        client.create_flow_run_from_deployment(client.read_deployment_by_name(DEPLOYMENT).id).id
                    )
            deadline = time.monotonic() + RUN_TIMEOUT_S
            log = root / "runs.log"
            while not (log.exists() and "prepare" in log.read_text()):  # the stage is running
                assert worker.process.poll() is None and time.monotonic() < deadline, worker.told()
                time.sleep(POLL_S)
            run_processes = [pid for pid in served.others() if pid != worker.process.pid]
            stopped_s, out, err = worker.stop(signum, group)
            sent = time.monotonic() - stopped_s
            while alive_in(run_processes) and time.monotonic() < sent + 10:
                time.sleep(0.05)
        assert worker.process.returncode == 128 + signum, worker.told()
        with temporary_settings(settings), get_client(sync_client=True) as client:
            run = client.read_flow_run(run_id)
        told = assert_one_line(signum, stopped_s, out, err, r"flow run '[\w-]+' marked Crashed")
        assert told == f"flow run {run.name!r} marked Crashed" and run.state.is_crashed(), (told, run.state)
        assert worker.tracebacks() == 0, worker.told()
        assert alive_in(run_processes) == [], (signum, run_processes, worker.told())
        assert len(run_processes) >= 4, run_processes  # the flow-run process, the keeper, DVC, the stage
        assert served.others() == []


def test_the_worker_imports_prefect_only_once_its_arguments_are_read() -> None:
    helped = subprocess.run([*WORKER[:3], "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert helped.returncode == 0 and "--pool" in helped.stdout, helped.stderr
    timed = subprocess.run(
        [sys.executable, "-X", "importtime", *WORKER[1:3], "--help"], capture_output=True, text=True, timeout=60
    )
    imported = {line.split("|")[-1].strip() for line in timed.stderr.splitlines() if line.startswith("import time:")}
    assert "egoeval.core.errors" in imported and not {"prefect", "httpx", "anyio"} & imported, sorted(imported)


@pytest.mark.bad_input
def test_the_worker_without_a_prefect_server_says_how_to_start_one(tmp_path: Path) -> None:
    from flows.worker import NO_SERVER

    alone = subprocess.run(
        WORKER, env=nightly_env(tmp_path / "prefect-home"), capture_output=True, text=True, timeout=120, check=False
    )
    assert (alone.returncode, alone.stderr) == (2, NO_SERVER + "\n")


@pytest.mark.bad_input
def test_a_worker_whose_prefect_server_is_gone_still_stops_with_one_line(tmp_path: Path) -> None:
    """PREFECT_API_URL names a port nobody listens on: the worker starts and keeps retrying as Prefect's does;
    SIGTERM still stops it within 5 s with one line saying the runs in flight are unknown, and none of Prefect's
    exit-time complaints about the unreachable API after it."""
    env = nightly_env(tmp_path / "prefect-home", PREFECT_API_URL=f"http://127.0.0.1:{free_port()}/api")
    with worker_of(env, tmp_path, "worker") as worker:
        deadline = time.monotonic() + 120
        while "started!" not in worker.out.read_text():
            assert worker.process.poll() is None and time.monotonic() < deadline, worker.told()
            time.sleep(POLL_S)
        assert "Unable to reach the Prefect API" in worker.err.read_text()  # Prefect's own logs while it runs
        stopped_s, out, err = worker.stop(signal.SIGTERM, group=False)
    assert_one_line(signal.SIGTERM, stopped_s, out, err, r"its runs in flight unknown \(.*\)")
    assert worker.process.returncode == 128 + signal.SIGTERM and worker.tracebacks() == 0, worker.told()
