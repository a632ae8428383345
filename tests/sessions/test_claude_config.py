"""ensure_trusted / forget on real files: only semo's keys change, everything else survives,
concurrent writers (threads, processes, a CLI-like writer honouring Claude Code's lock) lose
nothing, and a malformed file is an error that leaves it untouched."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from semo.engine.agents.claude import trust as claude_config
from semo.engine.agents.claude.trust import (
    ClaudeConfigBusy,
    ClaudeConfigError,
    claude_config_path,
    ensure_trusted,
    ensure_trusted_async,
    forget,
    owned_projects,
    project_key,
)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def config_of(home: Path) -> dict[str, Any]:
    return json.loads((home / ".claude.json").read_text())


def worktree(tmp_path: Path, name: str) -> Path:
    path = tmp_path / "ws" / name
    path.mkdir(parents=True, exist_ok=True)
    return path


RICH: dict[str, Any] = {
    "numStartups": 42,
    "installMethod": "native",
    "autoUpdates": False,
    "theme": "dark",
    "userID": "a" * 64,
    "oauthAccount": {"accountUuid": "u-1", "emailAddress": "me@example.com", "extra": None},
    "tipsHistory": {"new-user-warmup": 3},
    "bigNumber": 12345678901234567890123,
    "smallFloat": 1e-7,
    "aFloat": 0.1,
    "negZero": -0.0,
    "unicode": "한국어 ✓ \u2028 \U0001f600",
    "someFutureKey": {"nested": [1, "two", {"three": [True, None]}]},
    "projects": {
        "/home/me/src/app": {
            "allowedTools": ["Bash(npm test)"],
            "hasTrustDialogAccepted": False,
            "lastCost": 0.25,
        },
        "/home/me/src/lib": {"hasTrustDialogAccepted": True},
    },
    "hasCompletedOnboarding": False,
    "zzzLastKey": "stays last",
}


# -- basics ------------------------------------------------------------------------------------


def test_fresh_home_gets_exactly_the_three_keys(home: Path, tmp_path: Path) -> None:
    wt = worktree(tmp_path, "FE-1")
    assert ensure_trusted(wt, home=home) is True
    path = home / ".claude.json"
    assert config_of(home) == {
        "hasCompletedOnboarding": True,
        "hasSeenAutoDefaultNudge": True,
        "projects": {os.path.realpath(wt): {"hasTrustDialogAccepted": True}},
    }
    assert path.stat().st_mode & 0o777 == 0o600  # it will hold the user's account
    assert owned_projects(home=home) == [os.path.realpath(wt)]

    before, stamp = path.read_bytes(), path.stat().st_mtime_ns
    assert ensure_trusted(wt, home=home) is False  # already set: nothing written
    assert path.read_bytes() == before and path.stat().st_mtime_ns == stamp
    assert not (home / ".claude.json.lock").exists()  # the CLI's lock was released


def test_unknown_keys_other_projects_and_order_are_kept(home: Path, tmp_path: Path) -> None:
    path = home / ".claude.json"
    path.write_text(json.dumps(RICH, indent=2, ensure_ascii=False))
    os.chmod(path, 0o640)
    wt = worktree(tmp_path, "BE-1")

    assert ensure_trusted(wt, home=home) is True
    after = json.loads(path.read_text())
    expected = json.loads(json.dumps(RICH))
    expected["hasCompletedOnboarding"] = True
    expected["hasSeenAutoDefaultNudge"] = True
    expected["projects"][project_key(wt)] = {"hasTrustDialogAccepted": True}
    assert after == expected
    assert list(after) == [*RICH, "hasSeenAutoDefaultNudge"]  # key order kept, one flag added
    assert list(after["projects"])[:2] == ["/home/me/src/app", "/home/me/src/lib"]
    assert after["bigNumber"] == 12345678901234567890123
    assert after["projects"]["/home/me/src/app"]["hasTrustDialogAccepted"] is False
    assert path.stat().st_mode & 0o777 == 0o640
    assert not path.read_text().endswith("\n")  # like the original (and the CLI)


def test_existing_entry_gets_only_the_trust_key_and_is_not_semos(
    home: Path, tmp_path: Path
) -> None:
    wt = worktree(tmp_path, "QA-1")
    key = project_key(wt)
    path = home / ".claude.json"
    mine = {"allowedTools": ["Read"], "hasTrustDialogAccepted": False, "history": [{"d": "x"}]}
    path.write_text(json.dumps({"projects": {key: mine}}) + "\n")
    assert ensure_trusted(wt, home=home)
    assert config_of(home)["projects"][key] == {**mine, "hasTrustDialogAccepted": True}
    assert path.read_text().endswith("\n")
    assert owned_projects(home=home) == []
    assert forget(wt, home=home) is False  # the user's entry: never deleted
    assert key in config_of(home)["projects"]


def test_forget_removes_only_what_semo_created(home: Path, tmp_path: Path) -> None:
    path = home / ".claude.json"
    path.write_text(json.dumps(RICH))
    ours, theirs = worktree(tmp_path, "ours"), worktree(tmp_path, "theirs")
    ensure_trusted(ours, home=home)
    # the CLI, having run there, adds its own keys to semo's entry
    data = config_of(home)
    data["projects"][project_key(ours)]["lastCost"] = 1.5
    data["projects"][project_key(theirs)] = {"hasTrustDialogAccepted": True}  # the user's
    path.write_text(json.dumps(data))

    assert forget(theirs, home=home) is False
    assert forget(ours, home=home) is True
    after = config_of(home)
    assert project_key(ours) not in after["projects"]
    assert project_key(theirs) in after["projects"]
    assert after["oauthAccount"] == RICH["oauthAccount"]
    assert owned_projects(home=home) == []
    assert not (home / ".claude.json.semo-owned.json").exists()
    assert forget(ours, home=home) is False


def test_worktree_key_is_the_resolved_path(home: Path, tmp_path: Path) -> None:
    real = worktree(tmp_path, "real")
    link = tmp_path / "link"
    link.symlink_to(real)
    ensure_trusted(link, home=home)
    assert list(config_of(home)["projects"]) == [os.path.realpath(real)]


def test_symlinked_config_file_stays_a_symlink(home: Path, tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "claude.json").write_text(json.dumps({"theme": "light"}))
    (home / ".claude.json").symlink_to(dotfiles / "claude.json")
    ensure_trusted(worktree(tmp_path, "x"), home=home)
    assert (home / ".claude.json").is_symlink()
    assert json.loads((dotfiles / "claude.json").read_text())["theme"] == "light"
    assert json.loads((dotfiles / "claude.json").read_text())["hasCompletedOnboarding"] is True


async def test_async_variant(home: Path, tmp_path: Path) -> None:
    assert await ensure_trusted_async(worktree(tmp_path, "a"), home=home) is True


# -- which file --------------------------------------------------------------------------------


def test_config_path_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "h"
    home.mkdir()
    assert claude_config_path(home, env={"CLAUDE_CONFIG_DIR": "/x"}) == home / ".claude.json"
    assert claude_config_path(env={"CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}) == (
        tmp_path / "cfg" / ".claude.json"
    )
    monkeypatch.setenv("HOME", str(home))
    assert claude_config_path(env={}) == home / ".claude.json"

    # a legacy ~/.claude/.config.json is what the CLI uses while .claude.json is missing
    legacy = home / ".claude" / ".config.json"
    legacy.parent.mkdir()
    legacy.write_text('{"theme": "dark"}')
    assert claude_config_path(home) == legacy
    (home / ".claude.json").write_text("{}")
    assert claude_config_path(home) == home / ".claude.json"


def test_claude_config_dir_is_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "cfg"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(cfg))
    wt = worktree(tmp_path, "w")
    assert ensure_trusted(wt)
    assert json.loads((cfg / ".claude.json").read_text())["projects"] == {
        project_key(wt): {"hasTrustDialogAccepted": True}
    }


# -- malformed files ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"theme": "dark",', "not valid JSON"),
        (b'{"a": 1} trailing', "not valid JSON"),
        (b'{"a": NaN}', "not valid JSON"),
        (b'{"a": 1e999}', "not valid JSON"),
        (b"[1, 2]", "expected a JSON object, found list"),
        (b"", "is empty"),
        (b"  \n", "is empty"),
        (b'{"a": "\xff"}', "not UTF-8"),
        (b'{"projects": []}', '"projects" is a list'),
        (b'{"projects": {"KEY": "yes"}}', "is not an object"),
    ],
)
def test_malformed_file_is_an_error_and_left_alone(
    home: Path, tmp_path: Path, content: bytes, message: str
) -> None:
    wt = worktree(tmp_path, "w")
    content = content.replace(b"KEY", project_key(wt).encode())
    path = home / ".claude.json"
    path.write_bytes(content)
    stamp = path.stat().st_mtime_ns
    with pytest.raises(ClaudeConfigError, match=message) as info:
        ensure_trusted(wt, home=home)
    assert str(path) in str(info.value)
    assert path.read_bytes() == content and path.stat().st_mtime_ns == stamp
    assert [p.name for p in home.iterdir() if p.name.endswith(".tmp")] == []
    assert not (home / ".claude.json.lock").exists()


# -- Claude Code's lock ------------------------------------------------------------------------


def cli_style_write(path: Path, change: dict[str, Any]) -> None:
    """What Claude Code's saveConfigWithLock does: mkdir the lock, re-read, rename a temp file
    over the config, rmdir the lock."""
    lock = Path(str(path) + ".lock")
    while True:
        try:
            lock.mkdir()
            break
        except FileExistsError:
            time.sleep(0.001)
    try:
        data = json.loads(path.read_text()) if path.exists() else {}
        data.update(change)
        tmp = path.with_name(f".{path.name}.cli-{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(data, indent=2))
        os.replace(tmp, path)
    finally:
        lock.rmdir()


def test_waits_for_the_cli_lock_and_keeps_the_clis_write(home: Path, tmp_path: Path) -> None:
    path = home / ".claude.json"
    path.write_text(json.dumps({"theme": "dark"}))
    lock = home / ".claude.json.lock"
    lock.mkdir()  # a running claude is saving
    wt = worktree(tmp_path, "w")
    done = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            ensure_trusted(wt, home=home)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        done.set()

    thread = threading.Thread(target=run)
    thread.start()
    assert not done.wait(0.3), "semo wrote while the CLI held its lock"
    data = json.loads(path.read_text())
    data["numStartups"] = 7  # the CLI's save, under its lock
    path.write_text(json.dumps(data))
    lock.rmdir()
    assert done.wait(10)
    thread.join()
    assert not errors
    after = config_of(home)
    assert after["numStartups"] == 7 and after["theme"] == "dark"
    assert after["projects"][project_key(wt)] == {"hasTrustDialogAccepted": True}


def test_stale_cli_lock_is_taken_over(home: Path, tmp_path: Path) -> None:
    lock = home / ".claude.json.lock"
    lock.mkdir()
    old = time.time() - 60
    os.utime(lock, (old, old))  # a claude that died holding it
    assert ensure_trusted(worktree(tmp_path, "w"), home=home)
    assert not lock.exists()


def test_busy_cli_lock_times_out_without_writing(home: Path, tmp_path: Path) -> None:
    path = home / ".claude.json"
    path.write_text("{}")
    lock = home / ".claude.json.lock"
    lock.mkdir()
    with pytest.raises(ClaudeConfigBusy, match="is held"):
        ensure_trusted(worktree(tmp_path, "w"), home=home, lock_timeout=0.2)
    assert path.read_text() == "{}" and lock.is_dir()


def test_a_write_between_read_and_replace_is_not_overwritten(home: Path) -> None:
    """A writer that ignores every lock changes the file right after semo read it: semo notices
    before replacing, and starts over from the new content."""
    path = home / ".claude.json"
    path.write_text(json.dumps({"theme": "dark"}))
    calls = 0

    def update(config: dict[str, Any]) -> bool:
        nonlocal calls
        calls += 1
        if calls == 1:  # semo has read; the foreign write lands now
            path.write_text(json.dumps({"theme": "dark", "foreign": True}))
        config["semo"] = True
        return True

    assert claude_config._update_config(path, update, lock_timeout=1)
    assert calls == 2
    assert config_of(home) == {"theme": "dark", "foreign": True, "semo": True}


# -- concurrent writers ------------------------------------------------------------------------


def test_threads_lose_no_update(home: Path, tmp_path: Path) -> None:
    path = home / ".claude.json"
    path.write_text(json.dumps(RICH))
    n_threads, per_thread = 8, 12
    trees = [[worktree(tmp_path, f"t{t}-{i}") for i in range(per_thread)] for t in range(n_threads)]
    barrier = threading.Barrier(n_threads + 1)
    errors: list[BaseException] = []

    def semo_writer(paths: list[Path]) -> None:
        barrier.wait()
        try:
            for p in paths:
                ensure_trusted(p, home=home)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    cli_keys = [f"cliKey{i}" for i in range(40)]

    def cli_writer() -> None:  # a running claude saving its own keys meanwhile
        barrier.wait()
        for key in cli_keys:
            cli_style_write(path, {key: True})

    threads = [threading.Thread(target=semo_writer, args=(paths,)) for paths in trees]
    threads.append(threading.Thread(target=cli_writer))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    after = config_of(home)
    expected = {project_key(p) for paths in trees for p in paths}
    assert expected <= set(after["projects"])
    assert all(after["projects"][k] == {"hasTrustDialogAccepted": True} for k in expected)
    assert all(after[k] is True for k in cli_keys)
    assert after["oauthAccount"] == RICH["oauthAccount"]
    assert set(owned_projects(home=home)) == expected


def _process_writer(home: str, paths: list[str]) -> int:
    for p in paths:
        ensure_trusted(Path(p), home=Path(home))
    return len(paths)


def test_processes_lose_no_update(home: Path, tmp_path: Path) -> None:
    (home / ".claude.json").write_text(json.dumps(RICH))
    groups = [[str(worktree(tmp_path, f"p{g}-{i}")) for i in range(10)] for g in range(4)]
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=4, mp_context=ctx) as pool:
        done = list(pool.map(_process_writer, [str(home)] * len(groups), groups))
    assert done == [10] * 4
    after = config_of(home)
    expected = {project_key(Path(p)) for g in groups for p in g}
    assert expected <= set(after["projects"])
    assert set(owned_projects(home=home)) == expected
    for p in [p for g in groups for p in g][:20]:
        forget(Path(p), home=home)
    assert len(owned_projects(home=home)) == 20
    assert after["numStartups"] == RICH["numStartups"]
