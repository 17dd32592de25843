"""The package's layers hold (issue 24): a root of vocabulary only, front ends in their own
folders, nothing importing upward and no import cycles between modules.

Imports are read from the source (every ``import`` and ``from … import``, inside functions too,
since a lazy import is still a dependency), so the test needs nothing installed but the files.
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "smriti"
PACKAGE_FOLDERS = ["config", "pipelines", "nodes", "stores", "providers", "server", "cli", "integrations"]
FRONT_ENDS = ("smriti.server", "smriti.cli", "smriti.integrations")
MAX_ROOT_MODULES = 9


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["smriti", *parts])


def _modules() -> dict[str, Path]:
    files = [p for p in ROOT.glob("*.py")]
    for folder in PACKAGE_FOLDERS:
        files += (ROOT / folder).rglob("*.py")
    return {_module_name(p): p for p in files}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The smriti modules ``path`` imports at run time (TYPE_CHECKING blocks are types only)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("smriti"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            if base.startswith("smriti"):
                for alias in node.names:  # `from smriti.stores import backup` imports a module
                    sub = f"{base}.{alias.name}"
                    found.add(sub if sub in known else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {m for m in found if m in known and m != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(path, name, known) for name, path in modules.items()}


def _is_front_end(module: str) -> bool:
    return any(module == f or module.startswith(f + ".") for f in FRONT_ENDS)


def test_the_root_holds_the_vocabulary_only():
    root = sorted(p.stem for p in ROOT.glob("*.py") if p.name != "__init__.py")
    assert len(root) <= MAX_ROOT_MODULES, root


def test_no_module_below_the_front_ends_imports_them():
    upward = {
        (module, target)
        for module, targets in _graph().items()
        if not _is_front_end(module)
        for target in targets
        if _is_front_end(target)
    }
    assert not upward, sorted(upward)


def test_front_ends_keep_to_their_own_rooms():
    """The server never imports the CLI; the LangGraph integrations import neither."""
    crossings = set()
    for module, targets in _graph().items():
        for target in targets:
            if module.startswith("smriti.server") and target.startswith("smriti.cli"):
                crossings.add((module, target))
            if module.startswith("smriti.integrations") and target.startswith(
                ("smriti.server", "smriti.cli")
            ):
                crossings.add((module, target))
    assert not crossings, sorted(crossings)


def test_no_import_cycles_between_modules():
    try:
        tuple(TopologicalSorter(_graph()).static_order())
    except CycleError as error:
        raise AssertionError(f"import cycle: {' -> '.join(error.args[1])}") from None


def test_the_checker_sees_a_cycle_and_an_upward_import(tmp_path):
    """The reader must find what it exists to find: a cycle through a lazy import, and an upward one."""
    (tmp_path / "a.py").write_text("from smriti.b import x\n")
    (tmp_path / "b.py").write_text("def f():\n    from smriti.a import y\n")
    known = {"smriti.a", "smriti.b"}
    graph = {m: _imports(tmp_path / f"{m[-1]}.py", m, known) for m in known}
    assert graph == {"smriti.a": {"smriti.b"}, "smriti.b": {"smriti.a"}}
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError:
        pass
    else:
        raise AssertionError("the cycle went unseen")
    assert _is_front_end("smriti.server.app") and not _is_front_end("smriti.serverless")
