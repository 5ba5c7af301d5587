"""Per-clip logs: for one clip, per setting and model, the messages sent, the raw replies, the parsed answers and the
gold, without opening parquet (``egoeval show CLIP``; the egonormia_clip_logs stage writes every clip's as a page of
reports/clips/, which the report links).

Read from what the stages wrote: the items (options, gold), data/egonormia/responses.parquet (each call's reply or
failure, request key, served model, usage), data/egonormia/predictions.parquet (the parsed answers), the frames
index and descriptions.parquet (what the requests carried), and the params' model entries and ``infer.seed``. The
messages themselves are stored nowhere: they are rebuilt by the protocol the replies were recorded under, with its own
code (``Runner.run``), each call answered with its recorded reply (found by request key), so a later turn of a
conversation carries the reply the model really gave. A request key is the sha256 of the backend, model, messages
(images by sha256) and decoding: a rebuilt request with the recorded key is exactly what was sent. Where the key
differs (the params or inputs changed since the infer stage ran) the log says so and shows the request as it would be
sent now. Images are shown as their file, size and sha256, never their bytes.

Every string shown is redacted (the API keys in the variables the models' ``api_key_env`` name, where set) and cut at
MAX_SHOWN_CHARS characters; the pages escape it as HTML, the terminal text shows control characters escaped.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from egoeval.core.stage_shell import help_text

if TYPE_CHECKING:
    from egoeval.backends import ChatRequest
    from egoeval.egonormia.artifacts import FrameStore, VariantStore
    from egoeval.egonormia.settings import EgoNormiaSettings, ModelSpec

MAX_SHOWN_CHARS = 20_000  # one string of a log (a prompt, a reply, an error): the rest is cut, and said so
LETTERS = "ABCDE"
SHOW_HINT = "run `dvc repro egonormia_parse` (or `dvc pull`) first"


@dataclass(frozen=True)
class Sources:
    """Everything a clip's log is read from, loaded once (``load_sources``)."""

    root: Path
    items: dict[str, Any]  # clip -> its items row, in the table's order
    replies: dict[str, list[Any]]  # clip -> its responses rows
    parsed: dict[str, list[Any]]  # clip -> its predictions rows
    names: dict[str, list[str]]  # "model", "setting" -> every name the responses and predictions hold
    frame_files: dict[str, str]  # clip -> its frames image's file name (the frames index)
    frames: FrameStore
    variants: dict[str, VariantStore]  # each video variant's files but the strip's, where the frames stage wrote them
    descriptions: dict[str, tuple[str, str]]  # clip -> (its scene description, why there is none)
    models: dict[str, ModelSpec]
    seed: int
    secrets: tuple[str, ...]

    def shown(self, text: object) -> str:
        """``text`` redacted, then cut at MAX_SHOWN_CHARS (saying how much was left out)."""
        from egoeval.backends import redact

        value = str(text)
        for secret in self.secrets:
            value = redact(value, secret)
        if len(value) > MAX_SHOWN_CHARS:
            value = value[:MAX_SHOWN_CHARS] + f" [… {len(value) - MAX_SHOWN_CHARS:,} more characters not shown]"
        return value


