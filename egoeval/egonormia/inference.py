"""EgoNormia inference: every model (the one under evaluation and the baselines) asked every question.

The protocol (``egonormia.protocol``, ``egoeval.egonormia.protocols``) decides the conversations of each clip x
setting x model (the units of work), their requests, and which calls are made (a call it does not make is
recorded with an error starting ``not sent: ``). Units run concurrently (a thread pool per model, paced by its
adaptive limiter); every call goes through the durable response cache, whose key includes the protocol's name.
Used by the egonormia_infer stage (``write_responses``) and by its sharded form (flows/shard.py).

The infer stage: ``official`` asks what the official evaluation code asks, call for call; ``egoeval`` asks the
action question then, in the same conversation, the justification question, and the sensible question in a
conversation of its own. Every call goes through the durable response cache at ``<cache_dir>/responses.sqlite``
(outside DVC's outs), so a rerun after a crash pays only for what is missing. ``$EGOEVAL_CACHE_DIR`` overrides the
cache folder; ``EGOEVAL_CACHE_ONLY=1`` replays cached answers only (a miss is recorded as an error, nothing is sent:
the audit re-derives results this way). The video setting runs once per video variant (``egonormia.frames.variants``),
each recorded under its own name (``video``, ``video:frames8``, ``video:native``). A baseline skips the settings it
cannot do (images; video for ``video:native``). Output:
data/egonormia/responses.parquet, one row per (id, setting, model, subtask), with its protocol, the model the
endpoint named as serving the reply (a warning says when that is not the requested one) and the endpoint's
``usage`` for the call (``prompt_tokens``, ``completion_tokens``, as the response cache stored it: the score stage's
ledger). A request the endpoint refuses (HTTP 400) is that answer's failure. The stage writes nothing and fails
when more than ``max_failure_rate`` of the answers failed (exit 75), or at once when every call would fail alike
(exit 2: a wrong key, URL or model, the first calls all refused alike; exit 75: nothing answers at ``base_url``);
the cached successes make the rerun cheap. A model of backend ``openai_batch`` is asked through the OpenAI Batch
API, one batch per round of calls; each batch's request file is kept in data/egonormia/batches/ (an audit record of
what was asked and paid for; empty for other backends), and a rerun after a crash resumes the batches already
submitted (``egoeval.backends.batch``). Each run prints its ledger per model (calls sent, cache hits, retries, the
endpoint's ``usage`` tokens, latency p50 / p95, cost at ``egonormia.model.price``) and writes it to
``<cache_dir>/ledger-egonormia_infer.json``, beside the cache and outside DVC's outputs: its numbers depend on the
cache and the endpoint's timing, so the outputs stay reproducible.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import as_completed
from contextlib import ExitStack
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd
from tqdm import tqdm

from egoeval.backends import Backend
from egoeval.backends.batch import OpenAIBatchBackend, run_batches
from egoeval.backends.client import Completion, ModelClient, call_pool
from egoeval.backends.usage import DROPPED
from egoeval.cache import ResponseCache, cache_file, cache_only
from egoeval.core.errors import ArtifactUnavailable, TransientFailure
from egoeval.core.io.atomic import write_json, write_parquet
from egoeval.egonormia.artifacts import (
    BATCHES,
    BATCHES_NOTE,
    DESCRIPTIONS,
    FRAMES,
    ITEMS,
    NO_DESCRIPTION,
    NOT_SENT,
    RESPONSE_COLUMNS,
    RESPONSES,
    USAGE_COLUMNS,
    FrameStore,
    VariantStore,
    is_variant,
    read_items,
    read_table,
    setting_kind,
)
from egoeval.egonormia.protocols import (
    Answer,
    Ask,
    Clip,
    Conversation,
    Protocol,
    Scene,
    frames_parts,
    native_parts,
    registry,
    strip_parts,
)
from egoeval.egonormia.settings import STRIP, EgoNormiaSettings, InferSettings, ModelSpec, VideoVariant, video_settings

LEDGER_FILE = "ledger-egonormia_infer.json"
"""Beside the response cache: the last infer run's ledger per model (``ModelClient.ledger``). Not a DVC output: every
number in it depends on what the cache held and on the endpoint's timing, so it would make the outputs differ."""


