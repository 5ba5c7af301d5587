"""backend openai_batch: the OpenAI Batch API against the loopback server's /v1/files and /v1/batches."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import tool_env
from openai_server import KeyedPolicy, OpenAIServer
from test_infer import (
    KEY_ENV,
    SECRET,
    descriptions_of,
    infer_params,
    make_items,
    model_spec,
    models,
    write_frames,
    write_stage_inputs,
)

from egoeval.backends.batch import STATE_FILE
from egoeval.core.errors import EndpointError, TransientFailure
from egoeval.egonormia.artifacts import BATCHES, RESPONSES
from egoeval.egonormia.inference import run_inference
from egoeval.egonormia.protocols import registry

FAST_POLL = {"batch_poll_s": 0.02, "batch_deadline_s": 30.0, "batch_max_requests": 50_000}


def infer(
    tmp_path: Path, server: OpenAIServer, items: pd.DataFrame, backend: str, protocol: str, **extra: object
) -> pd.DataFrame:
    """run_inference of one keyed model through ``backend``, with its own cache and request-file folder."""
    root = tmp_path / backend
    infer_settings, _ = infer_params(root)
    frames = root / "frames"
    index = write_frames(frames, items)
    spec = models(model_spec(server, backend=backend, **FAST_POLL | extra))
    table = run_inference(
        items, index, frames, descriptions_of(items), spec, infer_settings, registry()[protocol], root=root
    )
    return table.drop(columns=["backend"])


def bodies(server: OpenAIServer, via: str) -> list[str]:
    """Every request body the server got by ``via`` (online or batch), as JSON text in the order of its keys."""
    return sorted(json.dumps(r.body, ensure_ascii=False) for r in server.requests if r.via == via)


@pytest.mark.parametrize("protocol", ["official", "egoeval"])
def test_batch_answers_equal_online_answers_and_the_requests_are_identical(
    tmp_path: Path, monkeypatch, protocol: str
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    items = make_items(5)
    policy = KeyedPolicy.from_items(items)
    with OpenAIServer(policy=policy) as online_server, OpenAIServer(policy=policy) as batch_server:
        online = infer(tmp_path, online_server, items, "openai", protocol)
        batched = infer(tmp_path, batch_server, items, "openai_batch", protocol)
    pd.testing.assert_frame_equal(online, batched)
    assert (online["error"] == "").sum() > 0
    # the conversations are multi-turn: one batch per round (official: action, justification, sensible)
    assert batch_server.batches_created == (3 if protocol == "official" else 2)
    assert bodies(batch_server, "online") == []
    assert bodies(online_server, "online") == bodies(batch_server, "batch")
    records = sorted((tmp_path / "openai_batch" / BATCHES).glob("*.jsonl"))
    assert len(records) == batch_server.batches_created
    sent = sorted(json.dumps(json.loads(line)["body"], ensure_ascii=False) for f in records for line in f.open())
    assert sent == bodies(batch_server, "batch")  # the request files are exactly what was asked
    # byte for byte: each request file line's body is the body an online call sends (its last field)
    lines = [line.rstrip(b"\n") for f in records for line in f.open("rb")]
    in_files = sorted(line[line.index(b',"body":') + len(b',"body":') : -1] for line in lines)
    assert in_files == sorted(r.raw for r in online_server.requests)
    for file in tmp_path.rglob("*"):
        if file.is_file():
            assert SECRET.encode() not in file.read_bytes(), file


def test_an_expired_and_a_partly_failed_batch_are_completed_online(tmp_path: Path, monkeypatch) -> None:
    """An expired batch's unfinished half and a batch's error lines are sent online (with the online retries);
    the answers equal an online run's."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    items = make_items(4)
    policy = KeyedPolicy.from_items(items)
    with OpenAIServer(policy=policy) as online_server:
        online = infer(tmp_path, online_server, items, "openai", "egoeval")
    faults = ["500", None, "429", None, "400"]  # the first batch's lines 1, 3 and 5 come back with an error status
    with OpenAIServer(policy=policy, schedule=faults, batch_outcomes=["completed", "expired"]) as server:
        batched = infer(tmp_path, server, items, "openai_batch", "egoeval")
    pd.testing.assert_frame_equal(online, batched)
    first_round = sum(1 for r in server.requests if r.via == "batch" and "Justification" not in json.dumps(r.body))
    assert first_round > 5
    expired = server.batches["batch_1"]
    assert expired["status"] == "expired" and expired["error_file_id"] is not None
    assert expired["request_counts"]["completed"] == expired["request_counts"]["total"] // 2
    # every request was answered once: by a batch, or online when no batch answered it (then its conversation is
    # finished online: an action's justification follows it)
    answered = [json.dumps(r.body, ensure_ascii=False) for r in server.requests if r.via == "batch" and not r.fault]
    assert sorted(answered + bodies(server, "online")) == bodies(online_server, "online")
    assert len(bodies(server, "online")) > 3 + 5


