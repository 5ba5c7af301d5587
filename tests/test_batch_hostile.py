"""Hostile endpoints on the Batch API and the chat replies (issue 28 items 1-6, 17, 19, 22 and the key), through the
infer stage's CLI against the loopback server: exit status, a message naming the endpoint, file or key, no traceback,
and the response cache and last good outputs byte-identical after a failed run."""

from __future__ import annotations

import json
import secrets
import sqlite3
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

import forked
import pandas as pd
import pytest
import yaml
from conftest import EGOEVAL, REPO, copy_workspace, dvc, tool_env
from openai_server import KeyedPolicy, OpenAIServer, Served
from test_infer import KEY_ENV, SECRET, make_items, model_spec, write_stage_inputs

from egoeval.egonormia.artifacts import RESPONSES

FAST_POLL = {"batch_poll_s": 0.02, "batch_deadline_s": 30.0, "batch_max_requests": 50_000}
CACHE = Path(".egoeval-cache")


def prepare(root: Path, items: pd.DataFrame, server: OpenAIServer, protocol: str = "egoeval", **model: Any) -> None:
    """Stage inputs for one keyed model at ``server`` (backend openai_batch unless ``model`` says otherwise), the
    descriptions written by the describe stage."""
    write_stage_inputs(root, items, model_spec(server, **{"backend": "openai_batch", **FAST_POLL, **model}))
    params = root / "params.yaml"
    params.write_text(params.read_text().replace("protocol: official", f"protocol: {protocol}"))
    describe = [sys.executable, "-m", "stages.egonormia.describe"]
    assert subprocess.run(describe, cwd=root, env=tool_env(), capture_output=True).returncode == 0


def set_model(root: Path, **changes: Any) -> None:
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["egonormia"]["model"].update(changes)
    (root / "params.yaml").write_text(yaml.safe_dump(params))


def infer(root: Path) -> subprocess.CompletedProcess[str]:
    stage = [sys.executable, "-m", "stages.egonormia.infer"]
    env = tool_env(**{KEY_ENV: SECRET})
    return forked.run(stage, root, env, timeout=300)


def kept(root: Path) -> dict[str, bytes]:
    """The last good outputs and the response cache, byte for byte."""
    files = [root / RESPONSES, *sorted((root / CACHE).glob("responses.sqlite*"))]
    return {str(path.relative_to(root)): path.read_bytes() for path in files if path.exists()}


def last_good(root: Path, items: pd.DataFrame, server: OpenAIServer, **model: Any) -> dict[str, bytes]:
    """A good run through a well-behaved server, then the model renamed (so that nothing is cached for it) and
    pointed at ``server``: returns what must stay byte-identical."""
    policy = KeyedPolicy.from_items(items)
    with OpenAIServer(policy=policy) as good:
        prepare(root, items, good, **model)
        done = infer(root)
        assert done.returncode == 0, done.stderr
    set_model(root, name="keyed-vlm-2", base_url=server.url)
    return kept(root)


def assert_clean_failure(run: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    assert run.returncode == code, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    for word in words:
        assert word in run.stderr, (word, run.stderr)


# ------------------------------------------------------------------ item 1: a batch, file or reply not ours


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("rewrite", "named"),
    [
        (lambda batch: batch | {"id": "batch_999"}, "id 'batch_999'"),
        (lambda batch: batch | {"input_file_id": "file-77"}, "input_file_id 'file-77'"),
    ],
    ids=["another-id", "another-input-file"],
)
def test_a_polled_batch_that_is_another_batch_is_refused_naming_it(tmp_path: Path, rewrite: Any, named: str) -> None:
    items = make_items(2)
    with OpenAIServer(policy=KeyedPolicy.from_items(items), batch_rewrite=rewrite) as server:
        before = last_good(tmp_path, items, server)
        run = infer(tmp_path)
    assert_clean_failure(run, 2, f"{server.url}/batches/batch_0 answered a batch that is not this run's", named)
    assert kept(tmp_path) == before


