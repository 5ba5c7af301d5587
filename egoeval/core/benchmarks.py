"""The benchmark registry: every package ``egoeval/<name>/`` whose ``benchmark.py`` defines ``BENCHMARK``.

Nothing here names a benchmark. The settings root (``egoeval.core.settings``), the report page, ``egoeval compare``, the
audit and the sharded flows iterate :func:`registry`; a new benchmark is a new package with a ``benchmark.py`` (plus
its stages in dvc.yaml and its section of the params), and no shared module changes. A stage of one benchmark
imports that benchmark only (:func:`benchmark`), so adding a benchmark re-runs none of the others' stages.
"""

from __future__ import annotations

import argparse
import hashlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from egoeval.core.registry import Registry

if TYPE_CHECKING:
    import pandas as pd
    from pydantic import BaseModel

S = TypeVar("S", bound="BaseModel")  # its settings section: an egoeval.core.settings.Section


MAX_LISTED = 20  # differences an audit lists one by one before it counts the rest


@dataclass
class Findings:
    """What an audit saw, line by line (``ok``, ``note``, ``DIFF``; a benchmark's ``audit_compare`` adds its own):
    any ``differ`` makes the report not reproduce, any ``miss`` leaves it undecided."""

    lines: list[str] = field(default_factory=list)
    differences: int = 0
    missing: int = 0  # pinned outputs the audit needs that are not here (not pulled): it cannot decide

    def section(self, title: str) -> None:
        self.lines.append(f"\n{title}")

    def miss(self, text: str) -> None:
        """A pinned output the audit needs is neither in the workspace nor in the DVC cache."""
        self.lines.append(f"  MISSING  {text}")
        self.missing += 1

    def ok(self, text: str) -> None:
        self.lines.append(f"  ok    {text}")

    def note(self, text: str) -> None:
        self.lines.append(f"  note  {text}")

    def differ(self, text: str) -> None:
        self.lines.append(f"  DIFF  {text}")
        self.differences += 1

    def listed(self, texts: list[str], what: str) -> None:
        """``differ`` for the first MAX_LISTED texts, then one line counting the rest."""
        for text in texts[:MAX_LISTED]:
            self.differ(text)
        if len(texts) > MAX_LISTED:
            self.differ(f"... and {len(texts) - MAX_LISTED} more {what}")


@dataclass(frozen=True)
class ReportSection:
    """One section of the report page: its anchor, its entry in the page's navigation, its HTML."""

    anchor: str
    label: str
    html: str


@dataclass(frozen=True)
class ReportPart:
    """A benchmark's part of the report page: its sections in page order, the CSS and script they need, and its
    provenance (label -> plain text, a line each: the pinned data, the params digest, the inputs' digests; nothing
    that changes from run to run, so the page stays byte-identical for identical inputs)."""

    sections: list[ReportSection]
    style: str = ""
    script: str = ""
    provenance: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class AnswerOutput:
    """A pipeline output that records model answers with their request keys (``request_key`` beside ``column``):
    what an audit replays into a response cache so that a clone without the cache re-derives with no model call."""

    path: str
    column: str