def load_sources(settings: EgoNormiaSettings, root: Path = Path(".")) -> Sources:
    """The tables under ``root`` and the ``egonormia`` settings a log is built from; InputError naming a missing
    or malformed file."""
    import os

    from egoeval.core.errors import InputError
    from egoeval.core.io.bounded import read_parquet
    from egoeval.egonormia.artifacts import (
        DESCRIPTIONS,
        FRAMES,
        ITEMS,
        PREDICTION_COLUMNS,
        PREDICTIONS,
        RESPONSE_COLUMNS,
        RESPONSES,
        FrameStore,
        read_items,
        read_table,
        require_columns,
    )
    from egoeval.egonormia.inference import variant_stores

    index = FRAMES / "index.parquet"
    for path in (ITEMS, RESPONSES, PREDICTIONS, index, DESCRIPTIONS):
        if not (root / path).is_file():
            raise InputError(path, f"file not found: {SHOW_HINT}")
    items = read_items(root / ITEMS)
    require_columns(items, ("correct_idx", "sensible_idx"), ITEMS)
    models = {model.name: model for model in (settings.model, *settings.baselines)}
    secrets = {os.environ.get(model.api_key_env or "", "") for model in models.values()}
    frames_index = read_table(root / index, ["id", "image", "error"])
    descriptions = read_table(root / DESCRIPTIONS, ["id", "description", "error"])
    tables = (read_parquet(root / RESPONSES, RESPONSE_COLUMNS), read_parquet(root / PREDICTIONS, PREDICTION_COLUMNS))
    replies: dict[str, list[Any]] = {}
    parsed: dict[str, list[Any]] = {}
    for table, by_clip in zip(tables, (replies, parsed), strict=True):
        for row in table.itertuples(index=False):
            by_clip.setdefault(str(row.id), []).append(row)
    return Sources(
        root,
        {str(row.id): row for row in items.itertuples(index=False)},
        replies,
        parsed,
        {
            name: sorted(set(tables[0][name].astype(str)) | set(tables[1][name].astype(str)))
            for name in ("model", "setting")
        },
        {str(row.id): str(row.image) for row in frames_index.itertuples(index=False) if row.image},
        FrameStore(frames_index, root / FRAMES),
        variant_stores([v for v in settings.frames.variants if (root / FRAMES / v.folder).is_dir()], root / FRAMES),
        {str(row.id): (row.description or "", row.error) for row in descriptions.itertuples(index=False)},
        models,
        settings.infer.seed,
        tuple(sorted(secret for secret in secrets if secret)),
    )


def _letters(indices: Sequence[int]) -> list[str]:
    return [LETTERS[i] if 0 <= i < len(LETTERS) else str(i) for i in indices]


def _parsed(row: Any, correct: int, sensible_gold: set[int]) -> dict[str, Any]:
    """A predictions row as the log shows it: each subtask's choice (letters, stored order), right or not, why not."""
    parsed: dict[str, Any] = {}
    for subtask in ("action", "justification"):
        index = int(getattr(row, subtask))
        parsed[subtask] = {
            "choice": _letters([index])[0] if index >= 0 else None,
            "index": index,
            "right": index == correct,
            "error": str(getattr(row, f"{subtask}_error")),
        }
    chosen = sorted(int(i) for i in row.sensible)
    error = str(row.sensible_error)
    union = set(chosen) | sensible_gold
    parsed["sensible"] = {
        "choice": None if error else _letters(chosen),
        "indices": chosen,
        "iou": None if error else (len(set(chosen) & sensible_gold) / len(union) if union else 0.0),
        "error": error,
    }
    return parsed


class _Replay:
    """The recorded replies of one clip, setting and model, answering the protocol's requests: by request key, else
    (the params or inputs changed since) with the reply recorded for the call made in that place of the conversation,
    so that the calls after it are rebuilt too. Keeps every request it was asked."""

    def __init__(self, cache_name: str, model: str, recorded: Sequence[Any]) -> None:
        self.cache_name = cache_name
        self.model = model
        self.recorded = {str(row.request_key): row for row in recorded if row.request_key}
        self.by_subtask = {str(row.subtask): row for row in recorded}
        self.pending: list[Any] = []  # the conversation's recorded calls, in the order they were made
        self.requests: dict[str, ChatRequest] = {}

    def start(self, subtasks: Sequence[str]) -> None:
        """A conversation of these subtasks begins."""
        rows = [self.by_subtask.get(subtask) for subtask in subtasks]
        self.pending = [row for row in rows if row is not None and row.request_key]

    def ask(self, request: ChatRequest) -> Any:
        from egoeval.backends import request_key
        from egoeval.backends.client import CallUsage, Completion

        key = request_key(self.cache_name, self.model, request)
        self.requests[key] = request
        row = self.recorded.get(key)
        if row is None and self.pending:
            row = self.pending[0]
        self.pending = [pending for pending in self.pending if pending is not row]
        if row is None:
            return Completion(None, "no recorded reply for this request", key)
        if row.error:
            return Completion(None, str(row.error), key)
        usage = CallUsage(_count(row.prompt_tokens), _count(row.completion_tokens))
        return Completion(str(row.response), "", key, str(row.served_model or ""), usage)


