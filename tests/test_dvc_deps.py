"""dvc.yaml cannot lie: every stage declares the project code its command imports and the params keys it reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from code_closure import PACKAGES, code_files, covered, key_covered, runs_code, undeclared_code
from conftest import REPO, copy_repo, copy_workspace, dvc, trace_file

from egoeval.dvc_project import StageInfo, pipeline_stages

STAGES = pipeline_stages(REPO)


@pytest.mark.parametrize("info", STAGES, ids=[info.name for info in STAGES])
def test_every_stage_declares_the_code_it_imports(info: StageInfo) -> None:
    assert undeclared_code(REPO, info) == [], f"{info.name}: add these to its deps in dvc.yaml"


@pytest.mark.parametrize("info", STAGES, ids=[info.name for info in STAGES])
def test_no_stage_declares_a_path_its_folder_dep_already_holds(info: StageInfo) -> None:
    """A module inside a code folder the stage depends on is hashed with it: listed again, DVC hashes and locks it
    twice. (Data deps come from params: a data root and its manifest may or may not nest.)"""
    code = [dep for dep in info.deps if dep.startswith(tuple(f"{package}/" for package in PACKAGES))]
    folders = tuple(dep.rstrip("/") + "/" for dep in code if (REPO / dep).is_dir())
    assert [dep for dep in code if dep.startswith(folders)] == [], info.name


def test_the_code_check_fails_when_a_declared_module_is_removed(tmp_path: Path) -> None:
    root = copy_repo(tmp_path)
    pipeline = yaml.safe_load((root / "dvc.yaml").read_text())
    pipeline["stages"]["egonormia_infer"]["deps"].remove("egoeval/cache.py")
    (root / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))
    (infer,) = [info for info in pipeline_stages(root) if info.name == "egonormia_infer"]
    assert undeclared_code(root, infer) == ["egoeval/cache.py"]


def read_trace(tmp_path_factory: pytest.TempPathFactory, field: str) -> dict[str, set[str]]:
    """Per stage, what it read (``keys``: params keys) or imported (``code``: project files) in the reproduced run."""
    found: dict[str, set[str]] = {}
    for line in trace_file(tmp_path_factory).read_text().splitlines():
        entry = json.loads(line)
        found.setdefault(entry["stage"], set()).update(entry[field])
    return found


def read_keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    return read_trace(tmp_path_factory, "keys")


@pytest.mark.slow
def test_every_stage_declares_the_code_it_ran(reproduced: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """What each stage imported at run time (lazy and dynamic imports too: the benchmark registry) is declared."""
    code = read_trace(tmp_path_factory, "code")
    assert code and set(code) <= {info.name for info in STAGES}, "a trace line names no stage of dvc.yaml"
    assert all("egoeval/core/settings.py" in files for files in code.values())
    problems = {
        info.name: sorted(f for f in code.get(info.name, ()) if runs_code(REPO, f) and not covered(f, info.deps))
        for info in STAGES
    }
    assert {name: missing for name, missing in problems.items() if missing} == {}


OUTSIDE_OUTPUTS = {"egonormia_infer": {"egonormia.model.price"}}
"""Keys a stage reads for what is no DVC output: the infer stage's run ledger (its cost, printed and kept beside the
response cache) prices its calls, while its outputs never depend on the price; undeclared, so that a price change
re-runs the score stage (which declares it) and not inference (test_price_change_reruns_the_score_not_inference)."""


def undeclared_params(info: StageInfo, keys: set[str]) -> list[str]:
    exempt = OUTSIDE_OUTPUTS.get(info.name, set())
    return sorted(key for key in keys if not key_covered(key, info.params) and key not in exempt)


ESTIMATE_ONLY = {"token_rule"}
"""Keys of the model entry that only ``egoeval estimate`` reads (no stage): declared, a change would re-run describe
and infer for nothing."""


@pytest.mark.parametrize("stage", ["egonormia_describe", "egonormia_infer"])
def test_the_model_stages_declare_every_key_of_the_model_but_its_price(stage: str) -> None:
    """They list egonormia.model key by key (so its price and ESTIMATE_ONLY can be left out): a key added to the
    model entry must be added to them, whether or not the sample's baselines read it."""
    from egoeval.egonormia.settings import EvaluatedModel

    (info,) = [info for info in STAGES if info.name == stage]
    declared = {key for key in EvaluatedModel.model_fields if key_covered(f"egonormia.model.{key}", info.params)}
    assert declared == set(EvaluatedModel.model_fields) - {"price"} - ESTIMATE_ONLY


@pytest.mark.slow
def test_every_stage_declares_the_params_it_reads(reproduced: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    keys = read_keys(tmp_path_factory)
    assert set(keys) <= {info.name for info in STAGES}, "a trace line names no stage of dvc.yaml"
    problems = {info.name: undeclared_params(info, keys.get(info.name, set())) for info in STAGES}
    assert {name: missing for name, missing in problems.items() if missing} == {}


@pytest.mark.slow
def test_the_params_check_fails_when_a_declared_key_is_removed(
    reproduced: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    keys = read_keys(tmp_path_factory)
    (score,) = [info for info in STAGES if info.name == "egonormia_score"]
    assert keys["egonormia_score"], "the score stage reads its params through egoeval.core.settings"
    stripped = StageInfo(**{**score.__dict__, "params": ()})
    assert undeclared_params(stripped, keys["egonormia_score"]) == sorted(keys["egonormia_score"])


@pytest.mark.slow
def test_one_byte_in_a_shared_module_makes_dvc_status_name_its_stages(reproduced: Path, tmp_path: Path) -> None:
    root = copy_workspace(reproduced, tmp_path / "repo")
    assert "up to date" in dvc(root, "status").stdout
    with open(root / "egoeval" / "cache.py", "a") as handle:
        handle.write("\n")
    status = dvc(root, "status").stdout
    assert "egonormia_infer:" in status and "egonormia_describe:" in status
    assert "egohumans_score:" not in status


def _modules(folder: str) -> list[str]:
    return sorted(
        ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        for path in (REPO / folder).rglob("*.py")
    )


@pytest.mark.parametrize("module", _modules("egoeval"))
def test_the_library_never_imports_orchestration_or_stages(module: str) -> None:
    reached = code_files(REPO, module)
    assert not [path for path in reached if path.startswith(("flows/", "stages/"))], module


@pytest.mark.parametrize("module", _modules("flows") + _modules("bench"))
def test_flows_and_benchmarks_use_the_library_not_the_stages(module: str) -> None:
    assert not [path for path in code_files(REPO, module) if path.startswith("stages/")], module


@pytest.mark.parametrize("module", [m for m in _modules("stages") if m.count(".") == 2])
def test_no_stage_imports_another_stage(module: str) -> None:
    own = module.replace(".", "/") + ".py"
    others = [p for p in code_files(REPO, module) if p.startswith("stages/") and p != own]
    assert others == [], f"{module} imports {others}: shared code belongs in egoeval/"