def test_a_failed_batch_is_answered_online(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    items = make_items(2)
    policy = KeyedPolicy.from_items(items)
    with OpenAIServer(policy=policy) as online_server:
        online = infer(tmp_path, online_server, items, "openai", "official")
    with OpenAIServer(policy=policy, batch_outcomes=["failed"]) as server:
        batched = infer(tmp_path, server, items, "openai_batch", "official")
    pd.testing.assert_frame_equal(online, batched)
    assert server.batches["batch_0"]["status"] == "failed"
    # the failed round's conversations are finished online: every call of this run, as an online run sends them
    assert bodies(server, "online") == bodies(online_server, "online")
    first_round = len(items) * 3  # each clip's action in 3 settings
    assert server.batches["batch_0"]["request_counts"] == {"total": first_round, "completed": 0, "failed": first_round}
    assert server.batches_created == 1 and bodies(server, "batch") == []


@pytest.mark.parametrize("id_recorded", [True, False])
def test_a_run_killed_while_polling_resumes_its_batch_and_pays_once(
    tmp_path: Path, monkeypatch, id_recorded: bool
) -> None:
    """SIGKILL mid-poll: the rerun finds the submitted batch by its recorded id (or, killed before the id was
    recorded, by its recorded input file among the endpoint's batches); the server creates each batch once."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    items = make_items(3)
    with OpenAIServer(policy=KeyedPolicy.from_items(items), batch_turnaround_s=3600) as server:
        write_stage_inputs(tmp_path, items, model_spec(server, backend="openai_batch", **FAST_POLL))
        (tmp_path / "params.yaml").write_text(
            (tmp_path / "params.yaml").read_text().replace("protocol: official", "protocol: egoeval")
        )
        command = [sys.executable, "-m", "stages.egonormia.describe"]
        assert subprocess.run(command, cwd=tmp_path, env=tool_env(), capture_output=True).returncode == 0
        stage = [sys.executable, "-m", "stages.egonormia.infer"]
        env = tool_env(**{KEY_ENV: SECRET})
        process = subprocess.Popen(stage, cwd=tmp_path, env=env, stderr=subprocess.PIPE)
        state = tmp_path / ".egoeval-cache" / STATE_FILE
        deadline = time.monotonic() + 60
        while not (state.exists() and '"batch_0"' in state.read_text()):
            assert process.poll() is None and time.monotonic() < deadline, "the stage never submitted its batch"
            time.sleep(0.05)
        time.sleep(0.3)  # polling
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        assert server.batches_created == 1 and not (tmp_path / RESPONSES).exists()
        if not id_recorded:  # as if killed between creating the batch and recording its id
            state.write_text(state.read_text().replace('"batch_0"', "null"))
        server.batch_turnaround_s = 0.0
        done = subprocess.run(stage, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert "resuming 1 submitted batch" in done.stderr
    inputs = [server.files[b["input_file_id"]] for b in server.batches.values()]
    assert server.batches_created == 2 == len(set(inputs))  # action round (resumed), justification round
    assert not any(r.via == "online" for r in server.requests)
    responses = pd.read_parquet(tmp_path / RESPONSES)
    assert (responses["error"] == "").all() and len(responses) == 3 * 3 * 3
    assert json.loads(state.read_text()) == {"batches": []}
    assert len(list((tmp_path / BATCHES).glob("*.jsonl"))) == 2


def test_batches_not_done_by_the_deadline_stop_the_run_and_a_rerun_resumes_them(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    items = make_items(2)
    with OpenAIServer(policy=KeyedPolicy.from_items(items), batch_turnaround_s=3600) as server:
        monkeypatch.setitem(FAST_POLL, "batch_deadline_s", 0.3)
        with pytest.raises(TransientFailure, match=r"batches batch_0 not done within batch_deadline_s .*run again"):
            infer(tmp_path, server, items, "openai_batch", "egoeval")
        server.batch_turnaround_s = 0.0
        monkeypatch.setitem(FAST_POLL, "batch_deadline_s", 30.0)
        assert (infer(tmp_path, server, items, "openai_batch", "egoeval")["error"] == "").all()
    assert server.batches_created == 2  # the first round's batch once, then the second round's
    assert not any(r.via == "online" for r in server.requests)


@pytest.mark.bad_input
def test_an_endpoint_without_the_batch_api_stops_the_run_naming_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    items = make_items(1)
    with OpenAIServer(echo_auth=True) as server:
        elsewhere = server.url + "/chat-only"  # answers 404 to /files, as a server without the Batch API does
        with pytest.raises(EndpointError, match=r"chat-only/files answered http 404: .*Batch API") as error:
            infer(tmp_path, server, items, "openai_batch", "official", base_url=elsewhere)
    assert SECRET not in str(error.value) and server.batches_created == 0