@pytest.mark.bad_input
def test_a_results_file_of_another_batch_is_refused_naming_it(tmp_path: Path) -> None:
    def foreign(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [row | {"custom_id": f"{n:064x}"} for n, row in enumerate(rows)]

    items = make_items(2)
    with OpenAIServer(policy=KeyedPolicy.from_items(items), results_rewrite=foreign) as server:
        before = last_good(tmp_path, items, server)
        run = infer(tmp_path)
    assert_clean_failure(run, 2, f"{server.url}/files/file-1/content, the results of batch batch_0, answers none")
    assert kept(tmp_path) == before


# ------------------------------------------------------------------ item 2: duplicated, unknown, missing, malformed


def test_conflicting_duplicates_unknown_missing_and_malformed_result_lines_are_counted_and_dropped(
    tmp_path: Path,
) -> None:
    def tampered(rows: list[dict[str, Any]]) -> list[Any]:
        if not rows or "Justification" in json.dumps(rows):
            return rows  # the second round's batch as given
        twin = json.loads(json.dumps(rows[0]))
        twin["response"]["body"]["choices"][0]["message"]["content"] = "Answer: 5"  # a different reply, same id
        unknown = rows[1] | {"custom_id": "f" * 64}
        return [rows[0], twin, *rows[3:], unknown, '{"custom_id": "broken', "[]"]  # rows[1], rows[2] left out

    items = make_items(2)
    with OpenAIServer(policy=KeyedPolicy.from_items(items), results_rewrite=tampered) as server:
        prepare(tmp_path, items, server)
        run = infer(tmp_path)
    assert_clean_failure(
        run,
        0,
        "batch batch_0 (completed): 2 malformed result line(s); 1 reply(ies) for requests never asked (dropped); "
        "1 request(s) answered twice with different replies (both dropped); 3 of ",
    )
    responses = pd.read_parquet(tmp_path / RESPONSES)
    assert (responses["error"] == "").all()
    # only the matching replies were kept; the three dropped or missing requests (and what follows them in their
    # conversations) were asked online and answered correctly
    online = sum(1 for r in server.requests if r.via == "online")
    with sqlite3.connect(tmp_path / CACHE / "responses.sqlite") as db:
        stored = [json.loads(meta) for (meta,) in db.execute("SELECT meta FROM responses")]
    assert sum("batch" not in meta for meta in stored) == online >= 3


# ------------------------------------------------------------------ item 3 and the acceptance: the key, every encoding


def encodings(secret: str) -> dict[str, bytes]:
    escaped = "".join(f"\\u{ord(c):04x}" for c in secret)
    return {
        "raw": secret.encode(),
        "json-escaped": escaped.encode(),
        "json-escaped-upper": escaped.upper().replace("\\U", "\\u").encode(),
        "url-encoded": urllib.parse.quote(secret, safe="").encode(),
        "partly-escaped": (secret[:3] + escaped[6 * 3 : 6 * 6] + secret[6:]).encode(),
    }


def test_the_key_echoed_in_every_encoding_by_a_batch_endpoint_is_written_nowhere(tmp_path: Path) -> None:
    """Results and error lines quote the key JSON-\\u-escaped and URL-encoded (and one line is an error reply quoting
    it): no file of the workspace, no string of the cache or the outputs, no message holds it in any encoding."""
    secret = "sk-test/infer+secret-42"  # a slash and a plus: URL encoding changes them
    items = make_items(2)
    with OpenAIServer(policy=KeyedPolicy.from_items(items), echo_auth=True, schedule=["400"]) as server:
        prepare(tmp_path, items, server)
        stage = [sys.executable, "-m", "stages.egonormia.infer"]
        run = subprocess.run(
            stage, cwd=tmp_path, env=tool_env(**{KEY_ENV: secret}), capture_output=True, text=True, timeout=300
        )
    assert run.returncode == 0, run.stderr
    results = [server.files[b["output_file_id"]] for b in server.batches.values()]
    assert results, server.files.keys()
    for content in results:
        assert encodings(secret)["json-escaped"] in content, content[:3000]
    assert all(urllib.parse.quote(secret, safe="").encode() in content for content in results)
    responses = pd.read_parquet(tmp_path / RESPONSES)
    assert responses["response"].str.contains("Called with Bearer ***", regex=False).any()
    with sqlite3.connect(tmp_path / CACHE / "responses.sqlite") as db:
        cached = "\n".join(text for row in db.execute("SELECT response, meta FROM responses") for text in row)
    texts = [cached.encode(), responses.to_json().encode(), run.stderr.encode(), run.stdout.encode()]
    texts += [path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()]
    for name, spelled in encodings(secret).items():
        for text in texts:
            assert spelled not in text, name


# ------------------------------------------------------------------ item 4: one record of batches for every shard


def test_shards_killed_while_polling_record_every_batch_and_the_rerun_submits_none_again(tmp_path: Path) -> None:
    """Two shards (the sharded form of egonormia_infer, each its own process) submit a batch each and are killed
    while polling; the single-process rerun resumes both: no request is submitted twice."""
    items = make_items(4)
    with OpenAIServer(policy=KeyedPolicy.from_items(items), batch_turnaround_s=3600) as server:
        prepare(tmp_path, items, server)
        shard = (
            "import sys; from pathlib import Path; from egoeval.egonormia.scale_out import ShardedInference as S; "
            "from egoeval.egonormia.settings import EgoNormiaSettings; "
            "from egoeval.core.settings import benchmark_settings; "
            "form = S(benchmark_settings('egonormia', EgoNormiaSettings)); "
            "form.run(form.plan(Path('.'), 2)[int(sys.argv[1])])"
        )
        env = tool_env(**{KEY_ENV: SECRET})
        shards = [
            subprocess.Popen([sys.executable, "-c", shard, str(n)], cwd=tmp_path, env=env, stderr=subprocess.DEVNULL)
            for n in range(2)
        ]
        state = tmp_path / CACHE / "batches.json"
        deadline = time.monotonic() + 120
        while (
            server.batches_created < 2 or '"batch_1"' not in state.read_text() or '"batch_0"' not in state.read_text()
        ):
            assert all(p.poll() is None for p in shards) and time.monotonic() < deadline, "shards never submitted"
            time.sleep(0.05)
        for process in shards:
            process.kill()
            process.wait()
        assert len(json.loads(state.read_text())["batches"]) == 2
        server.batch_turnaround_s = 0.0
        run = infer(tmp_path)
    assert_clean_failure(run, 0, "resuming 2 submitted batch(es)")
    assert server.batches_created == 3  # the two shards' action rounds, then one justification round
    asked = [
        line["custom_id"]
        for b in server.batches.values()
        for line in map(json.loads, server.files[b["input_file_id"]].splitlines())
    ]
    assert len(asked) == len(set(asked))  # nothing submitted twice
    assert (pd.read_parquet(tmp_path / RESPONSES)["error"] == "").all()


# ------------------------------------------------------------------ item 5: bounded, sanitised progress


def test_progress_from_a_hostile_endpoint_is_sanitised_bounded_in_length_and_rate(tmp_path: Path) -> None:
    polls = []

    def noisy(batch: dict[str, Any]) -> dict[str, Any]:
        polls.append(1)
        counts = {"completed": len(polls) * 10**12, "total": "\x1b[2J" + "9" * 5000, "failed": -1}
        status = batch["status"] if batch["status"] != "in_progress" else "\x1b]0;owned\x07in_progress" + "x" * 9000
        return batch | {"status": status, "request_counts": counts}

    items = make_items(2)
    with OpenAIServer(policy=KeyedPolicy.from_items(items), batch_rewrite=noisy, batch_turnaround_s=1.5) as server:
        prepare(tmp_path, items, server)
        run = infer(tmp_path)
    assert_clean_failure(run, 0)
    assert len(polls) > 40  # the endpoint changed its counts at every poll
    progress = [line for line in run.stderr.splitlines() if " batch_" in line and "/" in line]
    assert "\x1b" not in run.stderr and "\x07" not in run.stderr
    assert max(len(line) for line in progress) < 200
    assert len(progress) <= 6, progress  # two rounds: the first poll and the last of each, at most
    assert "batch_0 ? ?/?" in run.stderr


# ------------------------------------------------------------------ item 6: the batch params are finite and bounded


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("batch_deadline_s", ".inf", "egonormia.model.batch_deadline_s"),
        ("batch_poll_s", ".inf", "egonormia.model.batch_poll_s"),
        ("batch_poll_s", ".nan", "egonormia.model.batch_poll_s"),
        ("batch_deadline_s", "1e9", "egonormia.model.batch_deadline_s"),
        ("batch_poll_s", "0", "egonormia.model.batch_poll_s"),
        ("batch_poll_s", "100", "must not exceed batch_deadline_s"),
    ],
)
def test_check_params_refuses_batch_times_that_are_not_finite_positive_and_bounded(
    tmp_path: Path, key: str, value: str, said: str
) -> None:
    params = (REPO / "params.yaml").read_text()
    params = params.replace("    batch_deadline_s: 86400 ", "    batch_deadline_s: 50 ")
    params = params.replace(f"    {key}: ", f"    {key}: {value} #", 1)
    (tmp_path / "params.yaml").write_text(params)
    run = subprocess.run([str(EGOEVAL), "check-params", "params.yaml"], cwd=tmp_path, capture_output=True, text=True)
    assert_clean_failure(run, 2, said)