def _count(value: Any) -> int | None:
    import pandas as pd

    return None if value is None or pd.isna(value) else int(value)


def _rebuilt(sources: Sources, clip: Any, setting: str, model: str, recorded: Sequence[Any]) -> tuple[dict, str]:
    """(subtask -> (the rebuilt request key, the request or None)), and why nothing was rebuilt ("" when it was)."""
    from egoeval.backends import make_backend
    from egoeval.egonormia.artifacts import FRAMES, NOT_SENT, RESPONSES, is_variant
    from egoeval.egonormia.inference import Runner
    from egoeval.egonormia.protocols import Clip, Conversation
    from egoeval.egonormia.protocols import recorded as recorded_protocol

    spec = sources.models.get(model)
    if spec is None:
        return {}, (
            f"model {model!r} is not in the params (egonormia.model, egonormia.baselines): its requests cannot be "
            "rebuilt"
        )
    protocol = recorded_protocol(recorded[0].protocol, RESPONSES)
    backend = make_backend(spec)
    try:
        replay = _Replay(backend.cache_name, backend.model, recorded)
    finally:
        backend.close()
    if is_variant(setting) and setting not in sources.variants:
        return {}, f"the {setting} frames are not in {FRAMES}: its requests cannot be rebuilt"
    runner = Runner(spec, None, sources.frames, sources.descriptions, sources.seed, protocol, sources.variants)
    asked = Clip(str(clip.id), tuple(clip.behaviors), tuple(clip.justifications))
    rebuilt: dict[str, tuple[str, ChatRequest | None]] = {}
    why = ""
    for kind, subtasks in protocol.conversations.items():
        replay.start(subtasks)
        for row in runner.run(Conversation(asked, setting, kind), replay.ask):
            rebuilt[row["subtask"]] = (row["request_key"], replay.requests.get(row["request_key"]))
            if not row["request_key"] and row["error"] and not why and not str(row["error"]).startswith(NOT_SENT):
                why = str(row["error"])
    return rebuilt, why


def _messages(sources: Sources, request: ChatRequest, clip_id: str, setting: str) -> list[dict[str, Any]]:
    """A request's messages as the log shows them: texts (redacted, bounded), images and video as file, size and
    sha256."""
    import hashlib

    from egoeval.backends import ImagePart, VideoPart
    from egoeval.egonormia.artifacts import FRAMES

    named = []  # the files whose bytes the request may carry: the clip's strip, or its variant's files
    if sources.frame_files.get(clip_id):
        named.append(FRAMES / sources.frame_files[clip_id])
    if setting in sources.variants:
        store = sources.variants[setting]
        named += [store.folder.relative_to(sources.root) / name for name in store.file_names(clip_id)]
    files: dict[str, str] = {}  # sha256 -> the file
    if any(isinstance(part, ImagePart | VideoPart) for message in request.messages for part in message.content):
        for name in named:
            path = sources.root / name
            if path.is_file():
                files[hashlib.sha256(path.read_bytes()).hexdigest()] = str(name)
    shown = []
    for message in request.messages:
        parts = []
        for part in message.content:
            if isinstance(part, ImagePart):
                parts.append(
                    {"type": "image", "file": files.get(part.sha256), "bytes": len(part.jpeg), "sha256": part.sha256}
                )
            elif isinstance(part, VideoPart):
                parts.append(
                    {"type": "video", "file": files.get(part.sha256), "bytes": len(part.mp4), "sha256": part.sha256}
                )
            else:
                parts.append({"type": "text", "text": sources.shown(part.text)})
        shown.append({"role": message.role, "content": parts})
    return shown