class Runner:
    """Sends one model's conversations under a protocol; turns each answer (or failure) into output rows.

    Without a ``client`` every ``run`` takes its ``ask`` (``egoeval show`` replays the recorded replies so)."""

    def __init__(
        self,
        model: ModelSpec,
        client: ModelClient | None,
        frames: FrameStore,
        descriptions: dict[str, tuple[str, str]],
        seed: int,
        protocol: Protocol,
        variants: dict[str, VariantStore] | None = None,
    ) -> None:
        self.model = model
        self.client = client
        self.frames = frames
        self.variants = variants or {}
        self.descriptions = descriptions
        self.seed = seed
        self.protocol = protocol

    def _row(self, conversation: Conversation, answer: Answer) -> dict[str, Any]:
        done = answer.completion
        return {
            "id": conversation.clip.id,
            "setting": conversation.setting,
            "model": self.model.name,
            "backend": self.model.backend,
            "protocol": self.protocol.name,
            "subtask": answer.subtask,
            "permutation": answer.permutation,
            "response": done.response,
            "error": done.error,
            "request_key": done.key,
            "served_model": done.served_model,
        } | {name: getattr(done.usage, name, None) for name in USAGE_COLUMNS}

    def _scene(self, clip_id: str, setting: str) -> Scene:
        if setting == "pipeline":
            description, error = self.descriptions.get(clip_id, ("", "the clip is not in descriptions.parquet"))
            if self.protocol.sends_blank_descriptions and error == NO_DESCRIPTION:
                error = ""
            elif not description.strip():
                error = error or "empty description"
            if error:
                raise ArtifactUnavailable(f"description unavailable: {error}")
            return Scene(setting, description=description)
        if setting == "video":
            return Scene(setting, visual=strip_parts(self.frames.jpeg(clip_id)))
        if setting == "video:native":
            return Scene(setting, visual=native_parts(self.variants[setting].video(clip_id)))
        if is_variant(setting):
            return Scene(setting, visual=frames_parts(self.variants[setting].images(clip_id)))
        return Scene(setting)

    def run(self, conversation: Conversation, ask: Ask | None = None) -> list[dict[str, Any]]:
        """The conversation's rows; its calls go through ``ask`` (default: the client, cache first)."""
        clip = conversation.clip
        try:
            scene = self._scene(clip.id, conversation.setting)
        except ArtifactUnavailable as error:
            failed = Completion(None, str(error), "")
            subtasks = self.protocol.conversations[conversation.kind]
            answers = [Answer(s, self.protocol.permutation(self.seed, clip.id, s), failed) for s in subtasks]
        else:
            if ask is None:
                if self.client is None:
                    raise ValueError("a runner without a client needs an ask")
                ask = self.client.complete
            answers = self.protocol.converse(conversation, scene, self.model, self.seed, ask)
        return [self._row(conversation, answer) for answer in answers]


def variant_stores(variants: Sequence[VideoVariant], frames_dir: Path) -> dict[str, VariantStore]:
    """Each video variant's files but the strip's (which ``FrameStore`` reads), by the variant's setting name."""
    return {v.name: VariantStore(frames_dir / v.folder) for v in variants if v.kind != "strip"}


