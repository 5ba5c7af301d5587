"""``egoeval report``: one self-contained HTML page of both benchmarks' results (also the DVC stage ``report``).

Everything the page needs is inside it: CSS and a few lines of JavaScript inline, charts as inline SVG (matplotlib's
SVG backend, ``egoeval.charts``), images as ``data:`` URIs. No network is needed to view it. The page is
byte-identical for identical inputs.

- EgoNormia: the leaderboard per setting with 95% bootstrap intervals (metrics/egonormia.json) and published figures
  of the evaluated dataset and split (``egonormia.fetch.dataset``, ``egonormia.fetch.split``; the primary table
  of egoeval/egonormia/data/published.json) where bundled,
  action accuracy per norm category (plots/egonormia/categories.csv), and a browsable set of clips (``report.clips``,
  those most models get wrong first) with the frames image, the options, the gold answers and each model's replies
  and parsed choices.
- EgoHumans: every tracker x detection mode with IDF1, MOTA and HOTA per sequence (metrics/egohumans.json), and the
  frames where the runs disagree most (``report.egohumans_frames``; ``egoeval.egohumans.disagreement``) with each
  run's boxes and track ids drawn over the frame.
"""

from __future__ import annotations

import argparse
import base64
import html
import io
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from PIL import Image

from egoeval.charts import PALETTE, grouped_bars, interval_chart
from egoeval.egohumans.artifacts import GT_DIR as EGOHUMANS_GT
from egoeval.egohumans.artifacts import IMAGES as EGOHUMANS_IMAGES
from egoeval.egohumans.artifacts import METRICS_FILE as EGOHUMANS_METRICS
from egoeval.egohumans.artifacts import TRACKS as EGOHUMANS_TRACKS
from egoeval.egohumans.disagreement import Disagreement, match_frame, most_disputed
from egoeval.egohumans.published import PublishedTable, read_published
from egoeval.egonormia.artifacts import (
    CATEGORIES_FILE,
    FRAMES,
    ITEMS,
    METRICS_FILE,
    PREDICTION_COLUMNS,
    PREDICTIONS,
    RESPONSES,
    SETTINGS,
    FrameStore,
    Unavailable,
    read_items,
    read_table,
    require_columns,
)
from egoeval.egonormia.published import load_published, select_table, source_of
from egoeval.errors import InputError
from egoeval.io import atomic_write_text, check_output, data_roots, inside, read_bounded, read_json, read_parquet
from egoeval.mot import read_mot, read_mot_folder
from egoeval.settings import load_settings
from egoeval.stage import run_stage

OUT = Path("reports/index.html")
METRICS = ("both", "action", "justification", "sensible_iou")  # EgoNormia, in the leaderboard's order
METRIC_NAMES = {"both": "both", "action": "action", "justification": "justification", "sensible_iou": "sensible IoU"}
# EgoHumans artifacts (written by stages/egohumans/fetch.py, track.py and score.py)
TRACKING_METRICS = ("IDF1", "MOTA", "HOTA")
LETTERS = "ABCDE"


