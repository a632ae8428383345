"""Hostile agents after the engine's secrets, on real processes (docs/SECURITY.md, "Secrets and
the file system").

- A real `semo engine` starts a spy agent (tests/support/spy_agent.py) with store credentials,
  API tokens and cloud keys in the engine's environment: the spy cannot read
  /proc/<engine>/environ or /proc/<engine>/mem (the engine is non-dumpable), its own environment
  holds no credential, only what `[[agents]] env` names; a post-checkout hook planted in the
  repository never runs when the engine makes the spy's worktree. The same spy under an ordinary
  (dumpable) parent does read the parent's environment: the probe works.
- git as semo runs it (worktrees, persona, hook settings) runs no hook and no fsmonitor an
  agent planted in the shared `.git`, and sees no secret; the same hooks do run under plain git.
- Writing into a worktree never follows a symlink out of it (see the symlink tests).
- File modes: state folder 0700, databases, logs and semo.toml 0600.

As root, every process has CAP_SYS_PTRACE, which reads any /proc file whatever the dumpable flag
says; the engine is then started without capabilities (`setpriv --bounding-set=-all`), which is
what a same-uid agent of an ordinary user is.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from pydantic import ValidationError

from semo.engine.agents.claude.settings import SETTINGS_RELPATH, HookSettingsError, install_hooks
from semo.engine.agents.persona import PersonaError, PersonaInjector
from semo.engine.config import AgentConfig
from semo.engine.fsutil import UnsafePathError, contained_path
from semo.engine.fsutil import _open_folder as open_folder
from semo.engine.sessions.environment import agent_env_values, is_credential, scrub
from semo.engine.sessions.manager import SessionManager
from semo.engine.sessions.worktrees import WorktreeManager
from semo.engine.store.models import Agent
from semo.engine.store.sqlite import SqliteStore
from tests.support.git_repo import git as repo_git
from tests.support.git_repo import make_repo as new_repo
from tests.support.office_toml import sqlite_office_toml
from tests.support.semo_process import SEMO, semo_engine
from tests.support.waiting import eventually_value

SOURCE = Path(__file__).resolve().parents[2]
SPY = SOURCE / "tests" / "support" / "spy_agent.py"

#: What the engine's environment holds; none of the values may reach an agent unasked.
ENGINE_SECRETS = {
    "SEMO_DATABASE_URL": "postgresql://semo:db-pass-7f3a@db.invalid/semo",
    "SEMO_API_TOKEN": "api-token-5d1c9b2e7a4f",
    "SUPABASE_SERVICE_ROLE_KEY": "service-role-key-81be",
    "PGPASSWORD": "pg-password-0c4d",
    "PGUSER": "pg-user-secret-e2",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-9a8b",
    "GOOGLE_APPLICATION_CREDENTIALS": "/secret/gcp-key-41.json",
    "NPM_TOKEN": "npm-token-77aa",
    "OPENAI_API_KEY": "sk-openai-3344",
    "DATABASE_URL": "postgresql://u:dburl-pass-12@h/db",
    "MY_SERVICE_PASSWORD": "svc-pass-5566",
}
#: Named in the agent's `[[agents]] env`: passed on.
OPTED_IN = {"GITHUB_TOKEN": "ghp-opted-in-1234"}
#: The Claude Code agent's own credential: inherited on purpose.
KEPT = {"ANTHROPIC_API_KEY": "sk-ant-kept-5678"}

CONFIG = (
    sqlite_office_toml("secrets-test")
    + """
[engine]
log_format = "json"
shutdown_grace = 1

[pool]
max_sessions = 2
warm_roles = ["SPY"]

[[agents]]
role = "SPY"
profile = "generic"
command = {command}
env = {{ GITHUB_TOKEN = "${{GITHUB_TOKEN}}", LITERAL_SETTING = "as-written" }}
"""
)


def unprivileged() -> list[str]:
    """The prefix that runs a command as an ordinary same-uid process (no capabilities)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot drop CAP_SYS_PTRACE")
    return ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--"]


def git(cwd: Path, *args: str) -> str:
    return repo_git(cwd, *args).strip()