def clip_log(sources: Sources, clip_id: str, model: str | None = None, setting: str | None = None) -> dict[str, Any]:
    """One clip's log (see the module docstring), for every (setting, model) recorded or only those asked for;
    InputError naming an unknown clip (with the count of known ones), model or setting."""
    import difflib

    from egoeval.core.errors import InputError
    from egoeval.egonormia.artifacts import ITEMS, RESPONSES, SUBTASKS

    ids = sources.items
    if clip_id not in ids:
        close = difflib.get_close_matches(clip_id, list(ids), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise InputError(
            ITEMS,
            f"clip {sources.shown(clip_id)!r} is not one of its {len(ids):,} clips{hint} (every id: "
            "egoeval show --list)",
        )
    for name, value in (("model", model), ("setting", setting)):
        known = sources.names[name]
        if value is not None and value not in known:
            raise InputError(RESPONSES, f"no {name} {sources.shown(value)!r} in the data (known: {', '.join(known)})")
    item = sources.items[clip_id]
    correct = int(item.correct_idx)
    sensible_gold = {int(i) for i in item.sensible_idx}
    taxonomy = getattr(item, "taxonomy", None)
    taxonomy = [] if taxonomy is None else list(taxonomy)
    category = ", ".join(str(c) for c in taxonomy[correct]) if len(taxonomy) > correct else ""
    log: dict[str, Any] = {
        "clip": sources.shown(clip_id),
        "category": sources.shown(category),
        "options": [
            {
                "letter": LETTERS[k],
                "behavior": sources.shown(behavior),
                "justification": sources.shown(justification),
                "gold_action": k == correct,
                "sensible": k in sensible_gold,
            }
            for k, (behavior, justification) in enumerate(zip(item.behaviors, item.justifications, strict=True))
        ],
        "gold": {
            "action": LETTERS[correct],
            "justification": LETTERS[correct],
            "sensible": _letters(sorted(sensible_gold)),
        },
        "runs": [],
    }
    replies = sources.replies.get(clip_id, [])
    parsed = sources.parsed.get(clip_id, [])
    pairs = sorted({(str(row.setting), str(row.model)) for row in [*replies, *parsed]})
    for pair_setting, pair_model in pairs:
        if (setting is not None and pair_setting != setting) or (model is not None and pair_model != model):
            continue
        recorded = [row for row in replies if (str(row.setting), str(row.model)) == (pair_setting, pair_model)]
        prediction = [row for row in parsed if (str(row.setting), str(row.model)) == (pair_setting, pair_model)]
        run: dict[str, Any] = {
            "setting": sources.shown(pair_setting),
            "model": sources.shown(pair_model),
            "backend": sources.shown(recorded[0].backend) if recorded else None,
            "protocol": sources.shown(recorded[0].protocol) if recorded else None,
            "parsed": _parsed(prediction[0], correct, sensible_gold) if prediction else None,
            "note": "",
            "calls": [],
        }
        rebuilt, why = _rebuilt(sources, item, pair_setting, pair_model, recorded) if recorded else ({}, "")
        run["note"] = sources.shown(why)
        order = {subtask: k for k, subtask in enumerate(SUBTASKS)}
        for row in sorted(recorded, key=lambda r: order.get(str(r.subtask), len(order))):
            key = str(row.request_key)
            rebuilt_key, request = rebuilt.get(str(row.subtask), ("", None))
            call: dict[str, Any] = {
                "subtask": sources.shown(row.subtask),
                "options_shown": _letters([int(p) for p in row.permutation]) if row.permutation is not None else [],
                "request_key": key,
                "sent_as_rebuilt": (rebuilt_key == key) if key and rebuilt_key else None,
                "decoding": None,
                "namespace": None,
                "messages": None,
                "reply": None if row.error else sources.shown(row.response),
                "error": sources.shown(row.error),
                "served_model": sources.shown(row.served_model or ""),
                "prompt_tokens": _count(row.prompt_tokens),
                "completion_tokens": _count(row.completion_tokens),
            }
            if request is not None:
                decoding = request.decoding
                call["decoding"] = {
                    "temperature": decoding.temperature,
                    "max_tokens": decoding.max_tokens,
                    "seed": decoding.seed,
                }
                call["namespace"] = request.namespace  # the request key's conventions (its "protocol" field)
                call["messages"] = _messages(sources, request, clip_id, pair_setting)
            run["calls"].append(call)
        log["runs"].append(run)
    return log


# ------------------------------------------------------------------------------------------------- the terminal text


def _plain(text: str) -> str:
    """Text for a terminal: control characters (escape sequences, carriage returns...) shown as escapes, lines kept."""
    return "".join(
        char if char in "\n\t" or (char.isprintable() and char not in "\u2028\u2029") else repr(char)[1:-1]
        for char in text
    )


def _indented(text: str, prefix: str = "    ") -> list[str]:
    return [prefix + line for line in _plain(text).split("\n")]


def _choice_text(parsed: dict[str, Any], subtask: str) -> str:
    entry = parsed[subtask]
    if entry["error"] and entry["choice"] is None:
        return f"{subtask} unusable ({entry['error']})"
    if subtask == "sensible":
        return f"sensible {', '.join(entry['choice']) or 'none'} (IoU {entry['iou']:.2f})"
    return f"{subtask} {entry['choice']} ({'right' if entry['right'] else 'wrong'})"


def _call_status(call: dict[str, Any]) -> str:
    match call["sent_as_rebuilt"]:
        case True:
            return "the messages below hash to the recorded request key: exactly what was sent"
        case False:
            return (
                "the request rebuilt from today's params and inputs differs from the one recorded (its key differs): "
                "the params or inputs changed since the infer stage ran; shown as it would be sent now"
            )
        case _:
            return "no request recorded (not sent)" if not call["request_key"] else "not rebuilt"


def format_text(log: dict[str, Any]) -> str:
    """A clip's log as terminal text."""
    lines = [f"clip {_plain(log['clip'])}" + (f"  ({_plain(log['category'])})" if log["category"] else "")]
    lines.append("options, stored order (gold: * action and justification, + sensible):")
    for option in log["options"]:
        mark = ("*" if option["gold_action"] else " ") + ("+" if option["sensible"] else " ")
        lines.append(f"  {option['letter']} {mark} {_plain(option['behavior']) or '(empty)'}")
        lines.append(f"        because: {_plain(option['justification']) or '(empty)'}")
    gold = log["gold"]
    lines.append(
        f"gold: action {gold['action']}, justification {gold['justification']}, sensible {', '.join(gold['sensible'])}"
    )
    if not log["runs"]:
        lines.append("\nno replies recorded for this clip")
    for run in log["runs"]:
        lines.append("")
        lines.append(
            f"== setting {_plain(run['setting'])} · model {_plain(run['model'])}"
            + (f" ({_plain(run['backend'])}, protocol {_plain(run['protocol'])})" if run["backend"] else "")
            + " =="
        )
        if run["parsed"]:
            lines.append("parsed: " + " · ".join(_choice_text(run["parsed"], s) for s in run["parsed"]))
        if run["note"]:
            lines.append(f"note: {_plain(run['note'])}")
        for call in run["calls"]:
            shown = f" (options shown as {', '.join(call['options_shown'])})" if call["options_shown"] else ""
            lines.append(f"-- {_plain(call['subtask'])} call{shown}, request key {call['request_key'][:16] or '-'}")
            lines.append(f"   {_call_status(call)}")
            if call["decoding"]:
                decoding = call["decoding"]
                lines.append(
                    f"   decoding: temperature {decoding['temperature']}, max_tokens {decoding['max_tokens']}"
                    + (f", seed {decoding['seed']}" if decoding["seed"] is not None else "")
                )
            for message in call["messages"] or []:
                lines.append(f"   [{_plain(message['role'])}]")
                for part in message["content"]:
                    if part["type"] in ("image", "video"):
                        lines.append(
                            f"    [{part['type']} {part['file'] or '(built from the clip)'}, {part['bytes']:,} bytes, "
                            f"sha256 {part['sha256']}]"
                        )
                    else:
                        lines.extend(_indented(part["text"]))
            if call["error"]:
                lines.append(f"   [no reply] {_plain(call['error'])}")
            else:
                usage = [
                    f"{call[k]:,} {k.split('_')[0]}"
                    for k in ("prompt_tokens", "completion_tokens")
                    if call[k] is not None
                ]
                meta = "; ".join(
                    filter(
                        None,
                        [
                            f"served by {_plain(call['served_model'])}" if call["served_model"] else "",
                            " / ".join(usage) and " / ".join(usage) + " tokens",
                        ],
                    )
                )
                lines.append("   [reply]" + (f" ({meta})" if meta else ""))
                lines.extend(_indented(call["reply"] or ""))
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------------ the pages

PAGE_STYLE = """body{font:14px/1.45 system-ui,sans-serif;margin:1.5rem auto;max-width:70rem;padding:0 1rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:left;
vertical-align:top}pre{white-space:pre-wrap;background:#f7f7f7;padding:.4rem;font-size:.8rem;max-height:30rem;
overflow:auto}.ok{color:#1a7f37}.bad{color:#c62828}.note{color:#555}section.run{border:1px solid #ddd;
border-radius:6px;padding:.2rem 1rem 1rem;margin:1rem 0}"""


def _page(title: str, body: str) -> str:
    from egoeval.markup import esc

    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
        f"<style>{PAGE_STYLE}</style></head><body>{body}</body></html>\n"
    )