# --------------------------------------------------------------------------------------------------- HTML helpers


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def data_uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def table(header: Sequence[str], rows: Iterable[Sequence[str]], cls: str = "") -> str:
    """An HTML table; cells are HTML already (escape text with ``esc``)."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def fmt(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "–"
    return f"{float(value):.{digits}f}"


# ------------------------------------------------------------------------------------------------------ EgoNormia


def _metric_cell(entry: dict[str, Any], metric: str) -> str:
    interval = (entry.get("ci95") or {}).get(metric)
    shown = f"<b>{fmt(entry.get(metric))}</b>"
    if interval:
        shown += f' <span class="ci">[{fmt(interval[0])}, {fmt(interval[1])}]</span>'
    return shown


def leaderboard(metrics: dict[str, Any], published: dict[str, Any], dataset: str, split: str = "full") -> str:
    """Per setting: our models ranked by ``both`` with 95% intervals, then the published figures of ``dataset`` and
    ``split`` (the primary table of ``published``, laid out as egoeval/egonormia/data/published.json); one chart of
    both."""
    bundled = select_table(published, dataset, split) or {}
    figures_by_setting = bundled.get("figures") or {}
    metrics = {  # {setting: {model: entry}}; any other key (a recorded protocol, say) is not a result
        setting: {model: entry for model, entry in models.items() if isinstance(entry, dict)}
        for setting, models in metrics.items()
        if isinstance(models, dict)
    }
    settings = [s for s in SETTINGS if s in metrics] + sorted(set(metrics) - set(SETTINGS))
    parts = []
    chart_rows, chart_published = [], []
    for setting in settings:
        models = metrics[setting]
        ranked = sorted(models, key=lambda m: (-(models[m].get("both") or 0), -(models[m].get("action") or 0), m))
        rows = []
        for rank, model in enumerate(ranked, 1):
            entry = models[model]
            rows.append(
                [
                    str(rank),
                    esc(model),
                    *(_metric_cell(entry, m) for m in METRICS),
                    esc(entry.get("n", "")),
                    fmt(100 * entry.get("coverage", 0)) + "%",
                    fmt(100 * entry.get("parse_failure_rate", 0)) + "%",
                    fmt(100 * entry.get("call_failure_rate", 0)) + "%",
                ]
            )
            for metric in METRICS:
                interval = (entry.get("ci95") or {}).get(metric) or [entry.get(metric), entry.get(metric)]
                if entry.get(metric) is not None:
                    chart_rows.append((setting, model, metric, entry[metric], interval[0], interval[1]))
        for model, figures in sorted(figures_by_setting.get(setting, {}).items()):
            rows.append(
                [
                    "",
                    f'{esc(model)} <span class="tag">published · {esc(dataset)}</span>',
                    *(f"<i>{fmt(figures.get(m))}</i>" for m in METRICS),
                    esc("" if figures.get("n") is None else figures["n"]),
                    "",
                    "",
                    "",
                ]
            )
            chart_published += [(setting, model, m, figures[m]) for m in METRICS if m in figures]
        header = [
            "#",
            "model",
            *(f"{METRIC_NAMES[m]} % [95% CI]" for m in METRICS),
            "n",
            "coverage",
            "parse fail",
            "call fail",
        ]
        parts.append(f"<h3>{esc(setting)}</h3>{table(header, rows, 'leaderboard')}")
    if figures_by_setting:
        note = (
            f"Published figures (italic) of dataset {esc(dataset)}, {esc(split)} split, {esc(bundled['as'])}: "
            f"{esc(source_of(bundled))}."
        )
    else:
        elsewhere = sorted({f"{t['dataset']}/{t['split']}" for t in published.get("tables", []) if t.get("primary")})
        note = (
            f"No published figures of dataset {esc(dataset)}, {esc(split)} split are bundled (figures for: "
            f"{esc(', '.join(elsewhere) or 'none')})."
        )
    note = f'<p class="note">{note} (<code>egoeval/egonormia/data/published.json</code>)</p>'
    rows_frame = pd.DataFrame(chart_rows, columns=["setting", "model", "metric", "value", "low", "high"])
    published_frame = pd.DataFrame(chart_published, columns=["setting", "model", "metric", "value"])
    chart = interval_chart(rows_frame, settings, METRICS, published_frame, "egonormia-leaderboard")
    return (
        '<section id="egonormia-leaderboard"><h2>EgoNormia leaderboard</h2>'
        "<p>Accuracy (%) per setting, ranked by <i>both</i> (action and justification right); 95% bootstrap intervals "
        "in brackets. Unusable answers count as wrong.</p>"
        f"{''.join(parts)}{note}<figure>{chart}</figure></section>"
    )


def category_section(categories: pd.DataFrame) -> str:
    require_columns(categories, ("setting", "model", "category", "n", "accuracy"), CATEGORIES_FILE)
    chart = grouped_bars(categories, "setting", "category", "model", "accuracy", "action accuracy %", "egonormia-cat")
    rows = [
        [esc(r.setting), esc(r.model), esc(r.category), esc(r.n), fmt(r.accuracy)]
        for r in categories.itertuples(index=False)
    ]
    return (
        '<section id="egonormia-categories"><h2>EgoNormia: action accuracy per norm category</h2>'
        "<p>Category of the correct option (a clip counts in each of its categories).</p>"
        f'<figure class="category-chart">{chart}</figure>'
        f"<details><summary>table</summary>{table(['setting', 'model', 'category', 'n', 'accuracy %'], rows)}"
        "</details></section>"
    )


def _choice(index: int, gold: set[int]) -> str:
    if index < 0:
        return '<span class="bad">unusable</span>'
    mark = "ok" if index in gold else "bad"
    return f'<span class="{mark}">{LETTERS[index] if index < len(LETTERS) else index}</span>'


def _set_choice(chosen: Sequence[int], gold: set[int], error: str) -> str:
    if error:
        return '<span class="bad">unusable</span>'
    union = set(chosen) | gold
    iou = len(set(chosen) & gold) / len(union) if union else 0.0
    letters = ", ".join(LETTERS[i] if i < len(LETTERS) else str(i) for i in sorted(chosen)) or "none"
    mark = "ok" if set(chosen) == gold else "bad"
    return f'<span class="{mark}">{letters}</span> <span class="ci">IoU {iou:.2f}</span>'


def select_clips(items: pd.DataFrame, predictions: pd.DataFrame, count: int) -> list[str]:
    """The ``count`` clip ids most (setting, model) pairs answer wrongly (action), ties by id."""
    correct = dict(zip(items["id"].astype(str), items["correct_idx"].astype(int), strict=True))
    wrong = {clip: 0 for clip in correct}
    for clip, action in zip(predictions["id"].astype(str), predictions["action"].astype(int), strict=True):
        if clip in wrong and action != correct[clip]:
            wrong[clip] += 1
    return sorted(wrong, key=lambda clip: (-wrong[clip], clip))[:count]


def clip_card(
    item: Any, frames: FrameStore, predictions: pd.DataFrame, responses: pd.DataFrame, index: int
) -> tuple[str, int]:
    """One clip: frames image, options with gold marks, every (setting, model)'s choices and replies.

    Returns the HTML and how many (setting, model) pairs got the action wrong."""
    clip = str(item.id)
    correct = int(item.correct_idx)
    sensible = {int(i) for i in item.sensible_idx}
    category = ", ".join(str(c) for c in item.taxonomy[correct]) if len(item.taxonomy) > correct else ""
    try:
        image = f'<img class="frames" alt="frames of {esc(clip)}" src="{data_uri(frames.jpeg(clip), "image/jpeg")}">'
    except Unavailable as why:
        image = f'<p class="bad">{esc(why)}</p>'
    options = [
        [
            f"<b>{LETTERS[k]}</b>",
            esc(behavior) or "<i>(empty)</i>",
            esc(justification) or "<i>(empty)</i>",
            ("✔ action &amp; justification" if k == correct else "") + (" · sensible" if k in sensible else ""),
        ]
        for k, (behavior, justification) in enumerate(zip(item.behaviors, item.justifications, strict=True))
    ]
    answered = []
    wrong = 0
    mine = predictions[predictions["id"].astype(str) == clip]
    replies = responses[responses["id"].astype(str) == clip]
    for row in mine.itertuples(index=False):
        wrong += int(row.action) != correct
        said = replies[(replies["setting"] == row.setting) & (replies["model"] == row.model)]
        texts = []
        for reply in said.sort_values("subtask").itertuples(index=False):
            order = ", ".join(LETTERS[int(k)] for k in reply.permutation) if len(reply.permutation) else ""
            shown = f" (options shown as {order})" if order else ""
            body = esc(reply.response) if not reply.error else f'<span class="bad">{esc(reply.error)}</span>'
            texts.append(f"<p><b>{esc(reply.subtask)}</b>{esc(shown)}</p><pre>{body}</pre>")
        errors = [str(getattr(row, f"{s}_error")) for s in ("action", "justification", "sensible")]
        answered.append(
            [
                esc(row.setting),
                esc(row.model),
                _choice(int(row.action), {correct}),
                _choice(int(row.justification), {correct}),
                _set_choice([int(i) for i in row.sensible], sensible, errors[2]),
                esc("; ".join(e for e in errors if e)),
                f"<details><summary>replies</summary>{''.join(texts)}</details>" if texts else "",
            ]
        )
    description = str(getattr(item, "description", "") or "")
    card = (
        f'<article class="clip" id="clip-{index}" data-wrong="{wrong}" data-search="{esc(clip.lower())} '
        f'{esc(category.lower())}"><h3>{esc(clip)} <span class="tag">{esc(category)}</span>'
        f"{' <span class=tag>verified</span>' if bool(getattr(item, 'verified', False)) else ''}"
        f' <span class="tag wrong">{wrong} of {len(mine)} wrong</span></h3>{image}'
        + (
            f"<details><summary>scene description (pipeline setting)</summary><p>{esc(description)}</p></details>"
            if description
            else ""
        )
        + table(["", "behaviour", "justification", "gold"], options, "options")
        + table(["setting", "model", "action", "justification", "sensible", "failure", ""], answered, "answers")
        + "</article>"
    )
    return card, wrong


def clips_section(root: Path, count: int) -> str:
    items = read_items(root / ITEMS)
    predictions = read_predictions(root / PREDICTIONS)
    responses = read_responses(root / RESPONSES)
    frames = FrameStore(read_table(root / FRAMES / "index.parquet", ["id", "image", "error"]), root / FRAMES)
    chosen = select_clips(items, predictions, count)
    by_id = {str(row.id): row for row in items.itertuples(index=False)}
    cards = [clip_card(by_id[clip], frames, predictions, responses, i)[0] for i, clip in enumerate(chosen)]
    return (
        '<section id="egonormia-clips"><h2>EgoNormia clips</h2>'
        f"<p>{len(chosen)} of {len(items)} clips, those the most models get wrong first. Options are lettered in the "
        "dataset's order (A–E); each model saw them shuffled, as its replies note. "
        '<span class="ok">green</span>: right, <span class="bad">red</span>: wrong.</p>'
        '<div class="controls"><input id="clip-filter" type="search" placeholder="filter by id or category">'
        '<label><input id="clip-wrong" type="checkbox"> only clips some model gets wrong</label> '
        '<span id="clip-count"></span></div>'
        f"{''.join(cards)}</section>"
    )


def read_predictions(path: Path) -> pd.DataFrame:
    return read_parquet(path, PREDICTION_COLUMNS)


def read_responses(path: Path) -> pd.DataFrame:
    return read_parquet(path, ("id", "setting", "model", "subtask", "permutation", "response", "error"))


def read_csv(path: Path) -> pd.DataFrame:
    """A CSV table of the pipeline's plots (bounded, as ``read_bounded``); InputError naming it when unreadable."""
    try:
        return pd.read_csv(io.BytesIO(read_bounded(path)))
    except (ValueError, pd.errors.ParserError) as error:
        raise InputError(path, f"not a readable CSV table: {error}") from None


