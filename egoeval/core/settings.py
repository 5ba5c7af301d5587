"""Typed, validated params.yaml: one pydantic model per section, checked whole before any stage does work.

Every key must be present in params.yaml (DVC tracks params.yaml, so no value hides in code), unknown keys are
errors with the closest known key suggested, and every error names the dotted key, the value and what is allowed.
Each benchmark's section is its package's ``settings.py``, mounted under its name (``egoeval.core.benchmarks``);
this module holds the machinery, the ``flows`` section and the root.
"""

from __future__ import annotations

import difflib
import os
import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar
from zoneinfo import available_timezones

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator

from egoeval.core.errors import ParamsError
from egoeval.core.registry import Registry

if TYPE_CHECKING:
    from egoeval.core.benchmarks import Benchmark


PARAMS_FILE = Path("params.yaml")
"""The params file every stage validates first and reads its settings from (``load_settings``)."""


def _fraction(value: float) -> float:
    if not 0 <= value <= 1:
        hint = f"; {value:g} looks like a percent: write {value / 100:g}" if 2 <= value <= 100 else ""
        raise ValueError(f"must be a fraction between 0 and 1{hint}")
    return value


Fraction = Annotated[float, AfterValidator(_fraction), Field(json_schema_extra={"minimum": 0, "maximum": 1})]
"""A share in [0, 1]; a value in [2, 100] is reported as a percent written by mistake."""
Seed = Annotated[int, Field(ge=0, le=2**32 - 1)]
"""A random seed: NumPy's range (``np.random.default_rng`` and ``RandomState`` take any of these)."""
MAX_SECONDS = 7 * 86_400
"""The longest wait or deadline any param may set: a week (the Batch API's completion window is a day)."""
Seconds = Annotated[float, Field(gt=0, le=MAX_SECONDS)]
NonEmptyStr = Annotated[str, Field(min_length=1)]


def registered(registry: Registry[Any]) -> Any:
    """A string field whose allowed values are ``registry``'s names at validation time (its JSON schema ``enum``
    too): registering a thing makes its name valid, and no list of names is written twice."""

    def enum(schema: dict[str, Any]) -> None:
        schema["enum"] = list(registry.names())

    return Annotated[str, AfterValidator(registry.check), Field(json_schema_extra=enum)]


def unique_list(values: list[Any]) -> list[Any]:
    """A list validator: no value twice."""
    seen = [v for i, v in enumerate(values) if v in values[:i]]
    if seen:
        raise ValueError(f"lists {seen[0]!r} twice")
    return values


class Section(BaseModel):
    """A params.yaml section: strict types, no unknown keys, read-only."""

    # every number is finite: an infinite or NaN param is refused by name in check-params (each numeric field also
    # states both its bounds; tests/test_settings_bounds.py holds every field of every section to that)
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


class BootstrapSettings(Section):
    """A benchmark's bootstrap: resamples drawn from a seed, intervals at a confidence level (egoeval.significance)."""

    bootstrap_samples: Annotated[int, Field(ge=10, le=100_000)]
    bootstrap_seed: Seed
    confidence: Fraction

    @field_validator("confidence")
    @classmethod
    def _open_interval(cls, value: float) -> float:
        if not 0 < value < 1:
            raise ValueError("must lie strictly between 0 and 1 (e.g. 0.95)")
        return value


_CRON_FIELD = re.compile(r"^[\d*/,\-A-Za-z?LW#]+$")


class FlowsSettings(Section):
    """``flows``: the nightly Prefect run."""

    schedule_cron: NonEmptyStr
    timezone: NonEmptyStr
    baseline: NonEmptyStr
    tolerance: Annotated[float, Field(ge=0, le=100)]  # points (metrics are percents); a huge one passes every metric
    gate: list[NonEmptyStr] | None  # the metrics (last key) the regression rule checks; null: every metric
    retries: Annotated[int, Field(ge=0, le=100)]
    retry_backoff_s: Annotated[float, Field(ge=0, le=3600)]  # doubles each retry
    dask_address: str | None
    dask_workers: Annotated[int, Field(ge=1, le=1024)]

    @field_validator("schedule_cron")
    @classmethod
    def _cron(cls, value: str) -> str:
        fields = value.split()
        if len(fields) != 5 or not all(_CRON_FIELD.match(f) for f in fields):
            raise ValueError("must be a 5-field cron expression such as '0 2 * * *'")
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        if value not in available_timezones():
            raise ValueError("must be an IANA time zone such as 'UTC' or 'Europe/Berlin'")
        return value


SectionT = TypeVar("SectionT", bound=Section)


