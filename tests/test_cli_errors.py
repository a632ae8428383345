"""The `semo` command's errors name the subcommand and say what to do, in one line."""

from __future__ import annotations

from pathlib import Path

from tests.support.semo_process import run_semo, semo_env


async def test_an_unknown_option_is_reported_with_the_subcommands_usage(tmp_path: Path) -> None:
    env = semo_env(XDG_STATE_HOME=str(tmp_path), SEMO_SQLITE_PATH=str(tmp_path / "semo.db"))
    result = await run_semo("questions", "--bogus", env=env)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: semo questions ")
    assert "semo questions: error: unrecognized arguments: --bogus" in result.stderr
    nested = await run_semo("job", "show", "abc", "--nope", env=env)
    assert nested.returncode == 2
    assert nested.stderr.startswith("usage: semo job show ")
    assert "unrecognized arguments: --nope" in nested.stderr


async def test_stopping_an_office_nobody_runs_says_so_plainly(tmp_path: Path) -> None:
    env = semo_env(XDG_STATE_HOME=str(tmp_path), HOME=str(tmp_path))
    result = await run_semo("stop", "--demo", env=env)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "semo stop: no engine serves office 'demo': none is running "
        "(`semo engine` or `semo demo` starts one)"
    )