# ------------------------------------------------------------------ item 17: a recorded batch the endpoint forgot


@pytest.mark.bad_input
def test_a_recorded_batch_the_endpoint_answers_404_for_names_the_state_file_and_what_to_do(tmp_path: Path) -> None:
    items = make_items(2)
    with OpenAIServer(policy=KeyedPolicy.from_items(items), batch_turnaround_s=3600) as server:
        before = last_good(tmp_path, items, server)
        set_model(tmp_path, batch_deadline_s=0.3)
        assert_clean_failure(infer(tmp_path), 75, "not done within batch_deadline_s")
        assert kept(tmp_path) == before
        server.forget_batches = True
        run = infer(tmp_path)
    state = CACHE / "batches.json"
    assert_clean_failure(
        run,
        2,
        f"{state}: records batch batch_0",
        f"which {server.url}/batches/batch_0 does not know (http 404)",
        f"delete its entry from {state} and run again",
    )
    assert kept(tmp_path) == before
    assert server.batches_created == 1  # nothing submitted again behind the user's back


# ------------------------------------------------------------------ item 19: content as a list of parts


@pytest.mark.bad_input
@pytest.mark.parametrize("protocol", ["official", "egoeval"])
def test_content_as_a_list_of_parts_stops_the_run_naming_the_shape(tmp_path: Path, protocol: str) -> None:
    def parts(body: dict[str, Any]) -> Served:
        return Served([{"type": "text", "text": "Answer: 1"}])  # type: ignore[arg-type]

    items = make_items(2)
    with OpenAIServer(policy=parts) as server:
        before = last_good(tmp_path, items, server, backend="openai", protocol=protocol)
        run = infer(tmp_path)
    assert_clean_failure(
        run,
        2,
        f"{server.url}/chat/completions (model 'keyed-vlm-2') answered choices[0].message.content as a list"
        " of 1 part(s) (types: text), not a string",
    )
    assert kept(tmp_path) == before