def run_inference(
    items: pd.DataFrame,
    frames_index: pd.DataFrame,
    frames_dir: Path,
    descriptions: pd.DataFrame,
    models: Sequence[ModelSpec],
    infer: InferSettings,
    protocol: Protocol,
    root: Path = Path("."),
    variants: Sequence[VideoVariant] = (STRIP,),
    client_factory: Callable[..., ModelClient] = ModelClient.from_spec,
    ledger: bool = False,
) -> pd.DataFrame:
    """Every answer of every model, one row per (id, setting, model, subtask), failures recorded in ``error``;
    ``infer.cache_dir`` is relative to ``root``. ``client_factory(spec, cache, cache_only=...)`` makes each model's
    client (``egoeval estimate`` passes one that sends nothing); with ``ledger`` the run's ledger per model is
    written to ``LEDGER_FILE`` beside the response cache. A model of backend ``openai_batch`` is first asked through
    the Batch API, one batch per round of calls (``egoeval.backends.batch``), its request files written under
    ``root``."""
    frames = FrameStore(frames_index, frames_dir)
    texts = {row.id: (row.description or "", row.error) for row in descriptions.itertuples(index=False)}
    clips = [Clip(item.id, tuple(item.behaviors), tuple(item.justifications)) for item in items.itertuples(index=False)]
    settings = video_settings(infer.settings, variants)
    stores = variant_stores([v for v in variants if v.name in settings], frames_dir)

    rows: list[dict[str, Any]] = []
    DROPPED.take()  # the usage counts this run drops are said at its end
    with ExitStack() as stack:
        cache = ResponseCache(cache_file(root / infer.cache_dir))
        stack.callback(cache.close)
        futures = []
        runners = []
        for model in models:
            client = client_factory(model, cache, cache_only=cache_only())
            stack.callback(client.close)
            runner = Runner(model, client, frames, texts, infer.seed, protocol, stores)
            runners.append(runner)
            usable = [s for s in settings if _sees(client.backend, model, s)]
            for skipped in sorted(set(settings) - set(usable)):
                what = "video" if skipped == "video:native" else "image"
                print(
                    f"infer: {model.name} ({model.backend}) skips the {skipped} setting (no {what} input)",
                    file=sys.stderr,
                )
            # twice as many threads as call slots: while one thread builds its next request or writes the
            # cache, another already holds the freed slot; the limiter alone bounds the calls in flight
            conversations = [
                Conversation(clip, setting, kind)
                for kind in protocol.conversations
                for clip in clips
                for setting in usable
            ]
            if isinstance(client.backend, OpenAIBatchBackend) and not client.cache_only:
                units = [functools.partial(runner.run, c) for c in conversations]
                run_batches(client, units, root / BATCHES, label=f"infer: {model.name}")
            workers = 2 * client.concurrency
            pool = stack.enter_context(call_pool(workers, f"infer-{model.name}"))
            futures.extend(pool.submit(runner.run, conversation) for conversation in conversations)
        with tqdm(total=len(futures), desc="infer", unit="conversation", file=sys.stderr) as bar:
            for future in as_completed(futures):
                rows.extend(future.result())
                bar.update()
        costs = {}
        for runner in runners:
            client = runner.client
            price = runner.model.price
            costs[runner.model.name] = client.ledger(None if price is None else (price.input, price.output))
            limit = f"limit {client.limiter.limit}/{client.limiter.max_limit}"
            print(f"infer: {runner.model.name}: {ledger_line(costs[runner.model.name])}, {limit}", file=sys.stderr)
            if client.served_note():
                print(f"infer: warning: {client.served_note()}", file=sys.stderr)
            if client.without_usage and (price is not None or client.prompt_tokens or client.completion_tokens):
                print(
                    f"infer: {runner.model.name}: {client.without_usage} of the {client.calls} calls sent reported no "
                    "usage: the run's tokens and cost are lower bounds",
                    file=sys.stderr,
                )
        dropped = DROPPED.take()
        if dropped:
            print(f"infer: warning: {dropped}", file=sys.stderr)
        if ledger:
            write_json(cache.path.parent / LEDGER_FILE, costs)
    table = pd.DataFrame(rows, columns=list(RESPONSE_COLUMNS))
    table = table.astype(dict.fromkeys(USAGE_COLUMNS, "Int64"))
    return table.sort_values(["id", "setting", "model", "subtask"], ignore_index=True)


