"""The project code a stage command imports, read from the source (every import, function-level ones too): with the
runtime trace of a reproduced run (tests/tracing/sitecustomize.py), what tests/test_dvc_deps.py holds dvc.yaml to."""

from __future__ import annotations

import ast
import os
import shlex
from pathlib import Path

from egoeval.dvc_project import StageInfo

PACKAGES = ("egoeval", "stages", "flows")  # the project's own code; anything else is an installed package


def command_module(cmd: str) -> str | None:
    """The project module a stage command runs (``python -m stages.egonormia.infer ...`` -> that module)."""
    words = shlex.split(cmd)
    for i, word in enumerate(words[:-1]):
        if Path(word).name.startswith("python") and words[i + 1] == "-m" and i + 2 < len(words):
            return words[i + 2]
    for word in words:
        if word.endswith(".py"):
            return ".".join(Path(word).with_suffix("").parts)
    return None


def _module_file(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _type_checking(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:``: imports for annotations only, never run."""
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of the tree except those under ``if TYPE_CHECKING:``."""
    found, todo = [], [tree]
    while todo:
        node = todo.pop()
        found.append(node)
        todo += [child for child in ast.iter_child_nodes(node) if not _type_checking(child)]
    return found


def _imports(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every module an AST imports, anywhere in the file (function-level imports too; not those under
    ``if TYPE_CHECKING:``), as absolute names."""
    found: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in _nodes(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            found.add(name)
            found.update(f"{name}.{alias.name}" for alias in node.names)  # `from pkg import submodule`
    return found


def _trivial(tree: ast.Module) -> bool:
    """A package ``__init__`` that holds only a docstring and dunder constants runs no code worth declaring."""
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.Assign) and all(
            isinstance(t, ast.Name) and t.id.startswith("__") for t in node.targets
        ):
            continue
        return False
    return True


def code_files(root: str | os.PathLike[str], module: str) -> set[str]:
    """The project files (relative paths) that running ``module`` imports, transitively; parent packages count."""
    root = Path(root)
    seen: set[str] = set()
    files: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen or name.split(".")[0] not in PACKAGES:
            continue
        seen.add(name)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # importing a.b.c runs a and a.b first
        path = _module_file(root, name)
        if path is None:
            continue  # `from pkg import NAME` where NAME is not a submodule
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        if not (path.name == "__init__.py" and _trivial(tree)):
            files.add(path.relative_to(root).as_posix())
        todo += sorted(_imports(tree, name, path.name == "__init__.py"))
    return files


def runs_code(root: str | os.PathLike[str], path: str) -> bool:
    """Whether a project file holds code worth declaring (a trivial package ``__init__`` does not)."""
    file = Path(root) / path
    return not (file.name == "__init__.py" and _trivial(ast.parse(file.read_text(encoding="utf-8"))))


def covered(path: str, declared: tuple[str, ...] | list[str]) -> bool:
    """Whether a file is declared: itself, or a folder holding it."""
    return any(path == dep or path.startswith(dep.rstrip("/") + "/") for dep in declared)


def key_covered(key: str, declared: tuple[str, ...] | list[str]) -> bool:
    """Whether a dotted params key is declared: itself, or a section holding it."""
    return any(key == dep or key.startswith(f"{dep}.") for dep in declared)


def undeclared_code(root: str | os.PathLike[str], info: StageInfo) -> list[str]:
    """The project files a stage's command imports that its dvc.yaml entry does not declare."""
    module = command_module(info.cmd)
    if module is None:
        return []
    return sorted(path for path in code_files(root, module) if not covered(path, info.deps))