def make_repo(path: Path) -> Path:
    return new_repo(path, {"README": "office repo\n"}, author_in_config=True)


def plant_hooks(repo: Path, marker: Path) -> None:
    """What an agent can do to the shared .git: hooks that record their environment in
    `marker`, a hooks path of its own and an fsmonitor program doing the same."""
    script = f"#!/bin/sh\necho \"$0\" >> '{marker}'\nenv >> '{marker}'\n"
    hooks = repo / ".git" / "hooks"
    for name in ("post-checkout", "reference-transaction", "post-index-change"):
        (hooks / name).write_text(script)
        (hooks / name).chmod(0o755)
    own = repo / ".git" / "agent-hooks"
    shutil.copytree(hooks, own)
    fsmonitor = repo / ".git" / "fsmonitor.sh"
    fsmonitor.write_text(script)
    fsmonitor.chmod(0o755)
    git(repo, "config", "core.fsmonitor", str(fsmonitor))
    git(repo, "config", "core.hooksPath", str(own))


def engine_environment(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not is_credential(k)}
    env |= ENGINE_SECRETS | OPTED_IN | KEPT
    env["XDG_STATE_HOME"] = str(folder / "state")
    env["XDG_DATA_HOME"] = str(folder / "data")
    env["PYTHONPATH"] = str(SOURCE)  # the engine runs this checkout's code, as the test does
    return env


