"""Settings typed to the leaf (issue 29, item 2): each benchmark hook receives its own section, library code reads
no params file, allowed names come from one generic registry type, defaults are declared once, and the model client
owns its pacing (``concurrency``)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from conftest import REPO

from egoeval import compare
from egoeval.backends import BACKENDS, Backend, ChatRequest, Decoding, Message, ModelEntry, Reply, make_backend
from egoeval.backends.client import ModelClient
from egoeval.cache import ResponseCache
from egoeval.core.benchmarks import BENCHMARKS, Benchmark, ScaleOut, registry
from egoeval.core.errors import ParamsError, UnknownName
from egoeval.core.registry import Registry
from egoeval.core.settings import Params, Section, _root_model, load_settings, validate_params
from egoeval.egonormia.settings import EvaluatedModel, ModelSpec

REPO_PARAMS = yaml.safe_load((REPO / "params.yaml").read_text())


# ------------------------------------------------------------------------------------ no params file in the library


def test_only_the_settings_loader_and_the_stage_shell_name_the_params_file() -> None:
    """The issue's acceptance, as it states it: `grep -r "params.yaml\\|PARAMS_FILE" egoeval/`."""
    found = subprocess.run(
        ["grep", "-rl", "--exclude-dir=__pycache__", r"params.yaml\|PARAMS_FILE", "egoeval/"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    assert found, "grep found nothing: the settings loader names the file"
    outside = [path for path in found if path not in ("egoeval/core/settings.py", "egoeval/core/stage_shell.py")]
    assert outside == []


# ------------------------------------------------------------------------------------------ one registry type


def test_a_registry_names_the_unknown_key_and_the_known_ones() -> None:
    widgets: Registry[int] = Registry("widget")
    widgets.register("a", 1)
    widgets.register_lazy("b", "json:JSONDecodeError")
    assert widgets.names() == ("a", "b") and "b" in widgets and widgets.get("a") == 1
    assert widgets.get("b") is json.JSONDecodeError
    with pytest.raises(UnknownName, match=r"^unknown widget 'c' \(known: a, b\)$") as caught:
        widgets.get("c")
    assert isinstance(caught.value, ValueError) and caught.value.known == ("a", "b")


def test_reading_the_allowed_names_imports_no_protocol_or_backend() -> None:
    """The settings validate names against registries whose names are read without importing what they name."""
    code = (
        "import sys; from egoeval.egonormia.settings import PROTOCOLS; from egoeval.backends import BACKENDS; "
        "from egoeval.egohumans.evaluators import EVALUATORS; "
        "print(PROTOCOLS.names(), BACKENDS.names(), EVALUATORS.names(), "
        "[m for m in sys.modules if m.startswith(('egoeval.egonormia.protocols', 'egoeval.backends.openai', "
        "'egoeval.egohumans.evaluators.', 'httpx'))])"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == (
        "('egoeval', 'official') ('openai', 'openai_batch', 'random', 'minilm') ('official', 'trackeval') []"
    )


class ToyBackend(Backend):
    name: ClassVar[str] = "toy"
    supports_images: ClassVar[bool] = False

    @classmethod
    def from_spec(cls, spec: ModelEntry) -> ToyBackend:
        return cls(spec.name)

    def complete(self, request: ChatRequest) -> Reply:
        return Reply("Answer: 1")


def with_baseline(backend: str) -> dict[str, Any]:
    return {**REPO_PARAMS, "egonormia": {**REPO_PARAMS["egonormia"], "baselines": [{"backend": backend, "name": "x"}]}}


def test_registering_a_backend_makes_its_name_valid_without_editing_the_settings() -> None:
    with pytest.raises(ParamsError, match=r"baselines\[0\].backend = 'toy': unknown backend 'toy' \(known: openai,"):
        validate_params(with_baseline("toy"))
    BACKENDS.register("toy", ToyBackend)
    try:
        params = validate_params(with_baseline("toy"))
        (baseline,) = params.egonormia.baselines
        assert isinstance(make_backend(baseline), ToyBackend)
        assert "toy" in ModelSpec.model_json_schema()["properties"]["backend"]["enum"]
    finally:
        BACKENDS.unregister("toy")
    with pytest.raises(ParamsError, match="unknown backend 'toy'"):
        validate_params(with_baseline("toy"))


def test_the_schema_enums_are_the_registries_names() -> None:
    schema = _root_model().model_json_schema()
    model = schema["$defs"]["ModelSpec"]["properties"]["backend"]
    assert model["enum"] == list(BACKENDS.names())
    assert schema["$defs"]["EgoNormiaSettings"]["properties"]["protocol"]["enum"] == ["egoeval", "official"]


# ------------------------------------------------------------------------------------------- defaults declared once


def test_the_evaluated_model_is_a_model_entry_with_every_key_written() -> None:
    """EvaluatedModel is derived from ModelSpec: the same fields, bounds and validators, none defaulted but price."""
    entry, evaluated = ModelSpec.model_json_schema(), EvaluatedModel.model_json_schema()
    assert list(evaluated["properties"]) == list(entry["properties"])
    for name, field in entry["properties"].items():
        kept = field if name == "price" else {k: v for k, v in field.items() if k != "default"}
        assert evaluated["properties"][name] == kept, name
    assert sorted(evaluated["required"]) == sorted(set(entry["properties"]) - {"price"})
    with pytest.raises(ValueError, match=r"retry_base_s .* must not exceed retry_max_s"):
        EvaluatedModel.model_validate({**REPO_PARAMS["egonormia"]["model"], "retry_base_s": 9, "retry_max_s": 1})


def test_the_client_and_the_decoding_declare_no_defaults_of_their_own() -> None:
    """A client built from a bare model entry paces and retries as the settings model's defaults say."""
    spec = ModelSpec(backend="random", name="r")
    with ResponseCache(":memory:") as cache:
        client = ModelClient.from_spec(spec, cache)
    assert (client.concurrency, client.max_retries, client.base_delay, client.max_delay) == (
        spec.concurrency,
        spec.max_retries,
        spec.retry_base_s,
        spec.retry_max_s,
    )
    assert Decoding.from_spec(spec) == Decoding(spec.temperature, spec.max_tokens)
    for needs_settings in (lambda: ModelClient(ToyBackend("t"), cache), lambda: Decoding()):  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="missing"):
            needs_settings()


# ------------------------------------------------------------------------------------ pacing belongs to the client


class SlowBackend(Backend):
    """Answers after a short wait, counting the calls in flight."""

    name: ClassVar[str] = "slow"
    supports_images: ClassVar[bool] = False

    def __init__(self, model: str) -> None:
        super().__init__(model)
        self.lock = threading.Lock()
        self.in_flight = self.peak = 0

    @classmethod
    def from_spec(cls, spec: ModelEntry) -> SlowBackend:
        return cls(spec.name)

    def complete(self, request: ChatRequest) -> Reply:
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        time.sleep(0.05)
        with self.lock:
            self.in_flight -= 1
        return Reply("Answer: 1")


def test_the_client_paces_by_its_own_concurrency(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    BACKENDS.register("slow", SlowBackend)
    try:
        spec = ModelSpec(backend="slow", name="paced", concurrency=2)
        with ResponseCache(tmp_path / "c.sqlite") as cache:
            client = ModelClient.from_spec(spec, cache)
            requests = [ChatRequest((Message.text("user", f"q{i}"),), Decoding(0.0, 8)) for i in range(12)]
            with ThreadPoolExecutor(8) as pool:
                done = list(pool.map(client.complete, requests))
    finally:
        BACKENDS.unregister("slow")
    assert all(c.error == "" for c in done)
    assert client.concurrency == client.limiter.max_limit == 2 and not hasattr(client.backend, "concurrency")
    assert isinstance(client.backend, SlowBackend) and client.backend.peak == 2  # the client's limit, never more


# ------------------------------------------------------------------------------- hooks receive their own section


class ProbeSettings(Section):
    label: str


class ProbeForm(ScaleOut):
    def __init__(self, settings: ProbeSettings) -> None:
        self.settings = settings


class Probe(Benchmark[ProbeSettings]):
    """A benchmark that records the settings each hook receives."""

    name = "probe"
    title = "Probe"
    order = 99
    seen: ClassVar[list[Any]] = []

    def settings_model(self) -> type[ProbeSettings]:
        return ProbeSettings

    def compare(self, metrics: Any, settings: ProbeSettings, args: Any) -> str:
        self.seen.append(settings)
        return f"compared under {settings.label}"

    def response_cache_dir(self, settings: ProbeSettings) -> str | None:
        self.seen.append(settings)
        return None

    def scale_out(self, form: str, settings: ProbeSettings) -> ScaleOut | None:
        self.seen.append(settings)
        return ProbeForm(settings)


@pytest.fixture
def probe(tmp_path: Path) -> Iterator[Path]:
    """The probe benchmark registered, with its section in a params file (returned)."""
    BENCHMARKS.register("probe", Probe())
    registry.cache_clear()
    _root_model.cache_clear()
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({**REPO_PARAMS, "probe": {"label": "probe's own"}}))
    Probe.seen.clear()
    try:
        yield params
    finally:
        BENCHMARKS.unregister("probe")
        registry.cache_clear()
        _root_model.cache_clear()


def test_each_hook_receives_its_own_section_only(probe: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from egoeval.audit import gather_answers
    from egoeval.core.benchmarks import Findings
    from flows.shard import sharded_form

    root = probe.parent
    settings = load_settings(probe)
    assert isinstance(settings, Params) and settings.section(BENCHMARKS.get("probe")) == ProbeSettings(
        label="probe's own"
    )
    metrics = root / "probe.json"
    metrics.write_text(json.dumps({"all": {"accuracy": 50.0}}))
    assert compare.main([str(metrics), "--params", str(probe)]) == 0
    assert capsys.readouterr().out == "compared under probe's own\n"
    gather_answers(root, settings, root / "objects", root / "answers", Findings())
    form = sharded_form("probe", "any", settings)
    assert isinstance(form, ProbeForm)
    assert Probe.seen and all(type(seen) is ProbeSettings for seen in Probe.seen)
    assert len(Probe.seen) == 3 and not any(hasattr(seen, "egonormia") for seen in Probe.seen)
