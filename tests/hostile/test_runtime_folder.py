"""Another local user cannot take semo's runtime folder (issue 21 #11).

Without XDG_RUNTIME_DIR semo keeps its sockets in `<tmp>/semo-<uid>`, a name anyone can
guess: another user can make it first (or plant a link there). The engine and the console then
refuse the folder with one clear line that says what to do, never a traceback, and serve
nothing there; a folder of ours that others may read is made private.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.control.office import CONFIG, run_console, run_semo, start_engine, wait_until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def tmp_env(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A sticky world-writable <tmp> (TMPDIR), an office folder, and an environment without
    XDG_RUNTIME_DIR."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)
    folder = tmp_path / "office"
    folder.mkdir()
    (folder / "semo.toml").write_text(CONFIG)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "TMPDIR": str(tmp),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "SEMO_SQLITE_PATH": str(tmp_path / "semo.db"),
    }
    return tmp, folder, env


def _refused(folder: Path, env: dict[str, str], runtime: Path) -> None:
    for run, args in (
        (run_semo, ["engine", "--config", "semo.toml"]),
        (run_console, ["console", "--config", "semo.toml"]),
    ):
        result = run(*args, env=env, cwd=folder, timeout=60)
        out = result.stdout + result.stderr
        assert result.returncode != 0, out
        assert "Traceback" not in out, out
        assert str(runtime) in out and "XDG_RUNTIME_DIR" in out, out
    assert not [p for p in runtime.iterdir() if p.name.startswith("control-")]


@pytest.mark.skipif(os.getuid() != 0, reason="making a folder of another uid needs root")
def test_folder_of_another_user_is_refused_clearly(tmp_env: tuple[Path, Path, dict[str, str]]):
    tmp, folder, env = tmp_env
    runtime = tmp / f"semo-{os.getuid()}"
    runtime.mkdir(mode=0o777)
    os.chown(runtime, 4242, 4242)  # another user made it first
    _refused(folder, env, runtime)
    result = run_semo("engine", "--config", "semo.toml", env=env, cwd=folder, timeout=60)
    assert "belongs to uid 4242" in result.stdout + result.stderr


def test_planted_link_is_refused_clearly(tmp_env: tuple[Path, Path, dict[str, str]]) -> None:
    tmp, folder, env = tmp_env
    trap = tmp / "trap"
    trap.mkdir(mode=0o777)
    runtime = tmp / f"semo-{os.getuid()}"
    runtime.symlink_to(trap)
    result = run_semo("engine", "--config", "semo.toml", env=env, cwd=folder, timeout=60)
    out = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in out, out
    assert "is not a folder" in out and "XDG_RUNTIME_DIR" in out, out
    assert list(trap.iterdir()) == []


def test_planted_link_refuses_the_headless_demo_clearly(
    tmp_env: tuple[Path, Path, dict[str, str]],
) -> None:
    tmp, folder, env = tmp_env
    trap = tmp / "trap"
    trap.mkdir(mode=0o777)
    runtime = tmp / f"semo-{os.getuid()}"
    runtime.symlink_to(trap)
    result = run_semo("demo", "--headless", env=env, cwd=folder, timeout=60)
    out = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in out, out
    assert "semo demo: the demo cannot run:" in result.stderr, out
    assert "is not a folder" in out and "XDG_RUNTIME_DIR" in out, out
    assert list(trap.iterdir()) == []


def test_open_folder_of_ours_is_made_private(
    tmp_env: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    tmp, folder, env = tmp_env
    runtime = tmp / f"semo-{os.getuid()}"
    runtime.mkdir()
    runtime.chmod(0o777)
    engine = start_engine(folder, env, tmp_path / "engine.log")
    try:
        wait_until(lambda: list(runtime.glob("control-*.sock")), "the control socket")
        assert stat.S_IMODE(runtime.stat().st_mode) == 0o700
    finally:
        engine.terminate()
        engine.wait(30)
