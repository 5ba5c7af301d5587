"""The layout the code keeps: a stage is a CLI (at most 30 lines: it parses its arguments and calls its benchmark's
library), and the tests and benchmarks use that library, never ``stages`` (they may run a stage as a process,
``python -m stages.<benchmark>.<stage>``)."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

MAX_STAGE_LINES = 30
IMPORTERS = ("import_module", "run_module", "__import__")  # importlib, runpy and the builtin: imports by name


def long_stage_modules(root: Path) -> dict[str, int]:
    """Every module under ``root/stages`` longer than MAX_STAGE_LINES, with its line count (as ``wc -l`` counts,
    a last line without its newline counted too)."""
    counts = {
        path.relative_to(root).as_posix(): len(path.read_text().splitlines())
        for path in sorted((root / "stages").rglob("*.py"))
    }
    return {name: lines for name, lines in counts.items() if lines > MAX_STAGE_LINES}


def _is_stages(module: str | None) -> bool:
    return module is not None and (module == "stages" or module.startswith("stages."))


def stage_imports(root: Path, folders: tuple[str, ...] = ("tests", "bench")) -> list[str]:
    """``file:line`` of every import of ``stages`` under ``folders``: import statements and imports by name
    (``importlib.import_module("stages...")``, ``runpy.run_module``, ``__import__``)."""
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    hit = any(_is_stages(alias.name) for alias in node.names)
                elif isinstance(node, ast.ImportFrom):
                    hit = node.level == 0 and _is_stages(node.module)
                elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
                    called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                    hit = called in IMPORTERS and isinstance(node.args[0].value, str) and _is_stages(node.args[0].value)
                else:
                    continue
                if hit:
                    found.append(f"{path.relative_to(root).as_posix()}:{node.lineno}")
    return sorted(found)


def test_every_stage_module_is_at_most_30_lines() -> None:
    assert (REPO / "stages" / "egonormia" / "infer.py").is_file(), "the stages are where the check looks"
    assert long_stage_modules(REPO) == {}, "a stage parses its arguments and calls its library: move the rest there"


def test_tests_and_benchmarks_never_import_stages() -> None:
    assert stage_imports(REPO) == [], "import the library (egoeval/<benchmark>/), or run the stage as a process"


def test_the_checks_fail_on_a_long_stage_and_on_every_kind_of_stage_import(tmp_path: Path) -> None:
    (tmp_path / "stages" / "toy").mkdir(parents=True)
    (tmp_path / "stages" / "toy" / "short.py").write_text("x = 1\n" * MAX_STAGE_LINES)
    (tmp_path / "stages" / "toy" / "long.py").write_text("x = 1\n" * MAX_STAGE_LINES + "y = 2")  # no last newline
    assert long_stage_modules(tmp_path) == {"stages/toy/long.py": MAX_STAGE_LINES + 1}
    (tmp_path / "tests").mkdir()
    (tmp_path / "bench").mkdir()
    (tmp_path / "tests" / "test_fine.py").write_text(
        "import subprocess, sys\nimport stages_helper\n"
        "from egoeval.core.stage_shell import run_stage\nfrom . import stages\n"
        "subprocess.run([sys.executable, '-m', 'stages.toy.long'])\n"
    )
    (tmp_path / "tests" / "test_bad.py").write_text(
        "import stages.toy.long\nfrom stages.toy import long\nfrom stages import toy\nimport importlib, runpy\n"
        "importlib.import_module('stages.toy.long')\nrunpy.run_module('stages.toy.long')\n"
    )
    (tmp_path / "bench" / "bad.py").write_text("def f():\n    from stages.toy.long import x\n")
    assert stage_imports(tmp_path) == ["bench/bad.py:2", *(f"tests/test_bad.py:{n}" for n in (1, 2, 3, 5, 6))]


# ---------------------------------------------------------------- one error family, no private imports


def _library_modules(root: Path) -> list[Path]:
    return [path for folder in ("egoeval", "flows", "stages") for path in sorted((root / folder).rglob("*.py"))]


def exception_classes_outside_errors(root: Path) -> list[str]:
    """``file:line class`` of every class under egoeval/, flows/ or stages/ that derives from an exception class
    (an ``Exception``, ``Error`` or ``Failure`` base, a name egoeval.core.errors defines, or one of Python's
    exceptions), except in egoeval/core/errors.py, the one place every error egoeval raises on purpose is declared."""
    import builtins

    import egoeval.core.errors as errors

    known = {name for name, value in vars(errors).items() if isinstance(value, type)}
    known |= {
        name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
    }
    found = []
    for path in _library_modules(root):
        if path == root / "egoeval" / "core" / "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(base).rpartition(".")[2] for base in node.bases]
                if any(base in known or base.endswith(("Error", "Exception", "Failure")) for base in bases):
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name}")
    return found


def private_imports(root: Path) -> list[str]:
    """``file:line name`` of every ``from <module> import _name`` between the project's modules (a private name is
    its module's own; another module that needs it needs a public name)."""
    found = []
    for path in _library_modules(root):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(("egoeval", "flows")):
                found += [f"{path.relative_to(root)}:{node.lineno} {a.name}" for a in node.names if a.name[0] == "_"]
    return found


def test_every_error_is_declared_in_errors_py() -> None:
    assert exception_classes_outside_errors(REPO) == []


def test_no_module_imports_a_private_name_of_another() -> None:
    assert private_imports(REPO) == []


def test_the_structure_checks_find_what_they_look_for(tmp_path: Path) -> None:
    """Both checks fail on a tree that breaks them (so a passing run means something)."""
    (tmp_path / "egoeval" / "core").mkdir(parents=True)
    (tmp_path / "egoeval" / "core" / "errors.py").write_text("class Fine(Exception):\n    pass\n")
    (tmp_path / "egoeval" / "thing.py").write_text(
        "from egoeval.other import _hidden\nimport builtins\n\n\nclass Oops(ValueError):\n    pass\n\n\n"
        "class Twin(errors.InputError):\n    pass\n\n\nclass Plain:\n    pass\n"
    )
    assert exception_classes_outside_errors(tmp_path) == ["egoeval/thing.py:5 Oops", "egoeval/thing.py:9 Twin"]
    assert private_imports(tmp_path) == ["egoeval/thing.py:1 _hidden"]


# ---------------------------------------------------------------- no import circles


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the project modules it imports anywhere in its file (top level, inside functions, under
    TYPE_CHECKING): every arrow a reader of the code sees."""
    modules = {
        ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): path
        for folder in ("egoeval", "flows")
        for path in sorted((root / folder).rglob("*.py"))
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            found = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            targets |= {target for target in found if target in modules and target != name}
        graph[name] = targets
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_no_modules_import_each_other_in_a_circle() -> None:
    assert import_circles(import_graph(REPO)) == []


def test_the_circle_check_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert import_circles(graph) == [["a", "b", "c"]]
