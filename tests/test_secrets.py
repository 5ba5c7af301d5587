"""An API key given through the environment reaches the model server and nothing else, in a real nightly Prefect run.

``python -m flows.nightly --once`` runs the whole pipeline in a temporary copy of this repository, with its own
temporary Prefect server and database, against a loopback OpenAI-compatible server. The key is a canary made at run
time. The server is careless with it: every completion (the scene descriptions, every answer) starts by echoing the
request's ``Authorization`` header, and the requests it refuses (HTTP 400) quote it past their 200th character. The
run completes; afterwards no file of the project (DVC's cache, the response cache, responses.parquet, the report,
Prefect's results), of Prefect's home (its database holds the task logs and artifacts) and no line of the run's output
holds it, whole or cut, plain or base64, while the redacted echoes (``Bearer ***``) are there to see.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from conftest import copy_repo, nightly_env
from openai_server import Fault, OpenAIServer, default_policy, last_user_text

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


def refuses(body: dict[str, Any]) -> bool:
    """The questions the server refuses with a 400 (about 1 in 25, chosen by the request's text)."""
    text = last_user_text(body)
    return "Behavior options" in text and int(hashlib.sha256(text.encode()).hexdigest()[:4], 16) % 25 == 0


def careless(body: dict[str, Any]) -> str:
    if refuses(body):
        raise Fault("400")
    return default_policy(body)


def test_api_key_reaches_only_the_server(tmp_path: Path) -> None:
    canary = "sk-canary-" + secrets.token_hex(16)  # made now: no file holds it before the run
    root = copy_repo(tmp_path / "repo")
    # another model than the accepted baseline's: this run is about secrets, not about regressions
    for accepted in ("metrics/baseline.json", "metrics/baseline.lock.json"):
        (root / accepted).unlink(missing_ok=True)
    home = tmp_path / "prefect-home"
    with OpenAIServer(policy=careless, echo_auth=True) as server:
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
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "flow run: Completed" in run.stdout

    # Not vacuous: the key was sent with every request, refused requests quoted it, every completion echoed it.
    assert requests and all(r.headers.get("Authorization") == f"Bearer {canary}" for r in requests)
    refused = [r for r in requests if refuses(r.body)]
    assert refused and len(refused) < len(requests) // 10
    responses = pd.read_parquet(root / "data/egonormia/responses.parquet")
    answered = responses[responses["error"] == ""]
    assert len(answered) > 0 and answered["response"].str.startswith("Called with Bearer ***.\n").all()
    quoted = responses[responses["error"].str.startswith("http 400: ")]
    assert len(quoted) == len(refused) and quoted["error"].str.endswith("(authorized by Bearer ***)").all()
    descriptions = pd.read_parquet(root / "data/egonormia/descriptions.parquet")
    assert descriptions["description"].str.startswith("Called with Bearer ***.\n").all()
    assert "Bearer ***" in (root / "reports/index.html").read_text()  # the report shows the replies, redacted
    artifacts, logs = prefect_records(home)
    assert any("egohumans" in data for data in artifacts), "the report artifact is missing"

    forms = [*encodings(canary), canary[:24].encode()]  # whole or cut (a cut before redaction showed the start)
    assert holders(root, forms) == []  # workspace, .dvc/cache, .egoeval-cache (responses, Prefect results, report)
    assert holders(home, forms) == []  # the Prefect database (logs, artifacts, states) and anything beside it
    assert not any(form in (run.stdout + run.stderr).encode() for form in forms)
    assert not any(canary[:24] in text for text in artifacts + logs)