class Benchmark(Generic[S]):
    """What the shared front-ends need of a benchmark, generic in its settings section ``S``. Subclasses set the
    class attributes and override the hooks they have; every hook imports its benchmark's modules itself, so reading
    the registry stays cheap. A hook that needs settings receives its own section (the caller passes
    ``params.section(benchmark)``, ``egoeval.core.settings.Params``), never the root."""

    name: ClassVar[str]  # its section of the params and dvc.yaml's ``meta.benchmark``
    title: ClassVar[str]  # as a reader knows it, e.g. "EgoNormia"
    order: ClassVar[int] = 100  # its place on the report page and in listings (then by name)
    commands: ClassVar[dict[str, tuple[str, str, str]]] = {}  # its egoeval subcommands: (module, function, help)

    def settings_model(self) -> type[S]:
        """The pydantic model of its section of the params."""
        raise NotImplementedError

    def report(self, root: Path, settings: S) -> ReportPart:
        """Its part of the report page for the workspace at ``root`` (``settings``: its validated section)."""
        return ReportPart([])

    def add_compare_arguments(self, parser: argparse.ArgumentParser) -> None:
        """The options ``egoeval compare`` takes for this benchmark's metrics."""

    def compare(self, metrics: Any, settings: S, args: argparse.Namespace) -> str:
        """``egoeval compare``: our numbers beside the published ones, as text."""
        return f"no published numbers are bundled for {self.title}"

    def check_metrics(self, metrics: Any, path: Path) -> None:
        """Raise InputError naming ``path`` and the key where its metrics file (already checked value by value:
        ``egoeval.reported.read_metrics``) is not of the shape its readers need."""

    def answer_outputs(self) -> list[AnswerOutput]:
        """Its outputs that record model answers with their request keys (the audit replays them)."""
        return []

    def response_cache_dir(self, settings: S) -> str | None:
        """Where its stages keep the durable response cache (its section's), or None when it calls no model."""
        return None

    def explain_output(self, path: str, pinned: Path, derived: Path) -> list[str]:
        """Why a re-derived output differs from the pinned one, one line per difference (``[]``: nothing to add)."""
        return []

    def audit_report_kind(self, path: Path, data: Any) -> str | None:
        """The kind of a report of its own other than a metrics file (``data``: the parsed JSON; None for a
        folder), or None when it is not one."""
        return None

    def audit_outputs(self, kind: str, path: Path) -> list[str] | None:
        """The outputs (paths relative to the root) a report of its own ``kind`` is compared with: the audit re-runs
        the stages that write them; None: its metrics files."""
        return None

    def audit_compare(
        self, kind: str, path: Path, data: Any, work: Path, settings: S, tolerance: float, findings: Findings
    ) -> None:
        """A report of ``kind`` against the numbers re-derived in ``work`` (``settings``: its section there): what
        differs goes into ``findings``."""

    def scale_out(self, form: str, settings: S) -> ScaleOut | None:
        """The sharded form of one of its stages (dvc.yaml's ``meta.scale_out.form``) under ``settings`` (its
        section of the workspace that runs it), or None."""
        return None


class ScaleOut:
    """A stage that runs in shards (dvc.yaml ``meta.scale_out``; flows/shard.py runs it on a Dask cluster).

    ``plan`` reads the stage's inputs under ``root`` and splits its work (each shard picklable, with absolute paths:
    a worker may run anywhere on a shared filesystem), ``run`` does one shard, ``merge`` writes the stage's output
    from the shards' tables, byte-identical to the single-process stage. ``options``: the meta's other keys.
    """

    def plan(self, root: Path, shards: int, **options: Any) -> list[Any]:
        raise NotImplementedError

    def run(self, shard: Any) -> pd.DataFrame:
        raise NotImplementedError

    def merge(self, root: Path, parts: list[pd.DataFrame], **options: Any) -> Path:
        raise NotImplementedError


def shard_of(key: str, shards: int) -> int:
    """A stable shard number for a key (the same on every machine and Python process)."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") % shards


def budget_share(budget: int, shard: int, shards: int) -> int:
    """Shard ``shard``'s part of a budget split over ``shards`` (the parts add up to ``budget``, differ by at most
    one; a shard beyond the budget gets 0)."""
    return budget // shards + (shard < budget % shards)


def _benchmark_packages() -> dict[str, Callable[[], Benchmark[Any]]]:
    """The benchmark packages (a package's name is its benchmark's), found without importing them: each loads its
    ``benchmark.py``'s ``BENCHMARK`` only (a stage of one benchmark loads no other's code)."""
    import egoeval

    found = sorted(
        module.name
        for module in pkgutil.iter_modules(egoeval.__path__)
        if module.ispkg and (Path(module.module_finder.path) / module.name / "benchmark.py").is_file()  # type: ignore[union-attr]
    )
    return {name: Registry.module_loader(f"egoeval.{name}.benchmark", "BENCHMARK", name) for name in found}


BENCHMARKS: Registry[Benchmark[Any]] = Registry("benchmark", _benchmark_packages)
"""Every benchmark by name (``egoeval/<name>/benchmark.py``'s ``BENCHMARK``)."""


def benchmark_names() -> tuple[str, ...]:
    """The names of the benchmark packages, found without importing them."""
    return BENCHMARKS.names()


def benchmark(name: str) -> Benchmark[Any]:
    """The benchmark of that name (UnknownName naming the known ones)."""
    return BENCHMARKS.get(name)


@cache
def registry() -> dict[str, Benchmark[Any]]:
    """Every benchmark, by name, in report order."""
    found = [benchmark(name) for name in benchmark_names()]
    return {b.name: b for b in sorted(found, key=lambda b: (b.order, b.name))}
