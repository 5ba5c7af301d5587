"""``egoeval report``: one self-contained HTML page of every benchmark's results, assembled from their parts.

Each registered benchmark (``egoeval.core.benchmarks``) writes its own part, a ``ReportPart`` of sections, style and
script: its DVC stage ``<name>_report`` (``stages/<name>/report.py``) keeps it as a fragment,
``reports/fragments/<name>.json``, with the title and place the page gives the benchmark; the ``report`` stage
(``stages/report.py``) assembles ``reports/index.html`` from the fragments present, in the registry's order, knowing
no benchmark. ``egoeval report`` renders the same page straight from the workspace. Everything the page needs is
inside it: CSS and a few lines of JavaScript inline, charts as inline SVG (matplotlib's SVG backend,
``egoeval.charts``), images as ``data:`` URIs. No network is needed to view it. The page is byte-identical for
identical inputs, whichever way it is rendered: its provenance section names the egoeval version and each
benchmark's pinned data, params digest and inputs' digests, never a time or a commit. ``egoeval report --stamp``
writes a copy that adds when and from which commit it was made (a copy to share; the pipeline's page stays
reproducible).
"""

from __future__ import annotations

import argparse
import contextlib
import html
import subprocess
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import egoeval
from egoeval.core.benchmarks import Benchmark, ReportPart, ReportSection, benchmark, registry
from egoeval.core.errors import InputError
from egoeval.core.io.atomic import atomic_write_text, write_json
from egoeval.core.io.bounded import read_json
from egoeval.core.io.commit import check_output
from egoeval.core.stage_shell import help_text, run_stage

if TYPE_CHECKING:
    from egoeval.core.settings import Params

