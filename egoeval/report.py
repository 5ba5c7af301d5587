"""``egoeval report``: one self-contained HTML page of every benchmark's results (also the DVC stage ``report``).

The page is the shell; each registered benchmark (``egoeval.benchmarks``) writes its own sections, in registry order.
Everything the page needs is inside it: CSS and a few lines of JavaScript inline, charts as inline SVG (matplotlib's
SVG backend, ``egoeval.charts``), images as ``data:`` URIs. No network is needed to view it. The page is
byte-identical for identical inputs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from egoeval.benchmarks import registry
from egoeval.io import atomic_write_text, check_output
from egoeval.stage import help_text, run_stage

if TYPE_CHECKING:
    from egoeval.settings import Params

OUT = Path("reports/index.html")
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
h4.apart{font-weight:normal;color:#8a5a00;margin:1rem 0 .2rem}
table.published{color:#444;background:#fafafa}
svg.chart{max-width:100%;height:auto}
"""


def _listed(names: list[str]) -> str:
    """``A``, ``A and B``, ``A, B and C``."""
    return " and ".join(filter(None, [", ".join(names[:-1]), *names[-1:]]))


def build_page(root: Path, settings: Params) -> str:
    """The whole page for the workspace at ``root`` (``settings``: the validated params; each benchmark's report
    receives its own section)."""
    benchmarks = list(registry().values())
    parts = [benchmark.report(root, settings.section(benchmark)) for benchmark in benchmarks]
    sections = [section for part in parts for section in part.sections]
    nav = "".join(f'<a href="#{section.anchor}">{section.label}</a>' for section in sections)
    titles = _listed([benchmark.title for benchmark in benchmarks])
    style = STYLE + "".join(part.style for part in parts)
    script = "".join(part.script for part in parts)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>egoeval report: {titles}</title>"
        f"<style>{style}</style></head><body><nav><b>egoeval</b> · {nav}</nav><h1>egoeval report</h1>"
        f"<p>{titles} results of this workspace's DVC pipeline (<code>egoeval report</code>). "
        "Self-contained: no network needed.</p>"
        f"{''.join(section.html for section in sections)}<script>{script}</script></body></html>\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="egoeval report", description=help_text(__doc__.splitlines()[0]))
    parser.add_argument("--out", type=Path, default=OUT, help=f"the HTML file to write (default {OUT})")
    args = parser.parse_args(argv)

    def body() -> None:
        from egoeval.settings import load_settings  # pydantic: not for --help

        check_output(args.out, own=[OUT.as_posix()])  # never over the metrics or any other tracked file
        page = build_page(Path("."), load_settings())
        atomic_write_text(args.out, page)
        print(f"report: wrote {args.out} ({len(page.encode()) / 1e6:.1f} MB)")

    return run_stage(body)


if __name__ == "__main__":
    raise SystemExit(main())