@asynccontextmanager
async def engine_process(config: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    env = engine_environment(config.parent)
    engine = semo_engine(config, env, asyncio.subprocess.PIPE, prefix=unprivileged(), grace=20)
    async with engine as process:
        yield process


def _read_report(path: Path) -> dict[str, object] | None:
    return json.loads(path.read_text()) if path.exists() else None


async def report_of(path: Path, process: asyncio.subprocess.Process) -> dict[str, object]:
    async def probe() -> dict[str, object] | None:
        if process.returncode is not None:
            assert process.stderr is not None
            error = (await process.stderr.read()).decode(errors="replace")
            raise AssertionError(f"engine exited {process.returncode}: {error[-2000:]}")
        return await asyncio.to_thread(_read_report, path)

    return await eventually_value(probe, "the spy agent's report", timeout=30)


def leaked(text: str) -> list[str]:
    return [name for name, value in ENGINE_SECRETS.items() if value in text]


async def test_an_agent_of_a_real_engine_finds_no_secret(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    marker = tmp_path / "hook-ran.txt"
    plant_hooks(repo, marker)
    report_path = tmp_path / "spy.json"
    command = json.dumps([sys.executable, str(SPY), str(report_path)])
    config = tmp_path / "semo.toml"
    config.write_text(CONFIG.format(command=command))

    async with engine_process(config) as engine:
        report = await report_of(report_path, engine)
        async with SqliteStore(tmp_path / "semo.db") as store:
            office = next(o for o in await store.list_offices() if o.name == "secrets-test")
            sessions = await store.list_sessions(office.id)
        assert [s.pid for s in sessions] == [report["pid"]]  # the spy is the engine's agent
        assert report["ppid"] == engine.pid

    # /proc/<engine>/environ and mem: closed to the agent
    assert report["parent_environ"] is None, leaked(str(report["parent_environ"]))
    assert "PermissionError" in str(report["parent_environ_error"])
    assert report["parent_mem_error"] is not None
    # its own environment: no credential; the opted-in one and Claude's own key are there
    env = report["env"]
    assert isinstance(env, dict)
    assert leaked(json.dumps(env)) == []
    assert not [k for k in env if k.startswith(("SEMO_", "SUPABASE_", "PG", "AWS_"))]
    assert env["GITHUB_TOKEN"] == OPTED_IN["GITHUB_TOKEN"]
    assert env["LITERAL_SETTING"] == "as-written"
    assert env["ANTHROPIC_API_KEY"] == KEPT["ANTHROPIC_API_KEY"]
    # the planted hooks never ran when the engine made the worktree
    assert not marker.exists(), marker.read_text()[:2000]
    assert (tmp_path / "ws" / "agent" / "SPY").is_dir()


def test_the_probe_reads_an_ordinary_parent(tmp_path: Path) -> None:
    """Control: the spy under a dumpable parent with the same secrets reads them."""
    report_path = tmp_path / "spy.json"
    parent = (
        "import subprocess, sys; "
        f"p = subprocess.Popen([sys.executable, {str(SPY)!r}, {str(report_path)!r}], "
        "stdin=subprocess.PIPE, stdout=subprocess.DEVNULL); "
        f"import time, os\nwhile not os.path.exists({str(report_path)!r}): time.sleep(0.05)\n"
        "p.kill(); p.wait()"
    )
    subprocess.run(
        [*unprivileged(), sys.executable, "-c", parent],
        env=engine_environment(tmp_path),
        check=True,
        timeout=30,
    )
    report = json.loads(report_path.read_text())
    assert "SEMO_API_TOKEN" in leaked(str(report["parent_environ"]))
    assert report["parent_mem_error"] is None


async def test_git_as_semo_runs_it_runs_no_planted_program(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Worktree add/list/remove, the persona (ls-files, update-index on a tracked file) and the
    hook settings (rev-parse, info/exclude): no hook, no fsmonitor ran, and git saw no secret.
    Control: plain git runs the very same hooks."""
    for name, value in ENGINE_SECRETS.items():
        monkeypatch.setenv(name, value)
    repo = make_repo(tmp_path / "repo")
    (repo / ".claude").mkdir()
    (repo / ".claude" / "CLAUDE.md").write_text("# the project's own instructions\n")
    git(repo, "add", ".claude/CLAUDE.md")
    git(repo, "commit", "-q", "-m", "project instructions")
    marker = tmp_path / "hook-ran.txt"
    plant_hooks(repo, marker)

    manager = WorktreeManager(repo, tmp_path / "ws")
    worktree = await manager.create("BE", "t1")
    injected = PersonaInjector(protocol="(protocol)").inject(worktree.path, claude_agent())
    assert injected.hidden_by == "skip-worktree"  # update-index ran on the tracked file
    install_hooks(worktree.path, ["semo", "hook"])
    await manager.list()
    await manager.remove(worktree, delete_branch=True)
    assert not marker.exists(), marker.read_text()[:2000]

    git(repo, "worktree", "add", "-q", str(tmp_path / "plain"))  # plain git, same repository
    ran = marker.read_text()
    assert "post-checkout" in ran and "SEMO_API_TOKEN" in ran  # what semo's git was spared


# -- the agent environment as a function ----------------------------------------------------------


def test_credential_names_are_scrubbed_and_the_claude_agent_keeps_its_own() -> None:
    env = {**ENGINE_SECRETS, **OPTED_IN, **KEPT, "PATH": "/bin", "HOME": "/h", "LANG": "C"}
    env |= {"SSH_AUTH_SOCK": "/tmp/ssh", "ANTHROPIC_AUTH_TOKEN": "t"}
    env["CLAUDE_CODE_OAUTH_TOKEN"] = "o"
    assert scrub(env) == {
        "PATH": "/bin",
        "HOME": "/h",
        "LANG": "C",
        "ANTHROPIC_API_KEY": KEPT["ANTHROPIC_API_KEY"],
        "ANTHROPIC_AUTH_TOKEN": "t",
        "CLAUDE_CODE_OAUTH_TOKEN": "o",
    }


def test_agents_env_names_pass_a_credential_but_never_an_engine_secret() -> None:
    source = {"GITHUB_TOKEN": "ghp", "SEMO_API_TOKEN": "no", "BOT": "bot-token"}
    values = agent_env_values(
        {
            "GITHUB_TOKEN": "${GITHUB_TOKEN}",  # the engine's own value
            "GH_TOKEN": "${BOT}",  # another variable's value
            "NPM_TOKEN": "${NPM_TOKEN}",  # the engine has none: not set
            "LEAK": "${SEMO_API_TOKEN}",  # dropped (config validation refuses it too)
            "SEMO_X": "y",  # dropped
            "TEXT": "a ${GITHUB_TOKEN} b",  # not a whole-value reference: as written
        },
        source,
    )
    assert values == {"GITHUB_TOKEN": "ghp", "GH_TOKEN": "bot-token", "TEXT": "a ${GITHUB_TOKEN} b"}


@pytest.mark.parametrize(
    "env",
    [{"SEMO_X": "y"}, {"SUPABASE_URL": "u"}, {"LEAK": "${SEMO_API_TOKEN}"}, {"K": "${supabase_x}"}],
)
def test_the_config_refuses_to_pass_an_engine_secret(env: dict[str, str]) -> None:
    with pytest.raises(ValidationError, match=r"never|not passed"):
        AgentConfig(role="BE", env=env)


# -- symlinks out of a worktree ---------------------------------------------------------------


def commit_symlink(repo: Path, rel: str, target: str) -> None:
    link = repo / rel
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    git(repo, "add", rel)
    git(repo, "commit", "-q", "-m", f"add {rel}")


@asynccontextmanager
async def manager_for(tmp_path: Path, repo: Path) -> AsyncIterator[SessionManager]:
    runtime = Path(tempfile.mkdtemp(prefix="semo-sec-"))  # short: it holds a unix socket
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path / "home")}
    worktrees = WorktreeManager(repo, tmp_path / "ws")
    try:
        async with SessionManager(agent_env=env, worktrees=worktrees, runtime_dir=runtime) as m:
            yield m
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


def claude_agent(role: str = "BE") -> Agent:
    # the command never runs: the session fails while its folder is prepared
    return Agent(office_id="office", name=role, role=role, command=["claude", "--version"])


@pytest.mark.parametrize(
    ("rel", "target", "error"),
    [
        (".claude/settings.local.json", "{outside}/victim.json", HookSettingsError),
        (".claude/CLAUDE.md", "{outside}/victim.json", PersonaError),
        (".claude", "{outside}", PersonaError),
    ],
)
async def test_a_committed_symlink_out_of_the_worktree_fails_the_session(
    tmp_path: Path, rel: str, target: str, error: type[Exception]
) -> None:
    """The session does not start, its error says why, and the file outside is untouched."""
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.json"
    victim.write_text('{"mine": true}\n')
    repo = make_repo(tmp_path / "repo")
    commit_symlink(repo, rel, target.format(outside=outside))
    async with manager_for(tmp_path, repo) as manager:
        with pytest.raises(error, match="outside the worktree"):
            await manager.create(claude_agent(), task_id="t1")
        assert manager.sessions == {}
    assert victim.read_text() == '{"mine": true}\n'
    assert sorted(p.name for p in outside.iterdir()) == ["victim.json"]


async def test_a_symlink_that_stays_inside_the_worktree_is_followed(tmp_path: Path) -> None:
    """A project's `.claude/CLAUDE.md -> ../AGENTS.md` keeps working: semo's section goes into
    AGENTS.md, inside the worktree."""
    repo = make_repo(tmp_path / "repo")
    (repo / "AGENTS.md").write_text("# project notes\n")
    git(repo, "add", "AGENTS.md")
    commit_symlink(repo, ".claude/CLAUDE.md", "../AGENTS.md")
    worktree = await WorktreeManager(repo, tmp_path / "ws").create("BE", "t1")
    result = PersonaInjector(protocol="(protocol)").inject(worktree.path, claude_agent())
    assert result.path == worktree.path / "AGENTS.md"
    assert (worktree.path / ".claude" / "CLAUDE.md").is_symlink()
    text = (worktree.path / "AGENTS.md").read_text()
    assert text.startswith("# project notes\n") and "(protocol)" in text


def test_a_fifo_in_place_of_the_settings_file_is_refused_without_blocking(tmp_path: Path) -> None:
    """An agent of a reused worktree left a FIFO there: opening it for reading would wait
    for a writer forever; semo refuses it at once."""
    worktree = tmp_path / "wt"
    (worktree / ".claude").mkdir(parents=True)
    os.mkfifo(worktree / SETTINGS_RELPATH)
    with pytest.raises(HookSettingsError, match="not a regular file"):
        install_hooks(worktree, ["semo", "hook"], exclude_from_git=False)


def test_info_exclude_planted_as_a_symlink_is_not_followed(tmp_path: Path) -> None:
    """The shared .git is the agents' too: `.git/info/exclude -> ~/.bashrc` must not make semo
    append to the operator's file."""
    repo = make_repo(tmp_path / "repo")
    victim = tmp_path / "bashrc"
    victim.write_text("echo hi\n")
    exclude = repo / ".git" / "info" / "exclude"
    exclude.unlink()
    exclude.symlink_to(victim)
    with pytest.raises(UnsafePathError, match="outside the repository's git folder"):
        install_hooks(repo, ["semo", "hook"])
    assert victim.read_text() == "echo hi\n"


def test_a_folder_swapped_for_a_symlink_after_the_check_is_not_followed(tmp_path: Path) -> None:
    """write_text_in resolves the path, then opens every folder without following symlinks:
    a folder replaced by a symlink in between is refused, not followed."""
    root = tmp_path / "wt"
    (root / ".claude").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    checked = contained_path(root, ".claude/settings.local.json")
    (root / ".claude").rmdir()
    (root / ".claude").symlink_to(outside)  # the swap, after the check
    opening = open_folder(checked.parent, create_under=None)
    with pytest.raises(UnsafePathError, match="symlink"), opening:
        pass
    assert list(outside.iterdir()) == []


# -- file modes ---------------------------------------------------------------------------------


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_semo_init_writes_the_config_0600_also_over_a_readable_one(tmp_path: Path) -> None:
    semo = str(SEMO)
    env = {**os.environ, "PYTHONPATH": str(SOURCE)}
    subprocess.run([semo, "init", f"{tmp_path}/a/"], check=True, env=env, capture_output=True)
    assert mode(tmp_path / "a" / "semo.toml") == 0o600
    (tmp_path / "b.toml").write_text("x = 1\n")
    (tmp_path / "b.toml").chmod(0o644)
    command = [semo, "init", "--force", str(tmp_path / "b.toml")]
    subprocess.run(command, check=True, env=env, capture_output=True)
    assert mode(tmp_path / "b.toml") == 0o600


async def test_the_sqlite_store_and_its_state_folder_are_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    async with SqliteStore() as store:  # the default place: $XDG_STATE_HOME/semo/semo.db
        await store.list_offices()
        folder = tmp_path / "state" / "semo"
        files = sorted(p.name for p in folder.iterdir())
        assert files == ["semo.db", "semo.db-shm", "semo.db-wal"]  # WAL mode: all three
        assert {name: mode(folder / name) for name in files} == dict.fromkeys(files, 0o600)
        assert mode(folder) == 0o700


async def test_a_readable_database_of_an_older_semo_is_made_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    folder = tmp_path / "state" / "semo"
    async with SqliteStore():
        pass
    folder.chmod(0o755)
    for name in ("semo.db", "semo.db-wal", "semo.db-shm"):
        path = folder / name
        if path.exists():
            path.chmod(0o644)
    async with SqliteStore() as store:
        await store.list_offices()
        assert mode(folder) == 0o700
        assert {p.name: mode(p) for p in folder.iterdir()} == {
            "semo.db": 0o600,
            "semo.db-wal": 0o600,
            "semo.db-shm": 0o600,
        }


def test_the_console_log_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from semo.console.launch import console_log_path

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "state" / "semo").mkdir(parents=True, mode=0o755)
    path = console_log_path()
    assert path == tmp_path / "state" / "semo" / "console.log"
    assert mode(path) == 0o600 and mode(path.parent) == 0o700


async def test_an_engine_s_database_in_the_office_folder_is_0600(tmp_path: Path) -> None:
    """`sqlite_path = "semo.db"` beside semo.toml: the file and its WAL are private, the
    operator's folder keeps its mode."""
    make_repo(tmp_path / "repo")
    os.chmod(tmp_path, 0o755)
    report_path = tmp_path / "spy.json"
    command = json.dumps([sys.executable, str(SPY), str(report_path)])
    config = tmp_path / "semo.toml"
    config.write_text(CONFIG.format(command=command))
    async with engine_process(config) as engine:
        await report_of(report_path, engine)
        names = ("semo.db", "semo.db-wal", "semo.db-shm")
        assert {n: mode(tmp_path / n) for n in names} == dict.fromkeys(names, 0o600)
    assert mode(tmp_path) == 0o755
