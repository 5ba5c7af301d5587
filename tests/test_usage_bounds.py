"""Usage from the endpoint and from the response cache is checked where it enters (issue 28 items 7 and 9): a count
that is not an integer in [0, 10^9] is dropped and said, the calls that reported none are counted, and the cost is
then shown as a lower bound; never a traceback, never inf or NaN."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import infer_stage
from openai_server import KeyedPolicy, OpenAIServer, Served
from test_infer import KEY_ENV, describe, make_items, model_spec, write_stage_inputs

from egoeval.core.stage_shell import run_stage
from egoeval.egonormia import estimate as estimate_command
from egoeval.egonormia.ledger import answer_ledgers
from egoeval.egonormia.settings import Price

RESPONSES = Path("data/egonormia/responses.parquet")
PRICE = {"input": 2.5, "output": 10.0}
# what the endpoint reports, request after request: garbage, then none, then a sane count
USAGES: list[dict[str, Any]] = [
    {"prompt_tokens": -5, "completion_tokens": 3},
    {"prompt_tokens": 10**30, "completion_tokens": 2},
    {"prompt_tokens": 7, "completion_tokens": 1.5},
    {},
    {"prompt_tokens": 100, "completion_tokens": 4},
]


class OddUsage:
    """The keyed policy's answers, each reporting the next of USAGES."""

    def __init__(self, keyed: KeyedPolicy) -> None:
        self.keyed, self.n = keyed, 0

    def __call__(self, body: dict[str, Any]) -> Served:
        usage = USAGES[self.n % len(USAGES)]
        self.n += 1
        return Served(self.keyed(body), usage=usage)


def finite_numbers(value: Any) -> bool:
    if isinstance(value, dict):
        return all(finite_numbers(v) for v in value.values())
    return not isinstance(value, float) or math.isfinite(value)


@pytest.mark.bad_input
def test_usage_out_of_bounds_from_the_endpoint_and_the_cache_is_dropped_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-usage")
    monkeypatch.chdir(tmp_path)
    items = make_items(2)
    with OpenAIServer(policy=OddUsage(KeyedPolicy.from_items(items))) as server:
        write_stage_inputs(tmp_path, items, model_spec(server, price=PRICE))
        assert describe() == 0
        assert run_stage(infer_stage, benchmark="egonormia") == 0
        sent = len(server.requests)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    bad = sum(1 for i in range(sent) if i % len(USAGES) in (0, 1, 2))  # one bad count each
    assert f"dropped {bad} usage token counts" in err and "from the endpoint" in err, err
    examples = ("prompt_tokens -5", f"prompt_tokens {10**30}", "completion_tokens 1.5")
    assert any(f"from the endpoint (e.g. {example})" in err for example in examples), err
    without = sum(1 for i in range(sent) if i % len(USAGES) != 4)
    assert f"{without} of the {sent} calls sent reported no usage" in err
    responses = pd.read_parquet(RESPONSES)
    answered = responses[responses["response"].notna()]
    assert len(answered) == sent
    assert set(answered["prompt_tokens"].dropna()) <= {7, 100}  # -5 and 10**30 dropped, 7 kept
    ledgers = answer_ledgers(responses, {"keyed-vlm": Price(**PRICE)})
    total_without = sum(entry["calls_without_usage"] for entry in ledgers.values())
    assert total_without == without
    for entry in ledgers.values():
        assert finite_numbers(entry)
        assert entry["cost_is_lower_bound"] is (entry["calls_without_usage"] > 0 and entry["cost_usd"] is not None)
    assert any(entry["cost_is_lower_bound"] for entry in ledgers.values())

    # the cache is an input too: 10**30 there crashed infer (OverflowError) though no request was sent
    cache = next(tmp_path.glob(".egoeval-cache/*.sqlite"))
    with sqlite3.connect(cache) as db:
        rows = db.execute("SELECT key, meta FROM responses").fetchall()
        for key, meta in rows:
            meta = json.loads(meta) | {"prompt_tokens": 10**30, "completion_tokens": -1}
            db.execute("UPDATE responses SET meta = ? WHERE key = ?", (json.dumps(meta), key))
    before = RESPONSES.read_bytes()
    assert run_stage(infer_stage, benchmark="egonormia") == 0  # the server is gone: every answer is cached
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"dropped {2 * len(rows)} usage token counts" in err
    assert "from the response cache" in err
    responses = pd.read_parquet(RESPONSES)
    assert responses["prompt_tokens"].isna().all() and RESPONSES.read_bytes() != before
    ledgers = answer_ledgers(responses, {"keyed-vlm": Price(**PRICE)})
    for entry in ledgers.values():
        assert entry["cost_usd"] is None and entry["calls_without_usage"] == entry["calls"]

    assert estimate_command.main([]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "inf" not in out.lower().replace("infer", "")
    assert "estimate: warning: dropped" in err and "from the response cache" in err
    cached = {setting: int(n) for setting, n in responses.groupby("setting")["response"].count().items()}
    for setting, n in cached.items():  # every cached call's usage was dropped: the estimate says so
        assert f"note: keyed-vlm {setting}: {n:,} of the {n:,} cached calls reported no usage" in out, out
