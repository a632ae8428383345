"""`s` in the jobs view: a shell in the job's worktree. Inside tmux it is a new window of the
operator's tmux (a real private tmux server here) whose pane starts in the worktree; the
worktree is the job's role's from `jobs.work`; a worktree that is gone is a clear error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from textual.app import App

from semo.console.shell import job_worktree, open_shell, shell_argv
from semo.engine.office.job_ops import JobView
from tests.support.tmux import TmuxServer
from tests.support.waiting import eventually_value


def job_with(work: dict[str, object] | None) -> JobView:
    return JobView(office_id="o", agent_id="a", task="t", role="BE", work=work)


def test_the_worktree_is_the_jobs_roles_else_another_roles(tmp_path: Path) -> None:
    fe, be = str(tmp_path / "fe"), str(tmp_path / "be")
    both = {"roles": {"FE": {"branch": "x", "worktree": fe}, "BE": {"branch": "y", "worktree": be}}}
    assert job_worktree(job_with(both)) == Path(be)
    assert job_worktree(job_with({"roles": {"FE": {"branch": "x", "worktree": fe}}})) == Path(fe)
    assert job_worktree(job_with(None)) is None
    assert job_worktree(job_with({"roles": "junk"})) is None


def test_outside_tmux_the_shell_runs_itself(tmp_path: Path) -> None:
    assert shell_argv(tmp_path, {"SHELL": "/bin/zsh"}) == ["/bin/zsh"]
    assert shell_argv(tmp_path, {}) == ["/bin/sh"]
    with pytest.raises(FileNotFoundError, match="is not there any more"):
        open_shell(App(), tmp_path / "gone", {})


async def test_inside_tmux_a_window_opens_in_the_worktree(tmp_path: Path) -> None:
    worktree = tmp_path / "agent" / "BE" / "warm-be"
    worktree.mkdir(parents=True)
    server = TmuxServer()
    try:
        server.start(["sleep", "60"], cols=80, rows=24, env={}, cwd=tmp_path, term="xterm")
        env = {
            "PATH": os.environ["PATH"],
            "SHELL": "/bin/sh",
            "TMUX": f"{server.socket_path},{os.getpid()},0",
        }
        said = open_shell(App(), worktree, env)
        assert "tmux window semo-job" in said

        async def window() -> str | None:
            out = server("list-windows", "-a", "-F", "#{window_name} #{pane_current_path}")
            return next((line for line in out.splitlines() if line.startswith("semo-job")), None)

        shown = await eventually_value(window, "the semo-job window", 10)
        assert shown == f"semo-job {worktree.resolve()}"
    finally:
        server.kill()