# ------------------------------------------------------------------ item 22: a 200 body that is not UTF-8


def test_a_reply_that_is_not_utf8_is_a_named_permanent_failure_under_egoeval(tmp_path: Path) -> None:
    items = make_items(3)
    with OpenAIServer(policy=KeyedPolicy.from_items(items), schedule=["not_utf8"]) as server:
        prepare(tmp_path, items, server, backend="openai")
        run = infer(tmp_path)
    assert_clean_failure(run, 0)
    responses = pd.read_parquet(tmp_path / RESPONSES)
    failed = responses[responses["error"] != ""]
    said = "http 200 with a JSON body holding bytes that are not UTF-8; nothing of it kept"
    assert said in list(failed["error"])  # that request's own failure, named (its justification: "action failed")
    assert {error.removeprefix("action failed: ") for error in failed["error"]} == {said}
    first = json.dumps(server.requests[0].body, sort_keys=True)
    assert sum(json.dumps(r.body, sort_keys=True) == first for r in server.requests) == 1  # never retried
    assert "\ufffd" not in "".join(responses["response"].dropna())


@pytest.mark.bad_input
def test_replies_that_are_never_utf8_stop_the_run_naming_the_endpoint(tmp_path: Path) -> None:
    items = make_items(3)
    with OpenAIServer(policy=KeyedPolicy.from_items(items), per_request=["not_utf8"] * 9) as server:
        before = last_good(tmp_path, items, server, backend="openai")
        run = infer(tmp_path)
    assert_clean_failure(run, 2, f"{server.url}/chat/completions (model 'keyed-vlm-2') rejected the first 8 calls")
    assert "not UTF-8" in run.stderr
    assert kept(tmp_path) == before


