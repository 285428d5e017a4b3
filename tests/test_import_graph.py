"""emceepee's modules import one another without a cycle, counting imports inside functions (which
hide a cycle from Python at start-up, never from a reader)."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter

from tests.support import ROOT

PACKAGE = ROOT / "emceepee_cli"


def _module(path_parts: tuple[str, ...]) -> str:
    name = ".".join(path_parts)
    return name.removesuffix(".__init__")


def import_graph() -> dict[str, set[str]]:
    """Each module of the package → the modules of the package it imports, anywhere in its text."""
    files = {
        _module(p.relative_to(ROOT).with_suffix("").parts): p
        for p in PACKAGE.rglob("*.py")
        if "_examples" not in p.parts
    }
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                named = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                named = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            else:
                continue
            graph[name] |= {target for target in named if target in files and target != name}
    return graph


def test_no_module_of_the_package_imports_itself_back() -> None:
    try:
        order = list(TopologicalSorter(import_graph()).static_order())
    except CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None
    assert "emceepee_cli.cli.main" in order


def _room(module: str) -> str:
    """A module's room: the folder right under the package (`emceepee_cli.calls.tasks` → `calls`),
    or the module itself when it stands at the top (`emceepee_cli.events`)."""
    return ".".join(module.split(".")[:2])


def test_no_folder_imports_back_a_folder_that_imports_it() -> None:
    rooms: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        rooms.setdefault(_room(module), set()).update(_room(t) for t in targets if _room(t) != _room(module))
    try:
        list(TopologicalSorter(rooms).static_order())
    except CycleError as exc:
        raise AssertionError(f"folders import each other: {' -> '.join(exc.args[1])}") from None


def test_no_folder_holds_more_than_twenty_modules() -> None:
    for folder in [PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir())]:
        if "__pycache__" in folder.parts or "_examples" in folder.parts:
            continue
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        assert len(modules) <= 20, f"{folder.relative_to(ROOT)} holds {len(modules)} modules"
