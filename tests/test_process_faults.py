"""Runs cut short and starved, on copies of the reproduced workspace: real SIGKILL, SIGINT and SIGTERM to real
processes, a response cache locked by another process, a full disk (RLIMIT_FSIZE in the child), a bad params.yaml
under `dvc repro`. After every failed run the last good outputs are byte-identical to before it.

(Kills of the model stages mid-call, two repros at once and endpoint faults: test_reliability.py.)
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import copy_workspace, dvc, nightly_env, tool_env
from openai_server import OpenAIServer

pytestmark = [pytest.mark.slow, pytest.mark.bad_input]

KEPT = (
    "dvc.lock",
    "metrics/egonormia.json",
    "metrics/egohumans.json",
    "plots/egonormia/categories.csv",
    "plots/egohumans/sequences.csv",
    "plots/egohumans/head_speed.csv",
    "reports/index.html",
    "data/egonormia/predictions.parquet",
    "data/egonormia/predictions_eval.json",
    "data/egonormia/responses.parquet",
)
CACHE = ".egoeval-cache/responses.sqlite"
KEY_ENV = "EGOEVAL_TEST_KEY"


def snapshot(root: Path, cache: bool = True) -> dict[str, bytes]:
    """The outputs a failed run must leave as they were, and the response cache's files, for a run that never opens
    it (SQLite may rewrite a file it opens without changing its rows: those runs compare ``cached_answers``)."""
    files = {name: (root / name).read_bytes() for name in KEPT}
    if cache:
        files |= {str(p.relative_to(root)): p.read_bytes() for p in (root / CACHE).parent.glob("responses.sqlite*")}
    return files


def cached_answers(root: Path) -> dict[str, str]:
    with sqlite3.connect(root / CACHE) as db:
        return dict(db.execute("SELECT key, response FROM responses"))


def leftovers(root: Path) -> list[str]:
    """What a commit keeps beside an output while it runs (egoeval.core.io): nothing once a run has ended."""
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*.egoeval-*") if ".dvc" not in p.parts)


def set_params(root: Path, change: Callable[[dict], None]) -> None:
    params = yaml.safe_load((root / "params.yaml").read_text())
    change(params)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def prepare(root: Path, change: Callable[[dict], None], target: str = "egonormia_describe") -> None:
    """Change params.yaml and reproduce up to ``target`` (the check of the new params, and the stages before the one
    a test makes fail, which the change re-runs with success): the state the failed run must leave as it was."""
    set_params(root, change)
    run = dvc(root, "repro", target)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]


def assert_clean_failure(run: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    """A stage failed under `dvc repro` with ``code`` and one line holding ``words``, without a traceback."""
    assert run.returncode != 0 and f"exited with {code}" in run.stderr, run.stdout[-2000:] + run.stderr[-2000:]
    assert all(word in run.stderr for word in words), run.stderr[-2000:]
    assert "Traceback" not in run.stdout + run.stderr


@pytest.fixture
def workspace(reproduced: Path, tmp_path: Path) -> Path:
    return copy_workspace(reproduced, tmp_path / "ws")


def stage(root: Path, module: str, limit_bytes: int | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m <module>`` in ``root``; with ``limit_bytes``, no file it writes may grow beyond that (RLIMIT_FSIZE:
    the kernel refuses the write as on a full disk; Python ignores the SIGXFSZ that comes with it)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.run(
        [sys.executable, "-m", *module.split()],
        cwd=root,
        env=tool_env(**env),
        capture_output=True,
        text=True,
        preexec_fn=limit if limit_bytes is not None else None,
    )


# ---------------------------------------------------------------- item 5: a stage's outputs appear together

KILL_HOOK = """
import os, signal, sys
_target = os.environ.get("EGOEVAL_TEST_KILL_BEFORE_REPLACING")
if _target:
    def _kill(event, args):  # the instant before `_target` is replaced: the worst moment of a commit
        if event == "os.rename" and os.path.abspath(os.fsdecode(args[1])) == _target:
            os.kill(os.getpid(), signal.SIGKILL)
    sys.addaudithook(_kill)