# ------------------------------------------------------------------------------------------------------ EgoHumans


def _runs(metrics: dict[str, Any], trackers: Sequence[str], modes: Sequence[str]) -> list[tuple[str, str, str]]:
    """(run, tracker, mode) of every run in the metrics file, in params order (unknown runs last, split at '-')."""
    known = {f"{t}-{m}": (t, m) for t in trackers for m in modes}
    runs = [name for name, value in metrics.items() if isinstance(value, dict) and "COMBINED" in value]
    order = list(known)
    runs.sort(key=lambda r: (order.index(r) if r in order else len(order), r))
    return [(run, *known.get(run, tuple(run.rsplit("-", 1)) if "-" in run else (run, ""))) for run in runs]


def tracking_section(
    metrics: dict[str, Any], runs: list[tuple[str, str, str]], published: PublishedTable, mapping: dict[str, str]
) -> str:
    """Per metric (IDF1, MOTA, HOTA) a table of sequences x runs (tracker x detection mode), a chart of the same, and
    the published table with the runs params map to its rows (``egohumans.compare``)."""
    sequences = [*sorted({s for run, _, _ in runs for s in metrics[run].get("sequences", {})}), "COMBINED"]

    def value(run: str, sequence: str, metric: str) -> float | None:
        entry = metrics[run]["COMBINED"] if sequence == "COMBINED" else metrics[run]["sequences"].get(sequence, {})
        number = entry.get(metric)
        return float(number) if isinstance(number, int | float) else None

    tables = []
    for metric in TRACKING_METRICS:
        rows = []
        for sequence in sequences:
            numbers = [value(run, sequence, metric) for run, _, _ in runs]
            best = max((n for n in numbers if n is not None), default=None)
            cells = [f"<b>{fmt(n)}</b>" if n is not None and n == best else fmt(n) for n in numbers]
            rows.append([esc(sequence), *cells])
        header = [metric, *(f"{esc(tracker)}<br>{esc(mode)}" for _, tracker, mode in runs)]
        tables.append(table(header, rows, "tracking"))
    long = pd.DataFrame(
        [
            (metric, sequence, run, value(run, sequence, metric))
            for metric in TRACKING_METRICS
            for sequence in sequences
            for run, _, _ in runs
            if value(run, sequence, metric) is not None
        ],
        columns=["metric", "sequence", "run", "value"],
    )
    chart = grouped_bars(long, "metric", "sequence", "run", "value", "%", "egohumans-sequences")
    fields = [f for f in ("IDF1", "MOTA", "MOTP", "IDSW") if any(f in row for row in published.rows.values())]
    beside = {row: [run for run, theirs in sorted(mapping.items()) if theirs == row] for row in published.rows}
    published_rows = [
        [
            f'{esc(name)} <span class="tag">published</span>',
            *(f"<i>{fmt(figures.get(f), 0 if f == 'IDSW' else 1)}</i>" for f in fields),
            esc(
                ", ".join(
                    f"{run}: IDF1 {fmt(value(run, 'COMBINED', 'IDF1'))}" for run in beside[name] if run in metrics
                )
                or "–"
            ),
        ]
        for name, figures in published.rows.items()
    ]
    return (
        '<section id="egohumans-runs"><h2>EgoHumans: trackers × detection modes</h2>'
        "<p>IDF1 (primary), MOTA and HOTA (%) per sequence and combined, one column per tracker and detection mode; "
        f'the best of each row in bold. Protocol: {esc(_protocol(metrics, runs))}.</p><div class="tables">'
        f"{''.join(tables)}</div><figure>{chart}</figure>"
        f'<h3>Published</h3><p class="note">{esc(published.source)} (protocol {esc(published.protocol)}; '
        f"<code>{esc(published.path)}</code>). Our runs are beside the rows <code>egohumans.compare.published</code> "
        "maps them to; on the bundled sample that is a plumbing check, not a result.</p>"
        f"{table(['published row', *fields, 'our runs beside it'], published_rows, 'published')}</section>"
    )


