"""What the answers cost: per setting and model, the calls behind the answers in responses.parquet.

Figures come from the endpoint's ``usage`` the infer stage records per answer (``artifacts.USAGE_COLUMNS``, as the
response cache stored it when the reply came), so they depend only on the replies: the same whether a run sent the
calls or found them in the cache, after retries, a crash or faults, and in an audit's re-derivation. A request asked
twice counts once. ``calls``: answers that came back; ``calls_without_usage``: those whose call reported no usage
(or a count egoeval.backends.usage did not believe); ``prompt_tokens``, ``completion_tokens``: summed ``usage`` of
the others (null when no call reported any: a local baseline); ``cost_usd`` at the model's ``price`` (null without
one), a lower bound (``cost_is_lower_bound``) when some calls reported no usage. ``served_models``: the calls by
the model the endpoint named as serving each reply, kept only when some name differs from the requested model (an
alias resolved, a different model behind the endpoint).
What one run sent, found cached, retried, waited and paid is the run's ledger beside the response cache
(``inference.LEDGER_FILE``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from egoeval.backends.client import token_cost
from egoeval.egonormia.artifacts import USAGE_COLUMNS
from egoeval.egonormia.settings import Price

LEDGER_COLUMNS = ("setting", "model", "response", "request_key", "served_model", *USAGE_COLUMNS)  # of responses.parquet


def _total(values: pd.Series) -> int | None:
    known = values.dropna()
    return int(known.sum()) if len(known) else None


def call_ledger(answers: pd.DataFrame, price: Price | None) -> dict[str, Any]:
    """The ledger of one model's answers (responses.parquet rows; those without a reply are not calls)."""
    answered = answers[answers["response"].notna()].drop_duplicates("request_key")
    reported = answered[list(USAGE_COLUMNS)].notna().all(axis=1)
    entry: dict[str, Any] = {"calls": len(answered), "calls_without_usage": int((~reported).sum())}
    entry |= {name: _total(answered[name]) for name in USAGE_COLUMNS}
    tokens = (entry["prompt_tokens"], entry["completion_tokens"])
    entry["cost_usd"] = None if price is None or None in tokens else token_cost(*tokens, (price.input, price.output))
    entry["cost_is_lower_bound"] = entry["cost_usd"] is not None and entry["calls_without_usage"] > 0
    return entry


def served_models(answers: pd.DataFrame, requested: str) -> dict[str, int] | None:
    """The calls behind one model's answers by the model each reply named as serving it (unnamed ones left out),
    sorted by name; None when every named model is the ``requested`` one."""
    answered = answers[answers["response"].notna()].drop_duplicates("request_key")
    named = answered["served_model"].fillna("").astype(str)
    counts = named[named != ""].value_counts()
    if set(counts.index) <= {requested}:
        return None
    return {str(name): int(counts[name]) for name in sorted(counts.index)}


def answer_ledgers(responses: pd.DataFrame, prices: Mapping[str, Price | None]) -> dict[tuple[str, str], dict]:
    """(setting, model) -> ``call_ledger`` of its answers (``LEDGER_COLUMNS`` needed); ``prices`` by model name."""
    return {
        (str(setting), str(model)): call_ledger(group, prices.get(str(model)))
        for (setting, model), group in responses.groupby(["setting", "model"], sort=True)
    }
