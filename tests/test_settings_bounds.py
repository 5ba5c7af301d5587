"""Every numeric param has a stated bound, enforced once, in check-params (issue 28 item 8).

The fields come from the settings models themselves (their JSON schema: ``minimum``/``maximum``, exclusive or not),
every benchmark's section and ``flows``, and each tracker YAML's numbers beyond the shared keys
(``egoeval.egohumans.settings.extra_range``). A field without both bounds fails here; every bound is tried just
beyond it, and every number as .inf and .nan, through ``egoeval check-params`` on a crafted params.yaml: exit 2,
the dotted key named.
"""

from __future__ import annotations

import copy
import math
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import EGOEVAL, REPO, tool_env

from egoeval.cli import main as egoeval_main
from egoeval.core.settings import _root_model
from egoeval.egohumans.settings import TrackerConfig, extra_range, packaged_trackers

BASE = yaml.safe_load((REPO / "params.yaml").read_text())
Path_ = tuple[str | int, ...]


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = {**defs[node["$ref"].rsplit("/", 1)[1]], **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def numeric_fields(node: dict[str, Any], data: Any, path: Path_, defs: dict[str, Any]) -> Iterator[tuple]:
    """(path, integer?, schema) of every number the schema holds, walked beside the params it validates (a list's or
    mapping's entries as params.yaml writes them; an optional section, such as a price, as if it were written)."""
    node = _resolve(node, defs)
    options = [_resolve(o, defs) for o in node.get("anyOf", [])]
    if options:
        for option in options:
            if option.get("type") != "null":
                yield from numeric_fields({**node, **option, "anyOf": []}, data, path, defs)
        return
    kind = node.get("type")
    if kind in ("integer", "number"):
        yield path, kind == "integer", node
    elif kind == "object" and "properties" in node:
        data = data if isinstance(data, dict) else {}
        for name, child in node["properties"].items():
            yield from numeric_fields(child, data.get(name), (*path, name), defs)
    elif kind == "object" and isinstance(node.get("additionalProperties"), dict):
        for key, value in (data or {}).items():
            yield from numeric_fields(node["additionalProperties"], value, (*path, key), defs)
    elif kind == "array" and isinstance(node.get("items"), dict):
        for i, value in enumerate(data or []):
            yield from numeric_fields(node["items"], value, (*path, i), defs)


SCHEMA = _root_model().model_json_schema()
FIELDS = list(numeric_fields(SCHEMA, BASE, (), SCHEMA.get("$defs", {})))


def dotted(path: Path_) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def params_with(path: Path_, value: Any) -> dict[str, Any]:
    """params.yaml with the value at ``path`` (an unwritten optional section, such as a price, written first)."""
    params = copy.deepcopy(BASE)
    node: Any = params
    for part in path[:-1]:
        if isinstance(node, dict) and node.get(part) is None:
            node[part] = {"input": 0.0, "output": 0.0}  # the one optional section with numbers: a price
        node = node[part]
    node[path[-1]] = value
    return params


def beyond(schema: dict[str, Any], integer: bool) -> list[Any]:
    """Values just outside each bound, and for a number .inf and .nan."""
    out: list[Any] = []
    for key, step in (("maximum", 1), ("exclusiveMaximum", 0), ("minimum", -1), ("exclusiveMinimum", 0)):
        if key in schema:
            bound = schema[key]
            out.append(bound + step if integer else (bound + step * max(abs(bound), 1e-3) if step else float(bound)))
    return out if integer else [*out, math.inf, -math.inf, math.nan]


def check_params(tmp_path: Path, params: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    path = tmp_path / f"params-{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    code = egoeval_main(["check-params", str(path)])
    return code, capsys.readouterr().err


def test_the_fields_are_found() -> None:
    names = {dotted(path) for path, _, _ in FIELDS}
    for key in ("egonormia.model.price.input", "egonormia.baselines[0].max_tokens", "flows.tolerance"):
        assert key in names
    assert "egohumans.track.config.multiview.track_buffer" in names and len(names) > 60


@pytest.mark.parametrize("path,integer,schema", FIELDS, ids=[dotted(p) for p, _, _ in FIELDS])
def test_every_numeric_param_states_both_bounds(path: Path_, integer: bool, schema: dict[str, Any]) -> None:
    assert {"minimum", "exclusiveMinimum"} & set(schema), f"{dotted(path)} states no lower bound"
    assert {"maximum", "exclusiveMaximum"} & set(schema), f"{dotted(path)} states no upper bound"


@pytest.mark.bad_input
@pytest.mark.parametrize("path,integer,schema", FIELDS, ids=[dotted(p) for p, _, _ in FIELDS])
def test_check_params_refuses_a_number_beyond_its_bound(
    path: Path_, integer: bool, schema: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for value in beyond(schema, integer):
        code, err = check_params(tmp_path, params_with(path, value), capsys)
        assert code == 2, (dotted(path), value, err)
        assert f"{dotted(path)} = " in err, (value, err)
        assert "Traceback" not in err


def tracker_numbers() -> list[tuple[str, str, float]]:
    typed = set(TrackerConfig.model_fields)
    return [
        (tracker, key, default)
        for tracker, defaults in sorted(packaged_trackers().items())
        for key, default in defaults.items()
        if key not in typed and isinstance(default, int | float) and not isinstance(default, bool)
    ]


@pytest.mark.bad_input
@pytest.mark.parametrize("tracker,key,default", tracker_numbers(), ids=[f"{t}.{k}" for t, k, _ in tracker_numbers()])
def test_every_number_of_a_tracker_yaml_is_bounded(
    tracker: str, key: str, default: float, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    low, high = extra_range(key, default)
    assert math.isfinite(low) and math.isfinite(high) and low <= default <= high
    config = dict(packaged_trackers()[tracker])
    config |= {"with_reid": False} if "with_reid" in config else {}
    wrong = [high + 1, low - 1] if isinstance(default, int) else [high * 2 + 1, low - 1, math.inf, math.nan]
    for value in wrong:
        params = copy.deepcopy(BASE)
        params["egohumans"]["track"]["config"] = {tracker: config | {key: value}}
        params["egohumans"]["track"]["trackers"] = [tracker]
        params["egohumans"]["compare"]["published"] = {}
        code, err = check_params(tmp_path, params, capsys)
        assert code == 2, (key, value, err)
        assert f"egohumans.track.config.{tracker}" in err and f"{key} = " in err, err


@pytest.mark.bad_input
def test_a_huge_price_stops_check_params_naming_the_key(tmp_path: Path) -> None:
    """The issue's case: ``egonormia.model.price: {input: 1e308}`` passed, and infer died writing an inf ledger."""
    params = params_with(("egonormia", "model", "price", "input"), 1e308)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    done = subprocess.run(
        [EGOEVAL, "check-params", str(path)], capture_output=True, text=True, env=tool_env(), timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert "egonormia.model.price.input = 1e+308: must be less than or equal to 10000" in done.stderr
    assert "Traceback" not in done.stderr
