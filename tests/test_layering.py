"""The package's layers (docs/DESIGN.md): the engine never imports the console or textual,
no module imports itself back through others, and the import-linter contracts hold."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "semo"
FORBIDDEN = ("semo.console", "textual")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: frozenset[str] = frozenset()) -> list[str]:
    """Every module `path` imports, wherever the statement is: at the top, inside a function,
    under `if TYPE_CHECKING:`; relative imports resolved. `from package import name` is an
    import of the submodule when `name` is one of `modules`, else of the package."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                names.append(submodule if submodule in modules else base)
    return names


def _import_graph() -> dict[str, set[str]]:
    """semo's modules and, for each, the semo modules it imports."""
    paths = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    modules = frozenset(paths)
    return {
        name: {imported for imported in _imports(path, modules) if imported in modules} - {name}
        for name, path in paths.items()
    }


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def _describe(graph: dict[str, set[str]], circle: list[str]) -> str:
    members = set(circle)
    return "; ".join(f"{m} -> {', '.join(sorted(graph[m] & members))}" for m in circle)


def test_no_module_imports_itself_back():
    graph = _import_graph()
    assert len(graph) > 150  # the walk found the package
    assert [_describe(graph, c) for c in _circles(graph)] == []


def test_the_circle_finder_finds_circles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _circles(graph) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_function_level_and_type_checking_imports_are_walked():
    server = _imports(PACKAGE / "engine" / "control" / "server.py")
    operations = _imports(PACKAGE / "engine" / "office" / "operations.py")
    assert "semo.engine.control.served" in server  # under `if TYPE_CHECKING:`
    assert "semo.engine.liveness" in operations  # inside a function
    assert _circles({**_import_graph(), "semo.engine.liveness": {"semo.engine.office.operations"}})


def test_engine_sources_never_import_the_ui():
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted((PACKAGE / "engine").rglob("*.py"))
        for name in _imports(path)
        if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)
    ]
    assert len(list((PACKAGE / "engine").rglob("*.py"))) > 120
    assert offenders == []


#: the import-linter contracts of pyproject.toml that name the layers (docs/DESIGN.md)
CONTRACTS = (
    "engine never imports the console or textual",
    "layers: console > api | control > routing > sessions > protocol > terminal",
    "store: persistence imports nothing above it",
    "office services: below routing, api and control; above the store",
    "the command-line modules are imported by the CLI only",
    "foundations import nothing above them",
    "settings modules are leaves",
)


def test_import_linter_contracts_hold():
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint_imports, "import-linter is a dev dependency; scripts/test installs it"
    result = subprocess.run([lint_imports], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    kept = [line for line in result.stdout.splitlines() if " KEPT" in line]
    assert [name for name in CONTRACTS if not any(k.startswith(name + " KEPT") for k in kept)] == []


#: what `semo console` must not import before its first frame (issue 14: attach <= 300 ms from
#: the command's start; these cost more than the rest of the console's start together): the
#: console reaches the engine through engine.control.client only
CONSOLE_START_FORBIDDEN = (
    "pydantic",
    "semo.engine.config",
    "semo.engine.engine",
    "semo.engine.events",
    "semo.engine.store",
    "semo.engine.routing",
    "semo.engine.sessions",
    "semo.engine.control.server",
    "semo.engine.control.launcher",
    "semo.engine.control.paths",
)


def test_the_console_imports_no_engine_store_or_pydantic():
    probe = (
        "import sys, semo.console.cli, semo.console.launch, semo.console.app\n"
        "import semo.console.screens.main\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    loaded = result.stdout.split()
    offenders = [
        name
        for name in loaded
        if any(name == f or name.startswith(f + ".") for f in CONSOLE_START_FORBIDDEN)
    ]
    assert "textual.app" in loaded and "semo.engine.control.client" in loaded
    assert offenders == []


def test_the_painted_first_frame_needs_neither_textual_nor_rich_nor_pyte():
    """console/first_frame.py paints before Textual loads: everything the launcher imports
    to paint it stays light (console.launch, first_frame, panel_text)."""
    probe = (
        "import sys, semo.console.launch, semo.console.first_frame, semo.console.panel_text\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    heavy = ("textual", "rich", "pyte", *CONSOLE_START_FORBIDDEN)
    loaded = result.stdout.split()
    assert "semo.console.first_frame" in loaded
    assert [n for n in loaded if any(n == f or n.startswith(f + ".") for f in heavy)] == []