def test_a_reply_that_is_not_utf8_is_an_api_error_retried_under_official(tmp_path: Path) -> None:
    """The official client (openai 1.85.0 over httpx) raises UnicodeDecodeError on such a body, after one request
    (run against this server): an API error of that call, which the official code retries as any other."""
    items = make_items(3)
    with OpenAIServer(policy=KeyedPolicy.from_items(items), schedule=["not_utf8"]) as server:
        prepare(tmp_path, items, server, backend="openai", protocol="official")
        run = infer(tmp_path)
    assert_clean_failure(run, 0)
    assert (pd.read_parquet(tmp_path / RESPONSES)["error"] == "").all()
    first = json.dumps(server.requests[0].body, sort_keys=True)
    assert sum(json.dumps(r.body, sort_keys=True) == first for r in server.requests) == 2  # the API error, retried


@pytest.mark.slow
def test_no_file_of_the_workspace_or_the_dvc_cache_holds_the_key_after_a_batch_run_under_dvc_repro(
    reproduced: Path, tmp_path: Path
) -> None:
    """`dvc repro` with backend openai_batch against an endpoint that echoes the key JSON-\\u-escaped and URL-encoded
    in every result and error line: no file of the workspace (outputs, the response cache, .dvc/cache, dvc.lock,
    the request files) holds it in any encoding."""
    secret = "sk-canary/" + secrets.token_hex(8) + "+x"  # made at run time; a slash and a plus
    workspace = copy_workspace(reproduced, tmp_path / "ws")
    items = pd.read_parquet(workspace / "data/egonormia/fetched/items.parquet")
    params = yaml.safe_load((workspace / "params.yaml").read_text())
    with OpenAIServer(policy=KeyedPolicy.from_items(items), echo_auth=True, schedule=["400"]) as server:
        params["egonormia"]["model"].update(
            backend="openai_batch",
            name="loopback-batch-vlm",
            base_url=server.url,
            api_key_env=KEY_ENV,
            batch_poll_s=0.05,
        )
        params["egonormia"]["baselines"] = []
        (workspace / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        run = dvc(workspace, "repro", "egonormia_score", **{KEY_ENV: secret})
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    results = [server.files[b["output_file_id"]] for b in server.batches.values()]
    assert results and all(encodings(secret)["json-escaped"] in content for content in results)
    files = [path for path in workspace.rglob("*") if path.is_file() and not path.is_symlink()]
    assert any(".dvc/cache" in str(path) for path in files)
    for name, spelled in encodings(secret).items():
        for text in [run.stdout.encode(), run.stderr.encode(), *(path.read_bytes() for path in files)]:
            assert spelled not in text, name