def _choice_html(parsed: dict[str, Any], subtask: str) -> str:
    from egoeval.markup import esc

    entry = parsed[subtask]
    if entry["error"] and entry["choice"] is None:
        return f'<span class="bad">unusable</span> <span class="note">{esc(entry["error"])}</span>'
    if subtask == "sensible":
        return esc(", ".join(entry["choice"]) or "none") + f" (IoU {entry['iou']:.2f})"
    mark = "ok" if entry["right"] else "bad"
    return f'<span class="{mark}">{esc(entry["choice"])} ({"right" if entry["right"] else "wrong"})</span>'


def format_html(log: dict[str, Any], report: str = "../index.html") -> str:
    """A clip's log as a self-contained HTML page (every string escaped); ``report``: the link back."""
    from egoeval.markup import esc, table

    options = table(
        ["", "behaviour", "justification", "gold"],
        [
            [
                f"<b>{option['letter']}</b>",
                esc(option["behavior"]) or "<i>(empty)</i>",
                esc(option["justification"]) or "<i>(empty)</i>",
                " · ".join(
                    name
                    for name, gold in (
                        ("action &amp; justification", option["gold_action"]),
                        ("sensible", option["sensible"]),
                    )
                    if gold
                ),
            ]
            for option in log["options"]
        ],
    )
    body = [
        f'<p><a href="{esc(report)}">report</a> · <a href="index.html">every clip</a></p>',
        f"<h1>EgoNormia clip {esc(log['clip'])}</h1>",
        f"<p>{esc(log['category'])}</p>" if log["category"] else "",
        "<p>Options in the dataset's stored order (A–E), the gold marked. Each setting and model below: the parsed "
        "answers, then every call: the messages sent (images as file, size and sha256), the decoding and the raw "
        "reply. The same log in a terminal: <code>egoeval show " + esc(log["clip"]) + "</code>.</p>",
        options,
    ]
    if not log["runs"]:
        body.append("<p>No replies recorded for this clip.</p>")
    links = [f'<a href="#run-{k}">{esc(run["setting"])} · {esc(run["model"])}</a>' for k, run in enumerate(log["runs"])]
    body.append(f"<p>{' | '.join(links)}</p>" if links else "")
    for k, run in enumerate(log["runs"]):
        head = f"{esc(run['setting'])} · {esc(run['model'])}"
        if run["backend"]:
            head += f' <span class="note">({esc(run["backend"])}, protocol {esc(run["protocol"])})</span>'
        part = [f"<h2>{head}</h2>"]
        if run["parsed"]:
            part.append(
                table(
                    list(run["parsed"]), [[_choice_html(run["parsed"], subtask) for subtask in run["parsed"]]], "parsed"
                )
            )
        if run["note"]:
            part.append(f'<p class="note">{esc(run["note"])}</p>')
        for call in run["calls"]:
            shown = f" (options shown as {esc(', '.join(call['options_shown']))})" if call["options_shown"] else ""
            part.append(f"<h3>{esc(call['subtask'])} call{shown}</h3>")
            part.append(
                f'<p class="note">request key <code>{esc(call["request_key"] or "-")}</code>: {esc(_call_status(call))}'
                + (
                    f"; decoding {esc(', '.join(f'{k} {v}' for k, v in call['decoding'].items() if v is not None))}"
                    if call["decoding"]
                    else ""
                )
                + "</p>"
            )
            for message in call["messages"] or []:
                texts = []
                for item in message["content"]:
                    if item["type"] in ("image", "video"):
                        texts.append(
                            f"<p>[{item['type']} <code>{esc(item['file'] or '(built from the clip)')}</code>, "
                            f"{item['bytes']:,} bytes, sha256 <code>{esc(item['sha256'])}</code>]</p>"
                        )
                    else:
                        texts.append(f"<pre>{esc(item['text'])}</pre>")
                part.append(f"<p><b>{esc(message['role'])}</b></p>{''.join(texts)}")
            if call["error"]:
                part.append(f'<p><b>no reply</b></p><pre class="bad">{esc(call["error"])}</pre>')
            else:
                meta = [f"served by {esc(call['served_model'])}"] if call["served_model"] else []
                meta += [
                    f"{call[k]:,} {k.split('_')[0]} tokens"
                    for k in ("prompt_tokens", "completion_tokens")
                    if call[k] is not None
                ]
                part.append(
                    f"<p><b>reply</b> <span class=note>{esc('; '.join(meta))}</span></p><pre>{esc(call['reply'])}</pre>"
                )
        body.append(f'<section class="run" id="run-{k}">{"".join(part)}</section>')
    return _page(f"EgoNormia clip {log['clip']}", "".join(body))


