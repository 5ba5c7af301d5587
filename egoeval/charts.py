"""Static SVG charts for the HTML report, drawn with matplotlib's SVG backend (no JavaScript, no CDN).

Each function returns one ``<svg>`` element ready to inline in a page: text drawn as paths (no font needed where it
is viewed), byte-identical for identical input (fixed hash salt, no date, matplotlib's own copy of the font), and
its element ids prefixed so several charts can share a page.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import matplotlib
import pandas as pd
from matplotlib import font_manager
from matplotlib.figure import Figure

FAMILY = "DejaVu Sans"
BUNDLED_FONTS = [  # pinned with matplotlib; a system copy of another version has other glyphs
    Path(matplotlib.get_data_path()) / "fonts" / "ttf" / f"DejaVuSans{face}.ttf"
    for face in ("", "-Bold", "-Oblique", "-BoldOblique")
]
RC = {
    "font.family": [FAMILY],
    "svg.hashsalt": "egoeval",
    "svg.fonttype": "path",
    "text.parse_math": False,  # names from data are text: '$' in a sequence or model name is no mathtext
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
# 20 colours told apart at a glance (Observable's 10, then Tableau's darker and lighter companions); a chart with more
# series than colours gives the later ones hatches too (``series_styles``), so no two series look alike
PALETTE = (
    "#4269d0", "#efb118", "#ff725c", "#6cc5b0", "#3ca951", "#ff8ab7", "#a463f2", "#97bbf5", "#9c6b4e", "#9498a0",
    "#1b3a7a", "#8c6d00", "#b5232f", "#1e7b6e", "#1f5f2e", "#c2185b", "#5b2a96", "#00a3d9", "#e8a27a", "#3d3d3d",
)  # fmt: skip
HATCHES = ("", "///", "...", "xxx")
METRIC_MARKERS = {"action": "o", "justification": "s", "both": "D", "sensible_iou": "^"}


def series_styles(count: int) -> list[tuple[str, str]]:
    """``count`` distinct (colour, hatch) pairs: every colour plain first, then every colour again with each hatch."""
    if count > len(PALETTE) * len(HATCHES):
        raise ValueError(f"{count} series: a chart tells at most {len(PALETTE) * len(HATCHES)} apart")
    return [(PALETTE[k % len(PALETTE)], HATCHES[k // len(PALETTE)]) for k in range(count)]


def to_svg(figure: Figure, prefix: str) -> str:
    """The figure as an inline ``<svg>`` whose ids (and the references to them) start with ``prefix``."""
    buffer = io.StringIO()
    with matplotlib.rc_context(RC):
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    text = buffer.getvalue()
    text = text[text.index("<svg") :]  # drop the XML declaration and doctype: not allowed inside HTML
    text = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}-\1"', text)
    text = re.sub(r'(href="#|url\(#)([^")]+)', rf"\1{prefix}-\2", text)
    return text.replace("<svg ", f'<svg class="chart" role="img" aria-label="{prefix}" ', 1)


@cache
def use_bundled_font() -> None:
    """Resolve the charts' font to matplotlib's own files, whatever the machine's font cache lists first (a system
    DejaVu Sans of another version draws other glyph paths, so the same report would differ between machines)."""
    manager = font_manager.fontManager
    manager.ttflist = [entry for entry in manager.ttflist if entry.name != FAMILY]
    for path in BUNDLED_FONTS:
        manager.addfont(path)  # and clears findfont's cache


def _figure(width: float, height: float) -> Figure:
    use_bundled_font()
    with matplotlib.rc_context(RC):
        return Figure(figsize=(width, height), layout="constrained")


def interval_chart(
    rows: pd.DataFrame, order: dict[str, list[str]], metrics: Sequence[str], published: pd.DataFrame, prefix: str
) -> str:
    """EgoNormia leaderboard: one panel per setting of ``order``, side by side, each with its models in the given
    rank order (best on top) and their metrics (%) with 95% intervals; published figures as stars; the legend on top.
    About 4 inches tall for 16 models a panel: a laptop screen shows it whole.

    ``rows``: setting, model, metric, value, low, high. ``published``: setting, model, metric, value.
    """
    settings = list(order) or [""]
    most = max([1, *(len(models) for models in order.values())])
    with matplotlib.rc_context(RC):
        figure = _figure(3.6 * len(settings), max(2.2, 0.9 + 0.2 * most))
        axes = figure.subplots(1, len(settings), sharex=True, squeeze=False)[0]
        offsets = {m: (i - (len(metrics) - 1) / 2) * 0.18 for i, m in enumerate(metrics)}
        for ax, setting in zip(axes, settings, strict=True):
            models = order.get(setting, [])
            for j, metric in enumerate(metrics):
                part = rows[(rows["setting"] == setting) & (rows["metric"] == metric)]
                y = [models.index(m) + offsets[metric] for m in part["model"]]
                ax.errorbar(
                    part["value"],
                    y,
                    xerr=[part["value"] - part["low"], part["high"] - part["value"]],
                    fmt=METRIC_MARKERS.get(metric, "o"),
                    color=PALETTE[j % len(PALETTE)],
                    capsize=2,
                    markersize=4,
                    label=metric,
                )
                known = published[(published["setting"] == setting) & (published["metric"] == metric)]
                if len(known):
                    ax.scatter(
                        known["value"],
                        [models.index(m) + offsets[metric] for m in known["model"]],
                        marker="*",
                        s=60,
                        color=PALETTE[j % len(PALETTE)],
                        edgecolors="black",
                        linewidths=0.5,
                        label=f"{metric} (published)",
                    )
            ax.set_title(setting, loc="left")
            ax.set_yticks(range(len(models)), models)
            ax.set_ylim(most - 0.5, -0.5)  # rank 1 on top, one row height in every panel
            ax.set_xlim(-3, 103)  # a marker at 0 or 100 stays whole
            ax.set_xlabel("% (95% interval)")
            ax.grid(axis="x", alpha=0.3)
        labelled = [ax.get_legend_handles_labels() for ax in axes]
        unique = {label: handle for handles, labels in labelled for handle, label in zip(handles, labels, strict=True)}
        figure.legend(unique.values(), unique.keys(), loc="outside upper center", ncols=min(4, max(1, len(unique))))
    return to_svg(figure, prefix)


def grouped_bars(
    table: pd.DataFrame,
    panel: str,
    category: str,
    group: str,
    value: str,
    xlabel: str,
    prefix: str,
    count: str | None = None,
) -> str:
    """Horizontal grouped bars, one panel per value of ``panel``: ``category`` on the y axis, a bar per ``group``,
    each group its own colour (``series_styles``), the legend on top; ``count``: a column whose value (n) is written
    at the end of each bar."""
    panels = list(dict.fromkeys(table[panel]))
    categories = sorted(set(table[category]), key=lambda c: (c == "COMBINED", c))
    groups = list(dict.fromkeys(table[group]))  # in the order given
    styles = dict(zip(groups, series_styles(len(groups)), strict=True))
    height = max(1.0, len(categories) * (0.18 * len(groups) + 0.15))
    legend_rows = math.ceil(len(groups) / 4)
    with matplotlib.rc_context(RC):
        figure = _figure(3.4 * max(1, len(panels)), 1.2 + 0.2 * legend_rows + height)
        axes = figure.subplots(1, max(1, len(panels)), sharey=True, squeeze=False)[0]
        width = 0.8 / max(1, len(groups))
        top = max(100.0, math.ceil(float(table[value].max() if len(table) else 0) / 10) * 10)
        for ax, name in zip(axes, panels, strict=False):
            part = table[table[panel] == name]
            for j, member in enumerate(groups):
                bars = part[part[group] == member]
                y = [categories.index(c) - 0.4 + width * (j + 0.5) for c in bars[category]]
                colour, hatch = styles[member]
                ax.barh(y, bars[value], height=width, color=colour, hatch=hatch, edgecolor="white", label=member)
                if count is not None:
                    for at, length, n in zip(y, bars[value], bars[count], strict=True):
                        ax.text(max(0.0, float(length)) + top * 0.01, at, f"n={n}", va="center", fontsize=6)
            ax.set_title(str(name))
            ax.set_xlim(min(0.0, float(table[value].min() if len(table) else 0)), top * (1.12 if count else 1.0))
            ax.set_xlabel(xlabel)
            ax.grid(axis="x", alpha=0.3)
        axes[0].set_yticks(range(len(categories)), categories)
        axes[0].invert_yaxis()
        handles, labels = axes[0].get_legend_handles_labels()
        figure.legend(handles, labels, loc="outside upper center", ncols=min(4, max(1, len(labels))))
    return to_svg(figure, prefix)
