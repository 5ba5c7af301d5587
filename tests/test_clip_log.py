"""Per-clip logs: ``egoeval show CLIP`` and the egonormia_clip_logs stage's pages, on the reproduced sample and on the
replies of a loopback endpoint that answers with hostile text (markup, terminal escapes, a key, a very long reply)."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import forked
import pandas as pd
import pytest
from conftest import EGOEVAL, REPO, copy_workspace, tool_env, write_params
from openai_server import KeyedPolicy, OpenAIServer, last_user_text

from egoeval.backends import ChatRequest, Decoding, ImagePart, Message, TextPart, request_key
from egoeval.core.settings import benchmark_settings
from egoeval.egonormia.artifacts import CLIP_LOGS, ITEMS, PREDICTIONS, RESPONSES, clip_log_name
from egoeval.egonormia.clip_log import MAX_SHOWN_CHARS, clip_log, format_html, format_text, load_sources
from egoeval.egonormia.settings import EgoNormiaSettings

LETTERS = "ABCDE"
KEY_ENV = "EGOEVAL_TEST_API_KEY"
SECRET = "sk-test-show-secret-17"
CANARY = "sk-canary-in-a-reply-0123456789abcdef"  # a reply quotes it; the key variable holds it when the logs are made
LONG = 30_000  # characters of a reply: more than a log shows


def show(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``egoeval show ARGS`` in the workspace ``root``."""
    return forked.run([EGOEVAL, "show", *args], root, tool_env(**env), timeout=300)


def sent_request(call: dict[str, Any], root: Path) -> ChatRequest:
    """The request a log's call says was sent, rebuilt from the log alone: its texts, and each image from the file
    it names, whose size and sha256 must be the ones shown."""
    messages = []
    for message in call["messages"]:
        parts: list[TextPart | ImagePart] = []
        for part in message["content"]:
            if part["type"] == "image":
                data = (root / part["file"]).read_bytes()
                assert (len(data), hashlib.sha256(data).hexdigest()) == (part["bytes"], part["sha256"])
                parts.append(ImagePart(data))
            else:
                parts.append(TextPart(part["text"]))
        messages.append(Message(message["role"], tuple(parts)))
    decoding = Decoding(**call["decoding"])
    return ChatRequest(tuple(messages), decoding, namespace=call["namespace"])