def _protocol(metrics: dict[str, Any], runs: list[tuple[str, str, str]]) -> str:
    found = sorted({str(metrics[run].get("protocol", "unrecorded")) for run, _, _ in runs})
    return ", ".join(found) or "unrecorded"


def _colour(track: int) -> str:
    return PALETTE[track % len(PALETTE)]


def frame_panel(
    image: str, size: tuple[int, int], scale: float, gt: pd.DataFrame, pred: pd.DataFrame, iou_threshold: float
) -> str:
    """One run's boxes over the frame as an inline SVG: ground truth dashed white, tracks coloured by id."""
    width, height = size
    matches = {track: person for person, track in match_frame(gt, pred, iou_threshold).items()}
    shapes = [f'<image href="{image}" x="0" y="0" width="{width}" height="{height}"/>']
    for row in gt.itertuples(index=False):
        shapes.append(
            f'<rect class="gt" x="{row.x * scale:.1f}" y="{row.y * scale:.1f}" width="{row.w * scale:.1f}" '
            f'height="{row.h * scale:.1f}"/>'
        )
    for row in pred.itertuples(index=False):
        track = int(row.id)
        colour = _colour(track)
        label = f"id {track}" + (f" → person {matches[track]}" if track in matches else " (no person)")
        shapes.append(
            f'<rect class="track" stroke="{colour}" x="{row.x * scale:.1f}" y="{row.y * scale:.1f}" '
            f'width="{row.w * scale:.1f}" height="{row.h * scale:.1f}"><title>{esc(label)}</title></rect>'
            f'<text x="{row.x * scale + 2:.1f}" y="{max(10.0, row.y * scale - 3):.1f}" fill="{colour}">{track}</text>'
        )
    return f'<svg class="boxes" viewBox="0 0 {width} {height}" role="img">{"".join(shapes)}</svg>'


