"""`semo console`'s fast start (issue 14): the remembered socket, the connection made in a thread
while Textual loads, and the fallbacks when either is wrong.

- A config's target (its office's socket) is remembered under a fingerprint of the file and the
  environment: a changed file or store variable forgets it; no secret is written.
- An `EngineClient` takes over a `Preconnect`'s connection to a real engine: the snapshot's
  sessions are there, screens arrive after attach, later requests get their replies.
- A `Preconnect` to a socket nobody serves says so; the client then connects itself.
- A real `semo console` whose remembered socket is stale (another office's, nothing there)
  still reaches the running engine (the full config load) and remembers the right socket.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from semo.console.targets import CACHE_NAME, Target, cached_target, remember_target
from semo.engine.control.client import EngineClient, EngineNotRunning, Preconnect
from semo.engine.engine import Engine
from tests.control.office import CONFIG, Console, Office, consoles, engine_in_process
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(120)


def _target(folder: Path) -> Target:
    return Target("ctl", folder / "s.sock", folder / "s.json", folder / "s.log", "ctrl+b")


def test_a_target_is_remembered_until_the_config_or_the_environment_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("SEMO_STORE", raising=False)
    monkeypatch.setenv("SEMO_DATABASE_URL", "postgresql://u:hunter2secret@db.example/x")
    config = tmp_path / "semo.toml"
    config.write_text(CONFIG)
    assert cached_target(config) is None
    remember_target(config, _target(tmp_path))
    assert cached_target(config) == _target(tmp_path)

    cache = tmp_path / "state" / "semo" / CACHE_NAME
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    assert "hunter2secret" not in cache.read_text()

    monkeypatch.setenv("SEMO_STORE", "postgres")  # the store moves: so does the socket
    assert cached_target(config) is None
    monkeypatch.delenv("SEMO_STORE")
    assert cached_target(config) == _target(tmp_path)

    config.write_text(CONFIG.replace('name = "ctl"', 'name = "other"'))
    assert cached_target(config) is None
    config.unlink()
    assert cached_target(config) is None


def test_a_damaged_cache_is_no_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    config = tmp_path / "semo.toml"
    config.write_text(CONFIG)
    remember_target(config, _target(tmp_path))
    cache = tmp_path / "state" / "semo" / CACHE_NAME
    entries = json.loads(cache.read_text())
    del entries[str(config.absolute())]["socket"]
    cache.write_text(json.dumps(entries))
    assert cached_target(config) is None
    cache.write_text("not json")
    assert cached_target(config) is None
    remember_target(config, _target(tmp_path))  # written over
    assert cached_target(config) == _target(tmp_path)


@pytest.fixture
async def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Engine]:
    async with engine_in_process(tmp_path, monkeypatch) as engine:
        yield engine


async def test_a_client_takes_over_the_connection_made_before_the_loop(engine: Engine) -> None:
    assert engine.control is not None
    paths = engine.control.paths
    preconnect = Preconnect(paths.socket, paths.office)
    assert await asyncio.to_thread(preconnect.greeted)
    client = EngineClient(paths, preconnect=preconnect)
    await client.start()
    try:
        assert client.gone is None and client.pid == os.getpid()
        assert client.office is not None and client.office.name == "ctl"
        assert sorted(s.role for s in client.sessions()) == ["A", "B"]
        assert sorted(client.agents) == ["A", "B"] and client.agents["A"].id
        pool = client.pool_status()
        assert pool is not None and pool.max_sessions == 4
        terminal = next(s for s in client.sessions() if s.role == "A").terminal
        terminal.add_listener(lambda _chunk: None)  # attach: the screen follows
        await eventually(lambda: "$" in "".join(terminal.screen.text_rows()), 20)
        terminal.write("echo taken-$((6*7))\r")
        await eventually(lambda: "taken-42" in "".join(terminal.screen.text_rows()), 20)
        assert (await client.request({"op": "ping"}))["consoles"] >= 1
    finally:
        await client.close()


async def test_a_preconnect_to_no_engine_says_so_and_the_client_connects_itself(
    tmp_path: Path,
) -> None:
    socket = Path(tempfile.mkdtemp(prefix="semo-st-")) / "none.sock"
    preconnect = Preconnect(socket, "ctl")
    assert not await asyncio.to_thread(preconnect.greeted)
    client = EngineClient(_target(socket.parent), preconnect=preconnect)
    with pytest.raises(EngineNotRunning):
        await client.start()
    shutil.rmtree(socket.parent, ignore_errors=True)


def test_a_stale_remembered_socket_falls_back_to_the_config(tmp_path: Path) -> None:
    office = Office(tmp_path)
    try:
        with consoles() as opened:  # starts the engine in the background, remembers its socket
            opened.append(Console(office, "console", "--config", "semo.toml"))
            opened[0].wait(lambda s: "A " in s and "B " in s, "the sessions")
            opened[0].kill()
        cache = tmp_path / "state" / "semo" / CACHE_NAME
        entries = json.loads(cache.read_text())
        [entry] = entries.values()
        right = entry["socket"]
        entry["socket"] = str(office.runtime / "semo" / "control-stale.sock")
        cache.write_text(json.dumps(entries))
        with consoles() as opened:
            opened.append(Console(office, "console", "--config", "semo.toml"))
            opened[0].wait(lambda s: "A " in s and "B " in s and "#1" in s, "the sessions")
        [entry] = json.loads(cache.read_text()).values()
        assert entry["socket"] == right
    finally:
        office.cleanup()


async def test_a_socket_served_by_another_uid_is_never_used(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine serving the socket runs as this test's uid; the client is made to believe it
    runs as another one (the only way to have a foreign peer without root)."""
    import semo.engine.control.client as client_module

    assert engine.control is not None
    paths = engine.control.paths
    other = os.getuid() + 1
    monkeypatch.setattr(client_module.os, "getuid", lambda: other)
    preconnect = Preconnect(paths.socket, paths.office)
    assert await asyncio.to_thread(preconnect.greeted)  # something answers...
    client = EngineClient(paths, preconnect=preconnect)
    with pytest.raises(EngineNotRunning, match="served by uid"):  # ...but not ours
        await client.start()
    assert client.gone is not None