@pytest.mark.slow
def test_show_gives_a_clips_messages_replies_parsed_answers_and_gold_as_recorded(reproduced: Path) -> None:
    items = pd.read_parquet(reproduced / ITEMS)
    responses = pd.read_parquet(reproduced / RESPONSES)
    predictions = pd.read_parquet(reproduced / PREDICTIONS)
    for clip in items["id"].iloc[:3]:
        run = show(reproduced, clip, "--json")
        assert run.returncode == 0, run.stderr
        log = json.loads(run.stdout)
        item = items[items["id"] == clip].iloc[0]
        assert log["clip"] == clip
        assert log["gold"]["action"] == LETTERS[item["correct_idx"]]
        assert log["gold"]["sensible"] == [LETTERS[k] for k in sorted(item["sensible_idx"])]
        assert [o["behavior"] for o in log["options"]] == list(item["behaviors"])
        mine = predictions[predictions["id"] == clip]
        assert [(r["setting"], r["model"]) for r in log["runs"]] == sorted(
            zip(mine["setting"], mine["model"], strict=True)
        )
        for entry in log["runs"]:
            parsed = mine[(mine["setting"] == entry["setting"]) & (mine["model"] == entry["model"])].iloc[0]
            assert entry["parsed"]["action"]["index"] == parsed["action"]
            assert entry["parsed"]["justification"]["index"] == parsed["justification"]
            assert entry["parsed"]["sensible"]["indices"] == sorted(parsed["sensible"])
            assert entry["parsed"]["action"]["right"] == (parsed["action"] == item["correct_idx"])
            said = responses[
                (responses["id"] == clip)
                & (responses["setting"] == entry["setting"])
                & (responses["model"] == entry["model"])
            ]
            assert sorted(c["subtask"] for c in entry["calls"]) == sorted(said["subtask"])
            for call in entry["calls"]:
                row = said[said["subtask"] == call["subtask"]].iloc[0]
                assert call["reply"] == row["response"] and call["request_key"] == row["request_key"]
                assert call["sent_as_rebuilt"] is True
                # the messages shown hash to the key recorded when the call was made: exactly what was sent
                assert request_key(entry["backend"], entry["model"], sent_request(call, reproduced)) == row.request_key
        video = [c for r in log["runs"] if r["setting"] == "video" for c in r["calls"]]
        assert video and all(
            any(part["type"] == "image" for m in c["messages"] for part in m["content"]) for c in video
        )
        # a video variant's calls (the sample runs video:frames8) carry its own files, each named, in time order
        frames = [c for r in log["runs"] if r["setting"] == "video:frames8" for c in r["calls"]]
        named = [[p["file"] for m in c["messages"] for p in m["content"] if p["type"] == "image"] for c in frames]
        folder = "data/egonormia/frames/frames8/"
        assert frames and all(
            len(files) == 8 and files == sorted(files) and all(f.startswith(folder) for f in files) for files in named
        ), named
        # a native variant's clip is shown as a video part, by file, size and hash, in the terminal and on the page
        part = next(p for m in frames[0]["messages"] for p in m["content"] if p["type"] == "image")
        part["type"] = "video"
        assert f"[video {part['file']}, " in format_text(log)
        assert f"[video <code>{part['file']}</code>" in format_html(log)

    clip = items["id"].iloc[0]
    text = show(reproduced, clip, "--setting", "video", "--model", "chance")
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(f"clip {clip}") and "== setting video · model chance" in text.stdout
    assert "== setting blind" not in text.stdout and "exactly what was sent" in text.stdout
    assert f"[image data/egonormia/frames/{clip}.jpg" in text.stdout
    listed = show(reproduced, "--list")
    assert listed.returncode == 0 and listed.stdout.split() == list(items["id"])

    # every clip's page, and the report's links to them
    pages = reproduced / CLIP_LOGS
    assert sorted(p.name for p in pages.iterdir()) == sorted([*map(clip_log_name, items["id"]), "index.html"])
    index = (pages / "index.html").read_text()
    assert all(f'href="{clip_log_name(c)}"' in index for c in items["id"])
    page = (pages / clip_log_name(clip)).read_text()
    assert "exactly what was sent" in page and f"data/egonormia/frames/{clip}.jpg" in page
    report = (reproduced / "reports/index.html").read_text()
    links = re.findall(r'href="(clips/[^"]+)"', report)
    assert "clips/index.html" in links and len(links) > 2
    assert all((reproduced / "reports" / link).is_file() for link in links)


@pytest.mark.slow
@pytest.mark.bad_input
def test_an_unknown_clip_model_or_setting_is_named_with_what_is_known(reproduced: Path) -> None:
    count = len(pd.read_parquet(reproduced / ITEMS))
    clip = pd.read_parquet(reproduced / ITEMS)["id"].iloc[0]
    for args, said in (
        (["no-such-clip"], f"clip 'no-such-clip' is not one of its {count} clips"),
        ([clip[:-1]], f"did you mean {clip!r}?"),
        (
            [clip, "--setting", "video:native"],  # a variant the sample does not run
            "no setting 'video:native' in the data (known: blind, pipeline, video, video:frames8)",
        ),
        ([clip, "--model", "gpt-9"], "no model 'gpt-9' in the data (known: "),
    ):
        run = show(reproduced, *args)
        assert run.returncode == 2 and said in run.stderr and "Traceback" not in run.stderr, run.stderr
        assert run.stdout == ""
    run = show(reproduced)
    assert run.returncode == 2 and "name a clip" in run.stderr


def hostile(keyed: KeyedPolicy) -> Any:
    """Correct answers after hostile text: markup and terminal escapes quoting a key, or a very long reasoning."""

    def policy(body: dict[str, Any]) -> str:
        answer = keyed(body)
        if "Select every sensible one" in last_user_text(body):
            return "y" * LONG + "\n" + answer
        return f"</pre><script>alert('owned')</script> \x1b[2J\x1b[31mred\x1b[0m key {CANARY}\n{answer}"

    return policy