def _embedded_frame(path: Path, width: int) -> tuple[str, tuple[int, int], float]:
    """A frame scaled down to at most ``width`` px as a JPEG data URI, its size and the scale applied."""
    try:
        with Image.open(path) as opened:
            image = opened.convert("RGB")
    except OSError as error:
        raise InputError(path, f"cannot read the frame: {error}") from None
    scale = min(1.0, width / image.width)
    if scale < 1:
        image = image.resize((round(image.width * scale), round(image.height * scale)), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=80)
    return data_uri(buffer.getvalue(), "image/jpeg"), image.size, scale


def disagreement_section(
    root: Path, runs: list[tuple[str, str, str]], count: int, width: int, iou_threshold: float, data_root: str
) -> str:
    """The ``count`` frames where the runs disagree most, each frame (which must lie in the data root
    ``data_root``, egohumans.fetch.path) with every run's boxes over it."""
    if count == 0:
        return ""
    gt_files = read_mot_folder(root / EGOHUMANS_GT)
    sequences = {}
    for name, path in gt_files.items():
        tracks = {}
        for run, _, _ in runs:
            found = read_mot_folder(root / EGOHUMANS_TRACKS / run)
            tracks[run] = read_mot(found[name], kind="pred") if name in found else read_mot(path, kind="gt").iloc[0:0]
        sequences[name] = (read_mot(path, kind="gt"), tracks)
    chosen: list[Disagreement] = most_disputed(sequences, iou_threshold, count, gap=15)
    images = read_parquet(root / EGOHUMANS_IMAGES, ("sequence", "frame", "path"))
    roots = data_roots(root / data_root)
    located = {
        (str(s), int(f)): str(p) for s, f, p in zip(images["sequence"], images["frame"], images["path"], strict=True)
    }
    blocks = []
    for pick in chosen:
        where = located.get((pick.sequence, pick.frame))
        if where is None:
            raise InputError(root / EGOHUMANS_IMAGES, f"no image for frame {pick.frame}", row=pick.sequence)
        path = Path(where) if Path(where).is_absolute() else root / where
        inside(path, roots, root / EGOHUMANS_IMAGES, f"{pick.sequence} frame {pick.frame}")  # the page is shared
        uri, size, scale = _embedded_frame(path, width)
        gt, tracks = sequences[pick.sequence]
        gt_frame = gt[gt["frame"] == pick.frame]
        panels = []
        for run, tracker, mode in runs:
            pred = tracks[run][tracks[run]["frame"] == pick.frame]
            caption = f"{esc(tracker)} · {esc(mode)}: {pick.missed[run]} missed, {pick.switched[run]} switched id"
            panels.append(
                f'<figure class="panel">{frame_panel(uri, size, scale, gt_frame, pred, iou_threshold)}'
                f"<figcaption>{caption}</figcaption></figure>"
            )
        blocks.append(
            f'<div class="disagreement"><h3>{esc(pick.sequence)}, frame {pick.frame}: the runs disagree on '
            f'{pick.people} of {len(gt_frame)} people</h3><div class="panels">{"".join(panels)}</div></div>'
        )
    return (
        '<section id="egohumans-frames"><h2>EgoHumans: where the trackers disagree</h2>'
        "<p>Frames where the most people are tracked differently across runs (missed by one run, or given a new track "
        "id, but not by another). Dashed white: ground truth; coloured: each run's tracks, labelled by track id.</p>"
        + ("".join(blocks) if blocks else "<p>Every run agrees on every frame.</p>")
        + "</section>"
    )