def ledger_line(ledger: dict[str, Any]) -> str:
    """A run's ledger of one model (``ModelClient.ledger``) as the stage prints it: calls sent, cache hits, retries,
    the endpoint's usage tokens, latency p50 / p95 and the cost of this run (the calls that reported no usage are
    said on a line of their own where they make the figures lower bounds)."""
    said = [f"{ledger['calls']} calls, {ledger['cache_hits']} cache hits, {ledger['retries']} retries"]
    said.append(f"{ledger['prompt_tokens']:,} prompt + {ledger['completion_tokens']:,} completion tokens")
    if ledger["latency_p50_s"] is not None:
        said.append(f"latency p50 {ledger['latency_p50_s']:g} s, p95 {ledger['latency_p95_s']:g} s")
    if ledger["cost_usd"] is None:
        said.append("cost: no price set")
    else:
        said.append(f"cost {'>= ' if ledger['cost_is_lower_bound'] else ''}${ledger['cost_usd']:.4f}")
    return ", ".join(said)


def _sees(backend: Backend, model: ModelSpec, setting: str) -> bool:
    """Whether a model is asked in a setting: a video one needs image input, the native variant video input (the
    backend's, or as the model entry declares it: the settings refuse a native variant to an undeclared endpoint)."""
    if setting_kind(setting) != "video":
        return True
    if setting == "video:native":
        return backend.supports_images and (
            backend.supports_video or (backend.supports_video is None and model.video_input)
        )
    return backend.supports_images


def check_failures(responses: pd.DataFrame, max_failure_rate: float) -> None:
    """Raise TransientFailure naming the failed answers when their share exceeds ``max_failure_rate``.

    Calls the protocol did not make (``not sent: ``) are not failures of their own.
    """
    failed = responses[(responses["error"] != "") & ~responses["error"].str.startswith(NOT_SENT)]
    rate = len(failed) / len(responses) if len(responses) else 0.0
    if rate > max_failure_rate:
        named = [f"{r.id}/{r.setting}/{r.model}/{r.subtask}: {r.error}" for r in failed.head(20).itertuples()]
        more = f"; and {len(failed) - len(named)} more" if len(failed) > len(named) else ""
        raise TransientFailure(
            f"{len(failed)} of {len(responses)} answers failed ({rate:.1%} > {max_failure_rate:.1%}); "
            f"nothing written, cached successes make a rerun cheap: {'; '.join(named)}{more}"
        )


class InferenceInputs(NamedTuple):
    """``run_inference``'s arguments, in its order (``run_inference(*inputs)``)."""

    items: pd.DataFrame
    frames_index: pd.DataFrame
    frames_dir: Path
    descriptions: pd.DataFrame
    models: list[ModelSpec]
    infer: InferSettings
    protocol: Protocol
    root: Path
    variants: tuple[VideoVariant, ...] = (STRIP,)


def inference_inputs(settings: EgoNormiaSettings, root: Path = Path(".")) -> InferenceInputs:
    """``run_inference``'s arguments as the infer stage reads them under ``root``, under its ``settings``."""
    return InferenceInputs(
        read_items(root / ITEMS),
        read_table(root / FRAMES / "index.parquet", ["id", "image", "error"]),
        root / FRAMES,
        read_table(root / DESCRIPTIONS, ["id", "description", "error"]),
        [settings.model, *settings.baselines],
        settings.infer,
        registry()[settings.protocol],
        root,
        tuple(settings.frames.variants),
    )


def write_responses(settings: EgoNormiaSettings) -> None:
    """The egonormia_infer stage: ask every question, check the failure rate, write data/egonormia/responses.parquet."""
    inputs = inference_inputs(settings)
    BATCHES.mkdir(parents=True, exist_ok=True)  # a declared output: request files, when a model is batched
    if not (BATCHES / "README.txt").is_file():
        (BATCHES / "README.txt").write_text(BATCHES_NOTE)
    responses = run_inference(*inputs, ledger=True)
    check_failures(responses, inputs.infer.max_failure_rate)
    write_parquet(RESPONSES, responses)
    failed = int((responses["error"] != "").sum())
    print(f"infer: {len(responses) - failed} of {len(responses)} answers, written to {RESPONSES}", file=sys.stderr)