"""


def change_responses(root: Path) -> None:
    """Another answer text for one response, so that the parse stage writes other predictions."""
    path = root / "data/egonormia/responses.parquet"
    responses = pd.read_parquet(path)
    responses.loc[responses["response"].notna().idxmax(), "response"] = "I cannot tell."
    responses.to_parquet(path, index=False)


COMMITS = {
    # stage: (its outputs in commit order, a change that makes them new, an input whose loss fails the next run)
    "egonormia_score": (
        ("metrics/egonormia.json", "plots/egonormia/categories.csv"),
        lambda root: set_params(root, lambda p: p["egonormia"]["score"].update(bootstrap_seed=1)),
        "data/egonormia/predictions.parquet",
    ),
    "egohumans_score": (
        ("metrics/egohumans.json", "plots/egohumans/sequences.csv", "plots/egohumans/head_speed.csv"),
        lambda root: set_params(root, lambda p: p["egohumans"]["score"].update(iou_threshold=0.6)),
        "data/egohumans/tracks/world-file",
    ),
    "egonormia_parse": (
        ("data/egonormia/predictions.parquet", "data/egonormia/predictions_eval.json"),
        change_responses,
        "data/egonormia/responses.parquet",
    ),
}
COMMITS["egohumans_track@bytetrack-gt"] = (  # a folder: replaced by two renames (the old one aside, the new in)
    ("data/egohumans/tracks/bytetrack-gt",),
    lambda root: set_params(root, lambda p: p["egohumans"]["track"]["config"]["bytetrack"].update(track_buffer=5)),
    "data/egohumans/detections/gt.parquet",
)
MODULES = {
    "egonormia_score": "stages.egonormia.score",
    "egohumans_score": "stages.egohumans.score",
    "egonormia_parse": "stages.egonormia.parse",
    "egohumans_track@bytetrack-gt": "stages.egohumans.track --tracker bytetrack --mode gt",
}


def content(path: Path) -> bytes | dict[str, bytes] | None:
    """A file's bytes, a folder's files by relative path, or None when there is nothing."""
    if path.is_dir():
        return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}
    return path.read_bytes() if path.exists() else None


@pytest.mark.parametrize("name", sorted(COMMITS))
def test_a_sigkill_mid_commit_is_rolled_back_by_the_next_run(workspace: Path, tmp_path: Path, name: str) -> None:
    outputs, change, needed = COMMITS[name]
    before, params = snapshot(workspace), (workspace / "params.yaml").read_bytes()
    last_good = {name: content(workspace / name) for name in outputs}
    original = shutil.copytree if (workspace / needed).is_dir() else shutil.copy2
    original(workspace / needed, tmp_path / "original")
    change(workspace)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(KILL_HOOK)
    env = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH", "")])),
        "EGOEVAL_TEST_KILL_BEFORE_REPLACING": str((workspace / outputs[-1]).resolve()),
    }
    killed = dvc(workspace, "repro", "--single-item", name, **env)
    assert killed.returncode != 0 and "failed to run" in killed.stderr, killed.stderr[-2000:]
    # killed between two renames: the first output is new and the last one old (a folder: moved aside, the new one
    # not yet in its place), and the commit's journal is there
    if len(outputs) > 1:
        assert content(workspace / outputs[0]) not in (None, last_good[outputs[0]])
        assert content(workspace / outputs[-1]) == last_good[outputs[-1]]
    else:
        assert content(workspace / outputs[0]) is None
    assert any(".egoeval-commit-" in path for path in leftovers(workspace))

    # the next run fails (an input is gone) but first rolls the killed commit back: every output as before the kill
    (workspace / "params.yaml").write_bytes(params)
    shutil.rmtree(workspace / needed) if (workspace / needed).is_dir() else (workspace / needed).unlink()
    failed = stage(workspace, MODULES[name])
    assert failed.returncode == 2 and needed in failed.stderr and "Traceback" not in failed.stderr, failed.stderr
    shutil.move(tmp_path / "original", workspace / needed)
    assert snapshot(workspace) == before and leftovers(workspace) == []
    assert {name: content(workspace / name) for name in outputs} == last_good
    assert "Data and pipelines are up to date" in dvc(workspace, "status").stdout  # DVC sees its last good state


# ---------------------------------------------------------------- item 10: params.yaml checked before any stage

BAD_PARAMS = {
    "a tracker key outside config": (
        lambda p: p["egohumans"]["track"].update(bytetrack={"track_buffer": 60}),
        "egohumans.track.bytetrack: unknown key",
    ),
    "a misspelt section": (
        lambda p: p.update(egonormai={"score": {"bootstrap_samples": 10}}),
        "egonormai: unknown key (did you mean 'egonormia'?)",
    ),
    "a misspelt key no stage declares": (
        lambda p: p["egonormia"]["report"].update(clipz=3),
        "egonormia.report.clipz: unknown key (did you mean 'clips'?)",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_PARAMS))
def test_dvc_repro_refuses_a_key_no_stage_declares_before_any_stage_runs(workspace: Path, case: str) -> None:
    change, message = BAD_PARAMS[case]
    before = snapshot(workspace)
    set_params(workspace, change)
    run = dvc(workspace, "repro")
    assert_clean_failure(run, 2, f"params.yaml: invalid params:\n  {message}")
    assert [line for line in run.stdout.splitlines() if line.startswith("Running stage")] == ["Running stage 'params':"]
    assert snapshot(workspace) == before
    assert "params:" in dvc(workspace, "status").stdout  # still to check: the next repro refuses it again


# ---------------------------------------------------------------- item 14: signals and contention


def configure_loopback(root: Path, server: OpenAIServer) -> None:
    """The model under evaluation answers from the loopback server (nothing of it is in the response cache)."""
    model = {"backend": "openai", "name": "loopback-vlm", "base_url": server.url, "api_key_env": KEY_ENV}
    model |= {"concurrency": 4, "timeout_s": 30, "max_retries": 0}
    prepare(root, lambda p: p["egonormia"]["model"].update(model))


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_infer_stage_stops_at_once_and_says_what_it_kept(workspace: Path, signum: int) -> None:
    with OpenAIServer(latency_s=2.0) as server:
        configure_loopback(workspace, server)
        before, answers = snapshot(workspace, cache=False), cached_answers(workspace)
        run = subprocess.Popen(
            ["dvc", "repro", "egonormia_infer"],
            cwd=workspace,
            env=tool_env(**{KEY_ENV: "sk-test"}),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # a terminal's Ctrl-C reaches the whole foreground group: so does this one
        )
        wait_for(lambda: len(server.requests) >= 8, "model calls in flight")
        table = processes()  # the stage's Python (not the shell DVC runs it through, nor a pool's workers)
        stages = [
            pid
            for pid in descendants(run.pid, table)
            if table[pid][1].split(" ")[1:3] == ["-m", "stages.egonormia.infer"]
        ]
        assert stages and all(catches(pid, signum) for pid in stages), f"{stages}: the stage does not catch {signum}"
        os.killpg(run.pid, signum)
        started = time.monotonic()
        _, err = run.communicate(timeout=120)
        stopped = time.monotonic() - started
        sent = len(server.requests)
        time.sleep(2 * server.latency_s)  # the conversations in flight went no further
        assert len(server.requests) == sent, err[-3000:]
    assert stopped < 10, f"took {stopped:.1f} s to stop: {err[-3000:]}"
    # Ctrl-C: DVC waits for the stage's command and reports its status; SIGTERM ends DVC at once, the stage just after.
    # DVC runs the command through $SHELL -c (/bin/sh without SHELL): bash execs it, so DVC sees the stage's own 130;
    # dash forks, and itself dies of the SIGINT (-2) while the stage says what it kept and exits
    if signum == signal.SIGINT:
        assert f"exited with {128 + signum}" in err or f"exited with -{signum}" in err, err
    else:
        assert run.returncode == -signum, err
    assert "Traceback" not in err, err[-2000:]
    lines = [line for line in err.splitlines() if line.startswith("error: interrupted")]
    assert len(lines) == 1, err[-3000:]
    (line,) = lines
    assert f"interrupted by {signal.Signals(signum).name}" in line and "kept the last good outputs" in line
    new = {key: value for key, value in cached_answers(workspace).items() if key not in answers}
    assert f"{len(new)} new model answers in {CACHE}" in line and 0 < len(new) < sent
    assert snapshot(workspace, cache=False) == before and leftovers(workspace) == []
    assert {key: cached_answers(workspace)[key] for key in answers} == answers


def processes() -> dict[int, tuple[int, str]]:
    """Every process: pid -> (parent pid, command line), from /proc."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                found[int(entry.name)] = (ppid, (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
            except (OSError, ValueError):
                continue
    return found


