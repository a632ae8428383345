"""DESIGN.md section 1: engine/ never imports the console or textual."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = ("console", "textual")


def _imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def test_engine_sources_never_import_the_ui():
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted((ROOT / "engine").rglob("*.py"))
        for name in _imported_modules(path)
        if name.split(".")[0] in FORBIDDEN
    ]
    assert offenders == []


def test_import_linter_contract_holds():
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint_imports, "import-linter is a dev dependency; scripts/test installs it"
    result = subprocess.run([lint_imports], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "engine never imports the console or textual KEPT" in result.stdout


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
