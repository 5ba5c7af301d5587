"""EgoHumans' sections of the report page (``egoeval report``).

- every tracker x detection mode with IDF1, MOTA and HOTA per sequence (metrics/egohumans.json) beside the published
  table (``egohumans.compare``);
- every run's cross-view scores (``egoeval.egohumans.crossview``: multi-camera identity, world-frame tracking);
- the frames where the runs disagree most (``egohumans.report.frames``; ``egoeval.egohumans.disagreement``) with
  each run's boxes and track ids drawn over the frame.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from PIL import Image

from egoeval.charts import PALETTE, grouped_bars
from egoeval.core.benchmarks import ReportPart, ReportSection
from egoeval.core.errors import InputError
from egoeval.core.io.bounded import read_parquet
from egoeval.core.io.manifest import read_pinned
from egoeval.core.io.paths import data_roots
from egoeval.egohumans import crossview
from egoeval.egohumans.artifacts import GT_DIR, IMAGES, METRICS_FILE, PAIRED_FILE, TRACKS
from egoeval.egohumans.disagreement import Disagreement, match_frame, most_disputed
from egoeval.egohumans.published import PublishedTable, mismatch, read_published
from egoeval.markup import data_uri, esc, file_digests, fmt, paired_table, params_digest, smoke_labelled, table
from egoeval.reported import read_metrics
from egoeval.significance import read_paired
from egoeval.tracking.mot import read_mot, read_mot_folder

if TYPE_CHECKING:
    from egoeval.egohumans.settings import EgoHumansSettings

TRACKING_METRICS = ("IDF1", "MOTA", "HOTA")
STYLE = """.panels{display:flex;flex-wrap:wrap;gap:.5rem}
.tables{display:flex;flex-wrap:wrap;gap:1.5rem}
figure.panel{margin:0;width:calc(50% - .5rem);min-width:280px}
figure.panel figcaption{font-size:.8rem}
svg.boxes{width:100%;height:auto;display:block}
svg.boxes rect{fill:none;stroke-width:2}
svg.boxes rect.gt{stroke:#fff;stroke-dasharray:4 3;stroke-width:1.5}
svg.boxes text{font:bold 12px sans-serif;paint-order:stroke;stroke:#000;stroke-width:2px}
"""


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
    """Per metric (IDF1, MOTA, HOTA) a table of sequences x runs (tracker x detection mode), a chart of each run's
    combined figures, and the published table with the runs params map to its rows (``egohumans.compare``)."""
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
    combined = pd.DataFrame(  # the chart: each run's combined figures (per sequence: the tables)
        [
            (metric, "COMBINED", run, value(run, "COMBINED", metric))
            for metric in TRACKING_METRICS
            for run, _, _ in runs
            if value(run, "COMBINED", metric) is not None
        ],
        columns=["metric", "sequence", "run", "value"],
    )
    chart = grouped_bars(combined, "metric", "sequence", "run", "value", "% (combined)", "egohumans-sequences")
    fields = [f for f in ("IDF1", "MOTA", "MOTP", "IDSW") if any(f in row for row in published.rows.values())]
    apart = {run: mismatch(metrics.get(run, {}), published) for run in mapping}  # not the published data: why
    beside = {
        row: [run for run, theirs in sorted(mapping.items()) if theirs == row and not apart[run]]
        for row in published.rows
    }
    apart_note = "".join(
        f"<li><code>{esc(run)}</code> (mapped to {esc(mapping[run])}): {esc(why)}</li>"
        for run, why in sorted(apart.items())
        if why and run in metrics
    )
    apart_note = (
        f'<h4 class="apart">Not beside the published figures, not ranked among them:</h4><ul>{apart_note}</ul>'
        if apart_note
        else ""
    )
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
        f"<code>{esc(published.path)}</code>). Our runs stand beside the rows <code>egohumans.compare.published</code> "
        "maps them to only where they scored the published data (the download's test set, ego_rgb, every sequence, "
        "boxes from a detector) under its protocol; the bundled sample, a smoke run or ground-truth boxes stand "
        f"apart.</p>{table(['published row', *fields, 'our runs beside it'], published_rows, 'published')}"
        f"{apart_note}</section>"
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


def _embedded_frame(
    path: Path, sha256: str, width: int, roots: tuple[Path, ...], images: Path, row: str
) -> tuple[str, tuple[int, int], float]:
    """A frame (read as every pinned frame is, ``read_pinned``: inside the data root ``roots``, its bytes
    checked against the pinned ``sha256``; errors name the ``images`` table's ``row``) scaled down to at most
    ``width`` px as a JPEG data URI, its size and the scale applied."""
    data = read_pinned(path, sha256, roots, images, row)
    try:
        with Image.open(io.BytesIO(data)) as opened:
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
    gt_files = read_mot_folder(root / GT_DIR)
    sequences = {}
    for name, path in gt_files.items():
        tracks = {}
        for run, _, _ in runs:
            found = read_mot_folder(root / TRACKS / run)
            tracks[run] = read_mot(found[name], kind="pred") if name in found else read_mot(path, kind="gt").iloc[0:0]
        sequences[name] = (read_mot(path, kind="gt"), tracks)
    chosen: list[Disagreement] = most_disputed(sequences, iou_threshold, count, gap=15)
    images = read_parquet(root / IMAGES, ("sequence", "frame", "path", "sha256"))
    roots = data_roots(root / data_root)
    located = {
        (str(row.sequence), int(row.frame)): (str(row.path), str(row.sha256)) for row in images.itertuples(index=False)
    }
    blocks = []
    for pick in chosen:
        if (pick.sequence, pick.frame) not in located:
            raise InputError(root / IMAGES, f"no image for frame {pick.frame}", row=pick.sequence)
        where, sha256 = located[pick.sequence, pick.frame]
        path = Path(where) if Path(where).is_absolute() else root / where
        uri, size, scale = _embedded_frame(
            path, sha256, width, roots, root / IMAGES, f"{pick.sequence} frame {pick.frame}"
        )
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


def paired_section(paired: pd.DataFrame, protocol: str, confidence: float) -> str:
    """``plots/egohumans/paired.csv`` as a table: every pair of trackers on the same detections and sequences."""
    intro = (
        f"<p>Trackers compared sequence by sequence (protocol {esc(protocol)}; <i>setting</i> = the detection mode "
        "both ran on, <i>n</i> = sequences). <i>a</i> and <i>b</i> are the means of the per-sequence scores (each "
        "sequence weighs the same), not the pooled figures above; <i>diff</i> = a − b in points with its "
        f"{confidence:.0%} paired bootstrap interval over sequences, and the bootstrap's p-value, Holm-adjusted over "
        "the pairs of each mode and metric. With a handful of sequences the bootstrap only reshuffles those few: "
        "read its intervals and p-values as descriptive, not as evidence.</p>"
    )
    body = paired_table(paired) if len(paired) else "<p>Fewer than two trackers ran on any detection mode.</p>"
    return f'<section id="egohumans-paired"><h2>EgoHumans paired comparisons</h2>{intro}{body}</section>'


def report(root: Path, settings: EgoHumansSettings) -> ReportPart:
    """EgoHumans' sections for the workspace at ``root`` (``settings``: its validated section)."""
    params = settings
    metrics = read_metrics(root / METRICS_FILE, crossview.check_metrics_shape)
    runs = _runs(metrics, params.track.trackers, params.detect.modes)
    published = read_published(root / params.compare.published_file)
    frames = disagreement_section(
        root, runs, params.report.frames, params.report.image_width, params.score.iou_threshold, params.fetch.path
    )
    runs_table = tracking_section(metrics, runs, published, dict(params.compare.published))
    shown = (params.score.protocol, params.paired.confidence)
    across = crossview.report_section(metrics, [run for run, _, _ in runs], params.score.cross_view.distance_m)
    sections = [
        ReportSection("egohumans-runs", "tracking", runs_table),
        ReportSection("egohumans-paired", "paired", paired_section(read_paired(root / PAIRED_FILE), *shown)),
        ReportSection("egohumans-crossview", "across views", across),
        ReportSection("egohumans-frames", "disagreements", frames),
    ]
    limits = sorted({str(entry["limit"].get("sequences")) for entry in _entries(metrics, runs) if entry.get("limit")})
    if limits:  # a smoke run: every section that shows its numbers says so
        said = f"EgoHumans on the first {', '.join(limits)} sequence(s) by name (egohumans.fetch.limit)"
        sections = [ReportSection(s.anchor, s.label, smoke_labelled(s.html, said)) for s in sections]
    return ReportPart(sections, STYLE, provenance=provenance(root, settings))


def _entries(metrics: dict[str, Any], runs: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
    return [metrics[run] for run, _, _ in runs if isinstance(metrics.get(run), dict)]


def provenance(root: Path, settings: EgoHumansSettings) -> dict[str, str]:
    """What EgoHumans' sections were made from, deterministically: the data root and annotation with the manifest's
    digest (it pins every file read under the root), a smoke run's limit, the digest of the egohumans params and of
    the metrics and paired table the sections show."""
    fetch = settings.fetch
    modality = fetch.modality if isinstance(fetch.modality, str) else ", ".join(fetch.modality)
    data = f"source {fetch.source} ({fetch.path}), annotation {fetch.annotation}, modality {modality}"
    if fetch.limit is not None:
        data += f", smoke run: the first {fetch.limit} sequence(s)"
    return {
        "EgoHumans data": data + "\n" + file_digests(root, [fetch.manifest]),
        "EgoHumans params": f"the egohumans params section as validated: sha256 {params_digest(settings)}",
        "EgoHumans results": file_digests(root, [METRICS_FILE, PAIRED_FILE]),
    }