def descendants(pid: int, table: dict[int, tuple[int, str]] | None = None) -> set[int]:
    """Every process below ``pid`` (in ``table``, default: now)."""
    table = processes() if table is None else table
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        for child, (ppid, _) in table.items():
            if ppid == parent and child not in found:
                found.add(child)
                todo.append(child)
    return found


def catches(pid: int, signum: int) -> bool:
    """Whether ``pid`` has a handler for ``signum`` (the SigCgt mask of /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    (mask,) = [line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")]
    return bool(int(mask, 16) >> (signum - 1) & 1)


def alive(pid: int) -> bool:
    """A process that still runs (a zombie is dead: it only waits to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def is_frames_python(cmd: str) -> bool:
    """The frames stage's Python (or a worker it forked), not the shell DVC runs it through (dash forks: its
    ``sh -c`` command line names the stage too)."""
    return Path(cmd.split(" ", 1)[0]).name.startswith("python") and "stages.egonormia.frames" in cmd


def test_a_sigkilled_frames_stage_takes_its_workers_along_and_the_next_run_cleans_up(workspace: Path) -> None:
    prepare(workspace, lambda p: p["egonormia"]["frames"].update(jpeg_quality=80), target="params")
    frames = workspace / "data/egonormia/frames"

    def frames_files() -> dict[str, bytes]:  # the strips and each video variant's folder of files
        return {str(p.relative_to(frames)): p.read_bytes() for p in sorted(frames.rglob("*")) if p.is_file()}

    before = frames_files()
    repro = subprocess.Popen(
        ["dvc", "repro", "egonormia_frames"],
        cwd=workspace,
        env=tool_env(),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )

    def frames_processes() -> dict[int, int]:
        """The stage and its workers (forked: the same command line), pid -> parent pid."""
        table = processes()
        below = descendants(repro.pid, table)
        return {pid: table[pid][0] for pid in below if is_frames_python(table[pid][1])}

    wait_for(lambda: len(frames_processes()) >= 3, "the stage and its two decode workers")
    found = frames_processes()
    (stage_pid,) = [pid for pid, ppid in found.items() if ppid not in found]

    def workers_now() -> set[int]:
        """The stage's forked workers: its children with its command line."""
        table = processes()
        return {pid for pid, (ppid, cmd) in table.items() if ppid == stage_pid and is_frames_python(cmd)}

    # a short-lived helper (ldconfig, run by a library from a fork that has not yet exec'ed) can share the command
    # line for a moment: the workers are the children seen in two looks 0.2 s apart
    first = workers_now()
    time.sleep(0.2)
    workers = first & workers_now()
    assert len(workers) == 2, (first, workers)
    os.kill(stage_pid, signal.SIGKILL)
    _, err = repro.communicate(timeout=120)
    # DVC sees the kill itself (-9) where $SHELL execs the command (bash), the shell's 128 + 9 where it forks (dash)
    assert repro.returncode != 0 and ("exited with -9" in err or "exited with 137" in err), err[-2000:]
    wait_for(lambda: not any(alive(pid) for pid in workers), "the workers to die with their stage", timeout_s=5)
    assert frames_files() == before  # the last good frames
    assert leftovers(workspace) == [f"data/egonormia/.frames.egoeval-new-{stage_pid}"]  # what it had decoded

    again = dvc(workspace, "repro", "egonormia_frames")  # the frames are still to make: the next run cleans up
    assert again.returncode == 0 and "frames: 16 of 16 clips extracted" in again.stderr, again.stderr[-2000:]
    assert leftovers(workspace) == [] and sorted(frames_files()) == sorted(before)


def test_sigterm_stops_the_nightly_flow_its_stage_and_its_server(workspace: Path, tmp_path: Path) -> None:
    with OpenAIServer(latency_s=2.0) as server:
        configure_loopback(workspace, server)
        before = snapshot(workspace, cache=False)
        env = nightly_env(tmp_path / "prefect-home", **{KEY_ENV: "sk-test"})
        flow = subprocess.Popen(
            [sys.executable, "-m", "flows.nightly", "--once"],
            cwd=workspace,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_for(lambda: len(server.requests) >= 4, "the infer stage's model calls", timeout_s=300)
        below = descendants(flow.pid)  # the temporary Prefect server, DVC, the infer stage
        flow.send_signal(signal.SIGTERM)
        started = time.monotonic()
        out, err = flow.communicate(timeout=120)
        stopped = time.monotonic() - started
    assert flow.returncode == 128 + signal.SIGTERM and stopped < 30, (flow.returncode, stopped, err[-2000:])
    assert "nightly: stopped by SIGTERM: the running stage stopped with it" in err
    assert "error: interrupted by SIGTERM" in out + err  # the infer stage's own line, in the flow's log
    wait_for(lambda: not any(alive(pid) for pid in below), "every process of the run to end", timeout_s=10)
    assert len(below) >= 3 and snapshot(workspace, cache=False) == before and leftovers(workspace) == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["terminal-ctrl-c", "group-sigterm"])
def test_a_signal_to_the_nightly_process_group_stops_it_within_seconds(
    workspace: Path, tmp_path: Path, signum: int
) -> None:
    """A terminal's Ctrl-C (or a service manager's SIGTERM) reaches every process of the foreground job: the flow,
    DVC and the stage; the temporary Prefect server runs in a session of its own, so the flow reports its end to it
    and stops it: within 5 s, one line, no traceback, and the next run starts cleanly."""
    with OpenAIServer(latency_s=2.0) as server:
        configure_loopback(workspace, server)
        before = snapshot(workspace, cache=False)
        flow = subprocess.Popen(
            [sys.executable, "-m", "flows.nightly", "--once"],
            cwd=workspace,
            env=nightly_env(tmp_path / "prefect-home", **{KEY_ENV: "sk-test"}),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, as a terminal's foreground job has
        )
        wait_for(lambda: len(server.requests) >= 4, "the infer stage's model calls", timeout_s=300)
        below = descendants(flow.pid)
        os.killpg(flow.pid, signum)
        started = time.monotonic()
        out, err = flow.communicate(timeout=120)
        stopped = time.monotonic() - started
    name = signal.Signals(signum).name
    assert flow.returncode == 128 + signum and stopped < 5, (flow.returncode, stopped, err[-2000:])
    assert [line for line in err.splitlines() if line.startswith("nightly: ")][-1].startswith(
        f"nightly: stopped by {name}: the running stage stopped with it"
    )
    assert "Traceback" not in out + err and "ConnectError" not in out + err, err[-3000:]
    wait_for(lambda: not any(alive(pid) for pid in below), "every process of the run to end", timeout_s=10)
    assert snapshot(workspace, cache=False) == before and leftovers(workspace) == []
    status = dvc(workspace, "status")
    assert status.returncode == 0, status.stderr[-2000:]  # DVC's own lock files were left readable


LOCK_HOLDER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(600)
"""


def test_a_locked_response_cache_fails_after_one_busy_timeout(workspace: Path) -> None:
    prepare(workspace, lambda p: p["egonormia"]["model"].update(name="chance-b"))  # new requests: new answers
    before, answers = snapshot(workspace, cache=False), cached_answers(workspace)
    holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, CACHE], cwd=workspace, stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"locked\n"
        started = time.monotonic()
        run = dvc(workspace, "repro", "egonormia_infer")
        elapsed = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    assert_clean_failure(run, 75, f"{CACHE}: the response cache stayed locked by another process for 15 s")
    assert elapsed < 60, f"{elapsed:.0f} s: more than one busy timeout"  # 16 worker threads used to wait in turn
    assert snapshot(workspace, cache=False) == before and cached_answers(workspace) == answers
    assert leftovers(workspace) == []


# ---------------------------------------------------------------- item 15: resources


def test_a_full_disk_under_the_response_cache_is_transient(workspace: Path) -> None:
    prepare(workspace, lambda p: p["egonormia"]["model"].update(name="chance-b"))  # new requests: new answers
    before, answers = snapshot(workspace, cache=False), cached_answers(workspace)
    run = stage(workspace, "stages.egonormia.infer", limit_bytes=64 * 1024)
    assert run.returncode == 75 and "Traceback" not in run.stderr, run.stderr[-2000:]
    (line,) = [line for line in run.stderr.splitlines() if line.startswith("error: ")]
    assert f"{CACHE}: cannot write the response cache" in line and "free space on its disk and run again" in line
    assert snapshot(workspace, cache=False) == before and leftovers(workspace) == []
    assert {key: cached_answers(workspace)[key] for key in answers} == answers


def test_a_metrics_write_past_the_file_size_limit_keeps_the_last_good_outputs(workspace: Path) -> None:
    before = snapshot(workspace)
    set_params(workspace, lambda p: p["egonormia"]["score"].update(bootstrap_seed=1))
    run = stage(workspace, "stages.egonormia.score", limit_bytes=1000)
    assert run.returncode == 75 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert run.stderr.splitlines()[-1] == (
        "error: transient failure: metrics/egonormia.json: File too large: raise the file size limit (ulimit -f) "
        "and run again"
    )
    assert snapshot(workspace) == before and leftovers(workspace) == []


def test_an_unwritable_cache_dir_names_the_param(workspace: Path) -> None:
    prepare(workspace, lambda p: p["egonormia"]["infer"].update(cache_dir="params.yaml/cache"))
    before = snapshot(workspace)
    run = dvc(workspace, "repro", "egonormia_infer")
    assert_clean_failure(
        run, 2, "params.yaml/cache: cannot create the response cache folder", "egonormia.infer.cache_dir"
    )
    assert snapshot(workspace) == before and leftovers(workspace) == []


def test_a_stage_with_stdout_closed_still_writes_its_outputs(workspace: Path) -> None:
    """A stage's results are its files: with stdout closed (``>&-``) it writes them all the same."""
    (workspace / "metrics/egohumans.json").unlink()
    command = f"'{sys.executable}' -m stages.egohumans.score >&-"
    run = subprocess.run(command, shell=True, cwd=workspace, env=tool_env(), stderr=subprocess.PIPE, text=True)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert "Data and pipelines are up to date" in dvc(workspace, "status").stdout  # the same metrics again
