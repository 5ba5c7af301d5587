"""An API key given through the environment reaches the model server and nothing else, in a real nightly Prefect run.

``python -m flows.nightly --once`` runs the whole pipeline in a temporary copy of this repository, with its own
temporary Prefect server and database, against a loopback OpenAI-compatible server. The key is a canary made at run
time; afterwards no file of the project (DVC's cache, the response cache, Prefect's results and report), of Prefect's
home (its database holds the task logs and artifacts) and no line of the run's output holds it, plain or base64.

The server refuses the key with a 401 that echoes it back (a careless proxy): a permanent failure, so the describe
stage stops at once (exit 2), the flow does not retry it (every call reached the server once), and the EgoNormia
metrics and plots stay as they were.
"""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import copy_repo, nightly_env

from egoeval.openai_server import OpenAIServer

pytestmark = pytest.mark.slow
KEY_ENV = "EGOEVAL_CANARY_KEY"


def encodings(secret: str) -> list[bytes]:
    """The secret as bytes, and the parts of its base64 forms (at each of the 3 alignments) that do not depend on
    its neighbours: how it would look inside a pickled or base64-encoded record."""
    raw = secret.encode()
    forms = [raw]
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw)
        forms.append(encoded[4 : 4 * (len(encoded) // 4) - 4])  # drop the blocks touching the edges
    return forms


def holders(folder: Path, forms: list[bytes]) -> list[str]:
    """Files under ``folder`` whose bytes contain any of ``forms``."""
    return sorted(
        str(path)
        for path in folder.rglob("*")
        if path.is_file() and not path.is_symlink() and any(form in path.read_bytes() for form in forms)
    )


def prefect_records(home: Path) -> tuple[list[str], list[str]]:
    """Every artifact's data and every log message in the Prefect database under ``home``, read through the API."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, PREFECT_HOME, temporary_settings

    with temporary_settings({PREFECT_HOME: home, PREFECT_API_URL: None}), get_client(sync_client=True) as client:
        artifacts = [str(a.data) for a in client.read_artifacts()]
        logs: list[str] = []
        while batch := client.read_logs(offset=len(logs)):
            logs += [log.message for log in batch]
    return artifacts, logs


def test_api_key_reaches_only_the_server(tmp_path: Path) -> None:
    canary = "sk-canary-" + secrets.token_hex(16)  # made now: no file holds it before the run
    root = copy_repo(tmp_path / "repo")
    # another model than the accepted baseline's: this run is about secrets, not about regressions
    for accepted in ("metrics/baseline.json", "metrics/baseline.lock.json"):
        (root / accepted).unlink(missing_ok=True)
    home = tmp_path / "prefect-home"
    kept = {name: (root / name).read_bytes() for name in ("metrics/egonormia.json", "plots/egonormia/categories.csv")}
    with OpenAIServer(per_request=["401"] * 5) as server:
        params = yaml.safe_load((root / "params.yaml").read_text())
        params["egonormia"]["describe"]["source"] = "model"
        params["egonormia"]["model"].update(
            backend="openai", name="loopback-vlm", base_url=server.url, api_key_env=KEY_ENV, concurrency=4
        )
        params["egonormia"]["baselines"] = []
        # EgoHumans runs too (the flow runs every stage): keep its sample and runs small.
        params["egohumans"]["sample"].update(sequences=1, frames=30)
        params["egohumans"]["detect"]["modes"] = ["gt"]
        params["egohumans"]["track"]["trackers"] = ["bytetrack"]
        (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        run = subprocess.run(
            [sys.executable, "-m", "flows.nightly", "--once"],
            cwd=root,
            env=nightly_env(home, **{KEY_ENV: canary}),
            capture_output=True,
            text=True,
            timeout=600,
        )
        requests = list(server.requests)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "flow run: Failed" in run.stdout and "stages not completed: egonormia_describe" in run.stdout
    summary = {row.split()[0]: row.split()[1] for row in run.stdout.splitlines() if row.startswith("ego")}
    assert summary["egonormia_describe"] == "Failed" and summary["egohumans_score"] == "Completed"
    # one attempt per call: neither the client nor the flow retried a permanent failure
    assert requests and all(r.fault == "401" for r in requests)
    assert len({json.dumps(r.body, sort_keys=True) for r in requests}) == len(requests) <= 4  # each call once
    for name, content in kept.items():
        assert (root / name).read_bytes() == content, f"{name} changed by a failed run"

    # Not vacuous: the key was sent, with every request, and the echoed 401 went through the logged path.
    assert all(r.headers.get("Authorization") == f"Bearer {canary}" for r in requests)
    artifacts, logs = prefect_records(home)
    assert any("egohumans" in data for data in artifacts), "the report artifact is missing"
    permanent = [m for m in logs if "permanent failure, not retried" in m and "answered http 401" in m]
    assert permanent and all("Bearer ***" in m and f"${KEY_ENV}" in m for m in permanent), "the 401 was not logged"

    forms = encodings(canary)
    assert holders(root, forms) == []  # workspace, .dvc/cache, .egoeval-cache (responses, Prefect results, report)
    assert holders(home, forms) == []  # the Prefect database (logs, artifacts, states) and anything beside it
    assert not any(form in (run.stdout + run.stderr).encode() for form in forms)
    assert not any(canary in text for text in artifacts + logs)