class Params(Section):
    """The validated params: ``flows`` and every benchmark's section under its name (mounted at run time from the
    benchmark registry: ``section`` gives one, typed by its benchmark)."""

    if TYPE_CHECKING:  # a field of the model built at run time (``_root_model``), after the benchmarks' sections
        flows: FlowsSettings

    def section(self, benchmark: Benchmark[SectionT]) -> SectionT:
        """``benchmark``'s section (the one place a benchmark's settings are taken from the root: every hook receives
        its own section only)."""
        return self.named_section(benchmark.name, benchmark.settings_model())

    def named_section(self, name: str, model: type[SectionT]) -> SectionT:
        """The section ``name``, of settings model ``model``."""
        found = getattr(self, name)
        if not isinstance(found, model):
            raise TypeError(f"the {name} section is not a validated {model.__name__} (loaded with only= another)")
        return found


@cache
def _root_model(only: str | None = None) -> type[Params]:
    """The params: every benchmark's section under its name, and ``flows``. With ``only``, that benchmark's section
    is validated and the other benchmarks' sections are only required to be there (the params stage checks them)."""
    from egoeval.core.benchmarks import benchmark, benchmark_names

    sections: dict[str, Any] = {
        name: (benchmark(name).settings_model(), ...) if only in (None, name) else (dict[str, Any], ...)
        for name in benchmark_names()
    }
    return create_model("Params", __base__=Params, **sections, flows=(FlowsSettings, ...))


def _suggestion(model: type[BaseModel] | None, key: str) -> str:
    if model is None:
        return ""
    close = difflib.get_close_matches(key, list(model.model_fields), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _model_at(root: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model that holds the field at ``loc`` (for did-you-mean suggestions)."""
    model: Any = root
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return None
        annotation = field.annotation
        args = getattr(annotation, "__args__", ()) or ()
        candidates = [annotation, *args]
        model = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if model is None:
            return None
    return model if isinstance(model, type) else None


_TYPE_MESSAGES = {
    "int_type": "must be an integer",
    "float_type": "must be a number",
    "finite_number": "must be a finite number (no .inf or .nan)",
    "bool_type": "must be true or false",
    "string_type": "must be a string",
    "list_type": "must be a list, e.g. [a, b]",
    "model_type": "must be a mapping of keys",
    "dict_type": "must be a mapping of keys",
}


def _describe(error: dict[str, Any], root: type[BaseModel]) -> str:
    loc = tuple(part for part in error["loc"] if not (isinstance(part, str) and part.startswith("function-")))
    dotted = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"{dotted}: unknown key{_suggestion(_model_at(root, loc), str(loc[-1]))}"
    if kind == "missing":
        return f"{dotted}: missing (every key is written in params.yaml)"
    message = _TYPE_MESSAGES.get(kind) or str(error["msg"]).removeprefix("Value error, ")
    message = message.replace("Input should be", "must be")
    value = error.get("input")
    return f"{dotted}: {message}" if isinstance(value, dict) else f"{dotted} = {value!r}: {message}"


def validate_params(raw: Any, source: str | os.PathLike[str] = PARAMS_FILE, only: str | None = None) -> Params:
    """Validate a params mapping (``only``: that benchmark's section and ``flows``); raise ParamsError listing every
    problem (dotted key, value, what is allowed)."""
    root = _root_model(only)
    if not isinstance(raw, dict):
        raise ParamsError(source, f"must be a mapping with sections {', '.join(root.model_fields)}")
    try:
        params = root.model_validate(raw)
    except ValidationError as error:
        lines = sorted({_describe(e, root) for e in error.errors(include_url=False)})
        raise ParamsError(source, "invalid params:\n  " + "\n  ".join(lines)) from None
    return params


_loaded: dict[tuple[str, int, int, str | None], Params] = {}


def load_settings(path: str | os.PathLike[str] = PARAMS_FILE, only: str | None = None) -> Params:
    """The params file, validated whole (cached per file version). With ``only`` (a benchmark's name) that
    benchmark's section is validated and typed, and no other benchmark's code is imported."""
    path = Path(path)
    try:
        stat = path.stat()
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ParamsError(path, f"cannot read: {error.strerror or error}") from None
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size, only)
    if key not in _loaded:
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise ParamsError(path, f"not valid YAML: {error}") from None
        if any(k[:3] != key[:3] for k in _loaded):
            _loaded.clear()
        _loaded[key] = validate_params(raw, path, only)
    return _loaded[key]


def params_file(root: str | os.PathLike[str] = ".") -> Path:
    """The params file of the workspace at ``root`` (relative when ``root`` is the current folder)."""
    return PARAMS_FILE if Path(root) == Path(".") else Path(root) / PARAMS_FILE


def workspace_settings(root: str | os.PathLike[str]) -> Params:
    """The params of the workspace at ``root`` (a command that works on another workspace: the audit, a sharded
    stage), validated whole."""
    return load_settings(params_file(root))


def benchmark_settings(name: str, model: type[SectionT], path: str | os.PathLike[str] = PARAMS_FILE) -> SectionT:
    """Benchmark ``name``'s section of the params, of its settings model ``model`` (what its stages read and pass
    down; a stage imports its benchmark's settings module, not its ``benchmark.py``, whose hooks import the rest)."""
    return load_settings(path, only=name).named_section(name, model)
