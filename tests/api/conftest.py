"""A live office for the API tests: a real Engine and the API server, on their own loop.

`live_factory(roles, warm, backend)` starts, in a background thread with its own asyncio loop,
an Engine (a fresh store: an SQLite file, a fresh Postgres database, or Supabase through the
emulator; `generic` agents, each session started in a temporary folder) and the API on
127.0.0.1 with an ephemeral port, on its own connection to the same store as
`semo engine --http` does. Tests talk to it over HTTP (httpx) and reach its
store through `Live.run(coro)`, which runs a coroutine on the live loop.

Offices and tokens: `api-test` (the engine's, TOKEN), `other` (a second office in the same
store that no engine serves, OTHER_TOKEN), `ghost` (a token for an office that is not in the
store, GHOST_TOKEN).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import shutil
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from pydantic import SecretStr

from semo.engine.api.server import ApiServer
from semo.engine.api.settings import ApiSettings
from semo.engine.config import AgentConfig, EngineConfig, OfficeConfig, PoolConfig, SemoConfig
from semo.engine.engine import Engine
from semo.engine.store.base import Store
from semo.engine.store.models import Office
from semo.engine.store.sqlite import SqliteStore
from tests.support.waiting import eventually_value

T = TypeVar("T")

TOKEN = "api-test-token-0123456789abcdef"
OTHER_TOKEN = "other-office-token-0123456789ab"
GHOST_TOKEN = "ghost-office-token-0123456789ab"
OFFICE = "api-test"
ECHO_AGENT = Path(__file__).with_name("echo_agent.py")
START_TIMEOUT = 30.0

AGENTS = {
    "SH": AgentConfig(
        role="SH",
        profile="generic",
        command=["bash", "--norc", "--noprofile", "-i"],
        env={"PS1": "$ "},
        cols=80,
        rows=24,
    ),
    "ECHO": AgentConfig(
        role="ECHO", profile="generic", command=[sys.executable, str(ECHO_AGENT)], cols=80, rows=24
    ),
}


@dataclass
class Live:
    url: str
    engine: Engine
    other: Office
    loop: asyncio.AbstractEventLoop
    folder: Path
    server: ApiServer
    headers: dict[str, str] = field(default_factory=lambda: auth(TOKEN))

    @property
    def office_id(self) -> str:
        return self.engine.office_id

    def base(self, office: str | None = None) -> str:
        return f"{self.url}/api/offices/{office or self.office_id}"

    def run_sync(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """Run `coro` on the live loop, from a thread that is not that loop's."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """Run `coro` on the live loop, from a test's own loop."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return await asyncio.wait_for(asyncio.wrap_future(future), timeout)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _config(folder: Path, roles: list[str], warm: list[str]) -> SemoConfig:
    return SemoConfig(
        office=OfficeConfig(name=OFFICE, repository=folder, workspace_root=folder / "ws"),
        store={"backend": "sqlite", "sqlite_path": folder / "semo.db"},
        engine=EngineConfig(id="api-test-engine", command_timeout=10, shutdown_grace=1),
        pool=PoolConfig(max_sessions=4, warm_roles=warm, idle_timeout=600),
        agents=[AGENTS[role] for role in roles],
    )


@asynccontextmanager
async def store_maker(backend: str, folder: Path) -> AsyncIterator[Callable[[], Store]]:
    """Makes stores (not yet open) on one fresh database of `backend`: sqlite (a file in
    `folder`), postgres (a fresh migrated database) or supabase (the emulator over one)."""
    if backend == "sqlite":
        yield lambda: SqliteStore(folder / "semo.db")
        return
    from semo.engine.store.migrate import migrate
    from semo.engine.store.postgres import PostgresStore
    from semo.engine.store.supabase import SupabaseStore
    from tests.store.conftest import emulated_supabase, fresh_database

    if backend == "postgres":
        async with fresh_database() as dsn:
            await migrate(dsn)
            yield lambda: PostgresStore(dsn)
        return
    async with emulated_supabase() as (_, emulator):
        yield lambda: SupabaseStore(emulator.url, emulator.service_role_key)