OUT = Path("reports/index.html")
FRAGMENTS = Path("reports/fragments")  # <benchmark>.json: each benchmark's part of the page (its report stage)
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
p.smoke{background:#fff3cd;border:1px solid #d9a400;border-radius:4px;padding:.3rem .6rem}
.tag.smoke{background:#fff3cd}
table.provenance td{font-family:ui-monospace,monospace;font-size:.8rem;white-space:pre-wrap;word-break:break-all}
"""


@dataclass(frozen=True)
class Fragment:
    """A benchmark's part of the page, with what the page says of the benchmark: its title and its place (``order``,
    then ``benchmark``: the registry's order)."""

    benchmark: str
    title: str
    order: int
    part: ReportPart

    def to_json(self) -> dict[str, Any]:
        """As its fragment file holds it."""
        return {
            "benchmark": self.benchmark,
            "title": self.title,
            "order": self.order,
            "sections": [asdict(section) for section in self.part.sections],
            "style": self.part.style,
            "script": self.part.script,
            "provenance": self.part.provenance,
        }


def benchmark_fragment(bench: Benchmark, root: Path, settings: Params) -> Fragment:
    """``bench``'s part of the page for the workspace at ``root`` (``settings``: the validated params; the hook
    receives its own section): the one place a benchmark's ``report`` hook is called."""
    return Fragment(bench.name, bench.title, bench.order, bench.report(root, settings.section(bench)))


def fragment_path(name: str) -> Path:
    """Where benchmark ``name``'s report stage keeps its part of the page."""
    return FRAGMENTS / f"{name}.json"


def write_fragment(name: str) -> None:
    """Benchmark ``name``'s report stage: its part of the page for this workspace into
    ``reports/fragments/<name>.json``."""
    from egoeval.core.settings import load_settings  # pydantic: not for --help

    fragment = benchmark_fragment(benchmark(name), Path("."), load_settings(only=name))
    write_json(fragment_path(name), fragment.to_json())
    print(f"{name}_report: wrote {fragment_path(name)}")


_FRAGMENT_KEYS = {
    "benchmark": str,
    "title": str,
    "order": int,
    "sections": list,
    "style": str,
    "script": str,
    "provenance": dict,
}
_SECTION_KEYS = {"anchor": str, "label": str, "html": str}
_KINDS = {str: "a string", int: "an integer", list: "a list", dict: "an object"}


def _checked(path: Path, where: str, data: Any, keys: dict[str, type]) -> dict[str, Any]:
    """``data`` (at ``where`` in ``path``) as an object of exactly ``keys``, each of its type, else InputError."""
    if not isinstance(data, dict):
        raise InputError(path, f"{where}: not a JSON object")
    if set(data) != set(keys):
        missing, unknown = sorted(set(keys) - set(data)), sorted(set(data) - set(keys))
        raise InputError(path, f"{where}: keys missing {missing}, unknown {unknown} (expected {list(keys)})")
    for key, kind in keys.items():
        if not isinstance(data[key], kind) or isinstance(data[key], bool):
            raise InputError(path, f"{where}.{key}: not {_KINDS[kind]}")
    return data


def read_fragment(path: Path) -> Fragment:
    """A fragment file, checked key by key (InputError naming the file and key); its benchmark is its file's name."""
    data = _checked(path, "fragment", read_json(path), _FRAGMENT_KEYS)
    if data["benchmark"] != path.stem:
        raise InputError(path, f"fragment.benchmark: {data['benchmark']!r}, not the file's name {path.stem!r}")
    sections = [
        ReportSection(**_checked(path, f"fragment.sections[{i}]", section, _SECTION_KEYS))
        for i, section in enumerate(data["sections"])
    ]
    for label, text in data["provenance"].items():
        if not isinstance(text, str):
            raise InputError(path, f"fragment.provenance.{label}: not a string")
    part = ReportPart(sections, data["style"], data["script"], data["provenance"])
    return Fragment(data["benchmark"], data["title"], data["order"], part)


def read_fragments(folder: Path) -> list[Fragment]:
    """Every fragment in ``folder`` (``<benchmark>.json``), in the registry's order (``order``, then name)."""
    if not folder.is_dir():
        raise InputError(folder, "folder not found (run the benchmarks' report stages before this one)")
    found = [read_fragment(path) for path in sorted(folder.glob("*.json")) if not path.name.startswith(".")]
    if not found:
        raise InputError(folder, "no fragment <benchmark>.json in it (run the benchmarks' report stages first)")
    return sorted(found, key=lambda fragment: (fragment.order, fragment.benchmark))


def _listed(names: list[str]) -> str:
    """``A``, ``A and B``, ``A, B and C``."""
    return " and ".join(filter(None, [", ".join(names[:-1]), *names[-1:]]))


PROVENANCE = "provenance"  # the page's last section: what it was made from


def provenance_section(parts: list[ReportPart], stamp: str | None = None) -> str:
    """What the page was made from: the egoeval version and every benchmark's provenance rows (deterministic), and
    ``stamp`` (when and from which commit: ``run_stamp``) only where given."""
    rows = [("egoeval", f"version {egoeval.__version__}")]
    rows += [(label, text) for part in parts for label, text in part.provenance.items()]
    if stamp is None:
        made = (
            "It holds no time and no commit, so <code>dvc repro</code> and <code>egoeval audit</code> reproduce it "
            "byte for byte; the commit that made it is the one whose <code>dvc.lock</code> pins its md5. "
            "<code>egoeval report --stamp</code> writes a copy that says when and from which commit it was made."
        )
    else:
        rows.append(("made", stamp))
        made = "The <i>made</i> row is this copy's stamp (<code>egoeval report --stamp</code>); the rest reproduces."
    return (
        f'<section id="{PROVENANCE}"><h2>Provenance</h2><p>What this page was made from: the pinned data, the params '
        f"(sha256 of each benchmark's params section as validated) and the files its numbers come from. "
        f'{made}</p><table class="{PROVENANCE}"><thead><tr><th>of</th><th>pinned as</th></tr></thead><tbody>'
        + "".join(f"<tr><td>{html.escape(label)}</td><td>{html.escape(text)}</td></tr>" for label, text in rows)
        + "</tbody></table></section>"
    )


def run_stamp(root: Path) -> str:
    """When (UTC, to the second) and from which commit of the git checkout at ``root`` (with uncommitted changes
    said) a page is made now; ``not a git checkout`` where git cannot say."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

    def git(*args: str) -> str | None:
        try:
            run = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return run.stdout.strip() if run.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return f"{now}, not a git checkout"
    changed = git("status", "--porcelain", "--untracked-files=no")
    return f"{now}, commit {commit}" + (" with uncommitted changes" if changed else "")


def assemble_page(fragments: list[Fragment], stamp: str | None = None) -> str:
    """The whole page from the benchmarks' parts, in the order given, its provenance last (``stamp``: see
    ``provenance_section``)."""
    parts = [fragment.part for fragment in fragments]
    sections = [section for part in parts for section in part.sections]
    sections.append(ReportSection(PROVENANCE, PROVENANCE, provenance_section(parts, stamp)))
    nav = "".join(f'<a href="#{section.anchor}">{section.label}</a>' for section in sections)
    titles = _listed([fragment.title for fragment in fragments])
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


def build_page(root: Path, settings: Params, stamp: str | None = None) -> str:
    """The whole page for the workspace at ``root`` (``settings``: the validated params), every registered
    benchmark's part rendered now (``stamp``: see ``provenance_section``)."""
    return assemble_page([benchmark_fragment(bench, root, settings) for bench in registry().values()], stamp)


def write_page() -> None:
    """The ``report`` stage: ``reports/index.html`` from the fragments in ``reports/fragments``."""
    page = assemble_page(read_fragments(FRAGMENTS))
    atomic_write_text(OUT, page)
    print(f"report: wrote {OUT} ({len(page.encode()) / 1e6:.1f} MB)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="egoeval report", description=help_text(__doc__.splitlines()[0]))
    parser.add_argument("--out", type=Path, help=f"the HTML file to write (default {OUT} in the project)")
    parser.add_argument(
        "--stamp",
        action="store_true",
        help="add when and from which git commit the page is made (a copy to share: it no longer reproduces byte "
        "for byte; write it beside the pipeline's page with --out)",
    )
    args = parser.parse_args(argv)
    from egoeval.core.io.paths import project_root

    root = project_root()  # the project's files, from a subfolder too (found as DVC finds it)
    out = args.out.absolute() if args.out else OUT  # a path given: from where the user stands
    if args.stamp and (args.out is None or out.resolve() == (root / OUT).resolve()):
        parser.error(f"--stamp writes a copy to share: give --out another file than {OUT} (the pipeline's page)")

    def body() -> None:
        from egoeval.core.settings import load_settings  # pydantic: not for --help

        check_output(out, own=[OUT.as_posix()])  # never over the metrics or any other tracked file
        page = build_page(Path("."), load_settings(), run_stamp(Path(".")) if args.stamp else None)
        atomic_write_text(out, page)
        print(f"report: wrote {args.out or OUT} ({len(page.encode()) / 1e6:.1f} MB)")

    with contextlib.chdir(root):
        return run_stage(body)


if __name__ == "__main__":
    raise SystemExit(main())
