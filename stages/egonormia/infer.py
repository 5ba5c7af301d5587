"""Stage egonormia_infer: ask every model (the one under evaluation and the baselines) every question.

For each clip x setting x model, the questions of ``egonormia.protocol`` (``egoeval.egonormia.inference``):
``official`` asks what the official evaluation code asks, call for call (a call it would not make is recorded
``not sent: …``); ``egoeval`` asks the action question then, in the same conversation, the justification
question, and the sensible question in a conversation of its own. Conversations run concurrently (a thread
pool per model, paced by its adaptive limiter); every call goes through the durable response cache at
``<cache_dir>/responses.sqlite`` (outside DVC's outs), so a rerun after a crash pays only for what is missing.
``$EGOEVAL_CACHE_DIR`` overrides the cache folder; ``EGOEVAL_CACHE_ONLY=1`` replays cached answers only
(a miss is recorded as an error, nothing is sent: the audit re-derives results this way).
A baseline skips the settings it cannot do. Output: data/egonormia/responses.parquet, one row per
(id, setting, model, subtask), with its protocol, the model the endpoint named as serving the reply (a warning
says when that is not the requested one) and the endpoint's ``usage`` for the call (``prompt_tokens``,
``completion_tokens``, as the response cache stored it: the score stage's ledger). A request the endpoint refuses
(HTTP 400) is that answer's failure. The
stage writes nothing and fails when more than ``max_failure_rate`` of the answers failed (exit 75), or at once when
every call would fail alike (exit 2: a wrong key, URL or model, the first calls all refused alike; exit 75: nothing
answers at ``base_url``); the cached successes make the rerun cheap. A model of backend ``openai_batch`` is asked
through the OpenAI Batch API, one batch per round of calls; each batch's request file is kept in
data/egonormia/batches/ (an audit record of what was asked and paid for; empty for other backends), and a rerun
after a crash resumes the batches already submitted (``egoeval.backends.batch``).

Each run writes its ledger per model (calls sent, cache hits, retries, the endpoint's ``usage`` tokens, latency
p50 / p95, cost at ``egonormia.model.price``) to ``<cache_dir>/ledger-egonormia_infer.json``, beside the cache and
outside DVC's outputs: its numbers depend on the cache and the endpoint's timing, so the outputs stay reproducible.
"""

from __future__ import annotations

import argparse
import sys

from egoeval.egonormia.artifacts import BATCHES, BATCHES_NOTE, RESPONSES
from egoeval.egonormia.inference import check_failures, inference_inputs, run_inference
from egoeval.egonormia.settings import EgoNormiaSettings
from egoeval.io import write_parquet
from egoeval.settings import benchmark_settings
from egoeval.stage import run_stage


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__).parse_args(argv)

    def run() -> None:
        inputs = inference_inputs(benchmark_settings("egonormia", EgoNormiaSettings))
        BATCHES.mkdir(parents=True, exist_ok=True)  # a declared output: request files, when a model is batched
        if not (BATCHES / "README.txt").is_file():
            (BATCHES / "README.txt").write_text(BATCHES_NOTE)
        responses = run_inference(*inputs, ledger=True)
        check_failures(responses, inputs.infer.max_failure_rate)
        write_parquet(RESPONSES, responses)
        failed = int((responses["error"] != "").sum())
        print(f"infer: {len(responses) - failed} of {len(responses)} answers, written to {RESPONSES}", file=sys.stderr)

    return run_stage(run, benchmark="egonormia")


if __name__ == "__main__":
    raise SystemExit(main())