def format_index(logs: Sequence[tuple[str, dict[str, Any]]], report: str = "../index.html") -> str:
    """The page listing every clip's log (``logs``: file name and log), with how many runs got its action wrong."""
    from egoeval.markup import esc, table

    rows = []
    for name, log in logs:
        wrong = sum(1 for run in log["runs"] if run["parsed"] and not run["parsed"]["action"]["right"])
        rows.append(
            [f'<a href="{esc(name)}">{esc(log["clip"])}</a>', esc(log["category"]), f"{wrong} of {len(log['runs'])}"]
        )
    body = (
        f'<p><a href="{esc(report)}">report</a></p><h1>EgoNormia: every clip\'s log</h1>'
        f"<p>{len(rows):,} clips. Each page: the messages sent per setting and model, the raw replies, the parsed "
        "answers and the gold (<code>egoeval show CLIP</code> prints the same).</p>"
        + table(["clip", "category", "action wrong"], rows, "clips")
    )
    return _page("EgoNormia: every clip's log", body)


def write_clip_logs(settings: EgoNormiaSettings, root: Path = Path(".")) -> None:
    """The egonormia_clip_logs stage: every clip's log as a page of reports/clips/ and their index, written together
    (a failed run leaves the last ones)."""
    from egoeval.core.io.commit import replaced_dir
    from egoeval.egonormia.artifacts import CLIP_LOGS, clip_log_name

    sources = load_sources(settings, root)
    logs = []
    with replaced_dir(root / CLIP_LOGS) as folder:
        for clip_id in sources.items:
            log = clip_log(sources, clip_id)
            name = clip_log_name(clip_id)
            (folder / name).write_text(format_html(log), encoding="utf-8")
            logs.append((name, log))
        (folder / "index.html").write_text(format_index(logs), encoding="utf-8")
    print(f"clip logs: {len(logs)} clips written to {CLIP_LOGS}/", file=sys.stderr)


# -------------------------------------------------------------------------------------------------------- the CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="egoeval show", description=help_text(__doc__))
    parser.add_argument("clip", nargs="?", help="the clip's id (egoeval show --list: every id)")
    parser.add_argument("--model", help="only this model (any name in the data)")
    parser.add_argument("--setting", help="only this setting (any name in the data, e.g. blind, pipeline, video)")
    parser.add_argument("--json", action="store_true", help="print the log as JSON instead of text")
    parser.add_argument("--list", action="store_true", help="print every clip's id instead")
    args = parser.parse_args(argv)
    if not args.list and args.clip is None:
        parser.error("name a clip (egoeval show --list: every id)")
    from egoeval.core.stage_shell import run_stage

    def body() -> None:
        from egoeval.core.io.atomic import json_bytes
        from egoeval.core.settings import benchmark_settings
        from egoeval.egonormia.settings import EgoNormiaSettings

        sources = load_sources(benchmark_settings("egonormia", EgoNormiaSettings))
        if args.list:
            print("\n".join(_plain(sources.shown(clip)) for clip in sources.items))
            return
        log = clip_log(sources, args.clip, args.model, args.setting)
        print(json_bytes(log).decode() if args.json else format_text(log))

    return run_stage(body, benchmark="egonormia")