# ----------------------------------------------------------------------------------------------------------- page

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1400px;padding:0 1.5rem
 2rem;color:#1d1d1f;line-height:1.4}
nav{position:sticky;top:0;background:#fff;border-bottom:1px solid #ddd;padding:.5rem 0;z-index:2}
nav a{margin-right:1rem}
h2{border-bottom:2px solid #4269d0;padding-bottom:.2rem;margin-top:2.5rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:.85rem}
th,td{border:1px solid #ddd;padding:.25rem .5rem;vertical-align:top;text-align:left}
th{background:#f3f5fa}
.ci{color:#666;font-size:.8em}
.tag{font-size:.7em;background:#eef;border-radius:3px;padding:0 .3em;font-weight:normal}
.tag.wrong{background:#fee}
.ok{color:#137333;font-weight:bold}.bad{color:#c5221f;font-weight:bold}
.note{color:#555;font-size:.85rem}
svg.chart{max-width:100%;height:auto}
img.frames{max-width:100%;display:block;margin:.5rem 0;border:1px solid #ccc}
article.clip{border:1px solid #ddd;border-radius:6px;padding:.2rem 1rem 1rem;margin:1rem 0}
pre{white-space:pre-wrap;background:#f7f7f7;padding:.4rem;font-size:.8rem;max-height:14rem;overflow:auto}
.controls{margin:.5rem 0}.controls input[type=search]{width:20rem;padding:.2rem}
.panels{display:flex;flex-wrap:wrap;gap:.5rem}\n.tables{display:flex;flex-wrap:wrap;gap:1.5rem}
figure.panel{margin:0;width:calc(50% - .5rem);min-width:280px}
figure.panel figcaption{font-size:.8rem}
svg.boxes{width:100%;height:auto;display:block}
svg.boxes rect{fill:none;stroke-width:2}
svg.boxes rect.gt{stroke:#fff;stroke-dasharray:4 3;stroke-width:1.5}
svg.boxes text{font:bold 12px sans-serif;paint-order:stroke;stroke:#000;stroke-width:2px}
"""

SCRIPT = """
(function () {
  var filter = document.getElementById('clip-filter');
  var wrongOnly = document.getElementById('clip-wrong');
  var count = document.getElementById('clip-count');
  if (!filter || !wrongOnly || !count) { return; }
  var clips = Array.prototype.slice.call(document.querySelectorAll('article.clip'));
  function update() {
    var text = filter.value.trim().toLowerCase();
    var shown = 0;
    clips.forEach(function (clip) {
      var visible = clip.getAttribute('data-search').indexOf(text) >= 0 &&
        (!wrongOnly.checked || Number(clip.getAttribute('data-wrong')) > 0);
      clip.hidden = !visible;
      shown += visible ? 1 : 0;
    });
    count.textContent = shown + ' of ' + clips.length + ' clips shown';
  }
  filter.addEventListener('input', update);
  wrongOnly.addEventListener('change', update);
  update();
})();
"""


def build_page(root: Path, settings: Any) -> str:
    """The whole page for the workspace at ``root`` (``settings``: the validated params.yaml)."""
    report = settings.report
    egonormia = read_json(root / METRICS_FILE)
    if not (root / CATEGORIES_FILE).is_file():
        raise InputError(root / CATEGORIES_FILE, "file not found (run the stages before this one)")
    categories = read_csv(root / CATEGORIES_FILE)
    egohumans = read_json(root / EGOHUMANS_METRICS)
    runs = _runs(egohumans, settings.egohumans.track.trackers, settings.egohumans.detect.modes)
    sections = [
        leaderboard(egonormia, load_published(), settings.egonormia.fetch.dataset, settings.egonormia.fetch.split),
        category_section(categories),
        clips_section(root, report.clips),
        tracking_section(
            egohumans,
            runs,
            read_published(root / settings.egohumans.compare.published_file),
            dict(settings.egohumans.compare.published),
        ),
        disagreement_section(
            root,
            runs,
            report.egohumans_frames,
            report.image_width,
            settings.egohumans.score.iou_threshold,
            settings.egohumans.fetch.path,
        ),
    ]
    nav = (
        '<nav><b>egoeval</b> · <a href="#egonormia-leaderboard">leaderboard</a><a href="#egonormia-categories">'
        'categories</a><a href="#egonormia-clips">clips</a><a href="#egohumans-runs">tracking</a>'
        '<a href="#egohumans-frames">disagreements</a></nav>'
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>egoeval report: EgoNormia and EgoHumans</title>"
        f"<style>{STYLE}</style></head><body>{nav}<h1>egoeval report</h1>"
        "<p>EgoNormia and EgoHumans results of this workspace's DVC pipeline (<code>egoeval report</code>). "
        "Self-contained: no network needed.</p>"
        f"{''.join(sections)}<script>{SCRIPT}</script></body></html>\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="egoeval report", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"the HTML file to write (default {OUT})")
    args = parser.parse_args(argv)

    def body() -> None:
        check_output(args.out, own=[OUT.as_posix()])  # never over the metrics or any other tracked file
        page = build_page(Path("."), load_settings())
        atomic_write_text(args.out, page)
        print(f"report: wrote {args.out} ({len(page.encode()) / 1e6:.1f} MB)")

    return run_stage(body)


if __name__ == "__main__":
    raise SystemExit(main())