@dataclass
class _Runner:
    """The live loop's thread: start, then wait for `stop`, then tear down."""

    folder: Path
    runtime: Path
    roles: list[str]
    warm: list[str]
    settings: dict[str, Any]
    backend: str = "sqlite"
    poll_interval: float = 0.1
    ready: concurrent.futures.Future[Live] = field(default_factory=concurrent.futures.Future)
    stop: asyncio.Event | None = None

    def thread(self) -> None:
        asyncio.run(self.main())

    async def main(self) -> None:
        self.stop = asyncio.Event()
        try:
            async with store_maker(self.backend, self.folder) as make_store:
                await self.serve(make_store)
        except BaseException as error:
            if not self.ready.done():
                self.ready.set_exception(error)
            raise

    async def serve(self, make_store: Callable[[], Store]) -> None:
        assert self.stop is not None
        config = _config(self.folder, self.roles, self.warm)
        work = self.folder / "work"
        work.mkdir()
        engine = Engine(
            config,
            store=make_store(),
            runtime_dir=self.runtime,
            folder_for=lambda agent, task: work,
        )
        api_store = make_store()
        server: ApiServer | None = None
        try:
            await engine.store.open()
            await engine.start()
            # The engine's router and dispatcher wait on the same store instance, whose
            # wait_for_change reports each change to one of them only: a command whose wake-up
            # the router took is claimed at the dispatcher's next poll (5 s by default). Poll
            # faster here so the tests do not wait on it (see docs/API.md, "Latency").
            assert engine.dispatcher is not None
            engine.dispatcher.poll_interval = self.poll_interval
            other = await engine.store.create_office(Office(name="other"))
            await api_store.open()
            tokens = {
                OFFICE: SecretStr(TOKEN),
                "other": SecretStr(OTHER_TOKEN),
                "ghost": SecretStr(GHOST_TOKEN),
            }
            server = ApiServer(api_store, ApiSettings(tokens=tokens, **self.settings))
            await server.start("127.0.0.1", 0)
            live = Live(
                url=server.url,
                engine=engine,
                other=other,
                loop=asyncio.get_running_loop(),
                folder=self.folder,
                server=server,
            )
            self.ready.set_result(live)
            await self.stop.wait()
        finally:
            if server is not None:
                await server.stop()
            await api_store.close()
            await engine.stop("test over")
            await engine.store.close()


@pytest.fixture(scope="module")
def live_factory() -> Iterator[Any]:
    """live_factory(roles, warm, backend="sqlite", **api_settings) -> Live; everything stops
    after the module."""
    started: list[tuple[_Runner, threading.Thread, Path, Path]] = []

    def start(roles: list[str], warm: list[str], backend: str = "sqlite", **settings: Any) -> Live:
        folder = Path(tempfile.mkdtemp(prefix="semo-api-"))
        runtime = Path(tempfile.mkdtemp(prefix="semo-rt-"))  # short: Unix socket paths
        runner = _Runner(folder, runtime, roles, warm, settings, backend)
        thread = threading.Thread(target=runner.thread, name="semo-live-office", daemon=True)
        thread.start()
        started.append((runner, thread, folder, runtime))
        return runner.ready.result(START_TIMEOUT)

    try:
        yield start
    finally:
        for runner, thread, folder, runtime in started:
            if runner.ready.done() and runner.ready.exception() is None and runner.stop:
                live = runner.ready.result()
                live.loop.call_soon_threadsafe(runner.stop.set)
            thread.join(30)
            shutil.rmtree(folder, ignore_errors=True)
            shutil.rmtree(runtime, ignore_errors=True)


async def wait_ready(live: Live, role: str, timeout: float = 20.0) -> str:
    """The id of a ready session of `role` (the warm one), waiting for it."""

    async def probe() -> str | None:
        for session in live.engine.sessions():
            if session.role == role and str(session.state) == "ready":
                return session.session_id
        return None

    return await eventually_value(lambda: live.run(probe()), f"a ready {role} session", timeout)