def canonical(messages: list[tuple[str, list[tuple[str, str]]]]) -> str:
    return json.dumps(messages, ensure_ascii=False)


def received(body: dict[str, Any]) -> str:
    """A request as the endpoint received it: per message its role and parts (text, or an image's sha256)."""
    messages = []
    for message in body["messages"]:
        content = message["content"]
        parts = [("text", content)] if isinstance(content, str) else []
        for part in [] if isinstance(content, str) else content:
            if part["type"] == "text":
                parts.append(("text", part["text"]))
            else:
                data = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
                parts.append(("image", hashlib.sha256(data).hexdigest()))
        messages.append((message["role"], parts))
    return canonical(messages).replace(CANARY, "***")


def logged(call: dict[str, Any]) -> str:
    return canonical(
        [
            (m["role"], [("image", p["sha256"]) if p["type"] == "image" else ("text", p["text"]) for p in m["content"]])
            for m in call["messages"]
        ]
    )


@pytest.mark.slow
@pytest.mark.bad_input
def test_logs_of_a_loopback_endpoint_show_what_it_received_redacted_escaped_and_bounded(
    reproduced: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = copy_workspace(reproduced, tmp_path / "ws")
    items = pd.read_parquet(root / ITEMS)
    with OpenAIServer(policy=hostile(KeyedPolicy.from_items(items)), echo_auth=True) as server:
        model = {"backend": "openai", "name": "loopback-vlm", "base_url": server.url, "api_key_env": KEY_ENV}
        write_params(root, {"egonormia": {"protocol": "egoeval", "model": model, "baselines": []}})
        for stage in ("infer", "parse"):
            run = subprocess.run(
                [sys.executable, "-m", f"stages.egonormia.{stage}"],
                cwd=root,
                env=tool_env(**{KEY_ENV: SECRET}),
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert run.returncode == 0, run.stderr[-3000:]
        requests = [r.body for r in server.requests]
    # four settings (the sample runs the strip and the video:frames8 variant), three calls each (two conversations)
    assert len(requests) == len(items) * 4 * 3

    # every call of every clip's log is a request the endpoint received, message for message, image for image
    monkeypatch.setenv(KEY_ENV, CANARY)  # the key the logs are made with: a reply quotes it
    sources = load_sources(benchmark_settings("egonormia", EgoNormiaSettings, root / "params.yaml"), root)
    calls = [c for clip in items["id"] for r in clip_log(sources, clip)["runs"] for c in r["calls"]]
    assert len(calls) == len(requests) and all(c["sent_as_rebuilt"] is True for c in calls)
    assert sorted(map(logged, calls)) == sorted(map(received, requests))
    second = [c for c in calls if c["subtask"] == "justification"]
    assert all(c["messages"][2]["role"] == "assistant" for c in second)  # the model's own reply, as it was sent
    assert all("<script>" in c["messages"][2]["content"][0]["text"] for c in second)

    clip = items["id"].iloc[0]
    env = {KEY_ENV: CANARY}
    text = show(root, clip, "--setting", "pipeline", **env)
    as_json = show(root, clip, "--json", **env)
    stage = subprocess.run(
        [sys.executable, "-m", "stages.egonormia.clip_logs"], cwd=root, env=tool_env(**env), capture_output=True
    )
    assert text.returncode == as_json.returncode == stage.returncode == 0, text.stderr + as_json.stderr
    page = (root / CLIP_LOGS / clip_log_name(clip)).read_text()
    pages = "".join(p.read_text() for p in (root / CLIP_LOGS).iterdir())

    # the key is never shown, in any form the endpoint's echo or the reply gave it
    for shown in (text.stdout, as_json.stdout, pages):
        assert CANARY not in shown and SECRET not in shown and "key ***" in shown
    assert "Bearer ***" in as_json.stdout  # the endpoint's echo of the Authorization header, redacted as it came
    # markup is escaped on the pages, terminal escapes are shown as text in a terminal
    assert "<script>" not in pages and "&lt;/pre&gt;&lt;script&gt;alert(&#x27;owned&#x27;)" in page
    assert "\x1b" not in text.stdout and "\\x1b[2J\\x1b[31mred" in text.stdout
    # a long reply is cut, and the cut said
    log = json.loads(as_json.stdout)
    sensible = [c for r in log["runs"] for c in r["calls"] if c["subtask"] == "sensible"]
    assert sensible and all(len(c["reply"]) < MAX_SHOWN_CHARS + 100 for c in sensible)
    assert all(c["reply"].endswith(" more characters not shown]") for c in sensible)
    assert len(page) < 20 * MAX_SHOWN_CHARS


@pytest.mark.parametrize("clip", ["../../etc/passwd", "a/b", ".hidden", "index", "clip-x", "x" * 200, "é"])
def test_a_clip_id_never_names_a_path_outside_the_logs(clip: str) -> None:
    name = clip_log_name(clip)
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*\.html", name) and name != "index.html"
    assert clip_log_name("ordinary-id_1.2") == "ordinary-id_1.2.html"


@pytest.mark.slow
def test_the_user_guide_documents_show_and_its_commands_run(reproduced: Path) -> None:
    guide = (REPO / "docs/user-guide.md").read_text()
    section = guide.split("## Per-clip logs", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^(egoeval show [^#\n]*?)\s*(?:#.*)?$", section, re.MULTILINE)
    assert len(commands) >= 3
    shown = re.search(r"```text\n(.*?)```", section, re.DOTALL).group(1).strip().splitlines()
    for command in commands:
        run = subprocess.run(
            command, shell=True, cwd=reproduced, env=tool_env(), capture_output=True, text=True, timeout=300
        )
        assert run.returncode == 0, (command, run.stderr)
        if "--json" in command:
            json.loads(run.stdout)
    first = subprocess.run(commands[0], shell=True, cwd=reproduced, env=tool_env(), capture_output=True, text=True)
    assert all(line.rstrip() in first.stdout for line in shown if line.strip() and not line.startswith("...")), shown


@pytest.mark.slow
@pytest.mark.bad_input
def test_a_log_says_when_the_params_or_inputs_changed_since_the_calls(reproduced: Path, tmp_path: Path) -> None:
    root = copy_workspace(reproduced, tmp_path / "ws")
    clip = pd.read_parquet(root / ITEMS)["id"].iloc[0]
    descriptions = pd.read_parquet(root / "data/egonormia/descriptions.parquet")
    descriptions.loc[descriptions["id"] == clip, "description"] = "Another scene than the one the models were told."
    descriptions.to_parquet(root / "data/egonormia/descriptions.parquet", index=False)
    write_params(root, {"egonormia": {"baselines": []}})  # the minilm baseline's entry is gone
    run = show(root, clip, "--json")
    assert run.returncode == 0, run.stderr
    runs = {(r["setting"], r["model"]): r for r in json.loads(run.stdout)["runs"]}
    changed = runs[("pipeline", "chance")]["calls"]
    rebuilt = {c["subtask"]: c["sent_as_rebuilt"] for c in changed}
    # the official justification prompt carries no description (the official code leaves {desc} unfilled there)
    assert rebuilt["action"] is rebuilt["sensible"] is False and rebuilt["justification"] in (True, None)
    assert "Another scene" in changed[0]["messages"][0]["content"][0]["text"]  # shown as it would be sent now
    assert all(c["sent_as_rebuilt"] is True for c in runs[("blind", "chance")]["calls"])
    gone = runs[("blind", "all-MiniLM-L6-v2")]
    assert "is not in the params" in gone["note"] and all(c["messages"] is None for c in gone["calls"])
    assert all(c["reply"] for c in gone["calls"])  # its replies are still shown
    text = show(root, clip, "--setting", "pipeline", "--model", "chance").stdout
    assert "differs from the one recorded" in text

    # the stage fails on a missing input, naming it, and leaves the last pages as they were
    before = {p.name: p.read_bytes() for p in (root / CLIP_LOGS).iterdir()}
    (root / RESPONSES).unlink()
    stage = subprocess.run(
        [sys.executable, "-m", "stages.egonormia.clip_logs"], cwd=root, env=tool_env(), capture_output=True, text=True
    )
    assert stage.returncode == 2 and str(RESPONSES) in stage.stderr and "Traceback" not in stage.stderr
    assert {p.name: p.read_bytes() for p in (root / CLIP_LOGS).iterdir()} == before
