"""semo imports under its own name: other top-level `engine`/`console` packages do not collide."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def others_first(tmp_path: Path) -> dict[str, str]:
    """An environment whose PYTHONPATH puts unrelated `engine` and `console` packages first."""
    for name in ("engine", "console"):
        package = tmp_path / "others" / name
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(f"MARK = 'other-{name}'\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEMO_")}
    paths = [str(tmp_path / "others"), str(REPO), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env |= {"SEMO_SQLITE_PATH": str(tmp_path / "semo.db"), "XDG_STATE_HOME": str(tmp_path)}
    return env


def test_semo_and_other_engine_and_console_packages_import_side_by_side(tmp_path: Path) -> None:
    code = (
        "import engine, console, semo.engine.cli, semo.console.cli, semo.console.app\n"
        "print(engine.MARK, console.MARK, semo.engine.cli.__name__)\n"
    )
    env = others_first(tmp_path)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["other-engine", "other-console", "semo.engine.cli"]


def test_the_demo_runs_with_other_engine_and_console_packages_first(tmp_path: Path) -> None:
    env = others_first(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "semo", "demo", "--headless"],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "job done: 'build the login page'" in result.stdout


def test_python_dash_m_semo_is_the_semo_command() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "semo", "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: semo ")
