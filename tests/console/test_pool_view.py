"""The pool view (F9) over a real engine (scripted agents in real PTYs, the sqlite store,
Textual's Pilot at the keyboard), on both implementations of the engine interface.

- F9 opens it from the main screen: the warm sessions (warm, idle), the configured role
  without a session (`no session`, "s starts one"), the summary line; s on that row starts a
  session of the role from the pool: it shows as cold and idle; Escape goes back.
- The palette's "Pool" opens it too; the keys help names F9.
- The notes: an open breaker with its failures and retry time, requests waiting for a
  session by role and job (the PoolStatus JSON both engines read).
"""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable

from semo.console.keys_help import KeysHelp
from semo.console.pool_text import pool_notes, pool_rows, pool_summary
from semo.console.screens.main import MainScreen
from semo.console.screens.pool import PoolScreen
from semo.console.widgets.key_bar import KeyBar
from semo.engine.interface import pool_view
from tests.console.console_snapshot_app import console_engine
from tests.support.console_app import runtime_dir_fixture, waiter
from tests.support.console_engines import console_on, engine_kind_fixture
from tests.support.console_jobs import run_palette

SCRIPTS: dict[str, list[object]] = {"FE": [], "BE": [], "QA": []}

runtime_dir = runtime_dir_fixture("semo-pool-")
engine_kind = engine_kind_fixture()
wait_for = waiter(20.0)


def rows(screen: PoolScreen) -> list[list[str]]:
    table = screen.query_one("#pool-list", DataTable)
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


async def test_the_pool_view_shows_the_pool_and_starts_a_missing_role(
    tmp_path: Path, runtime_dir: Path, engine_kind: str
) -> None:
    engine = console_engine(
        tmp_path,
        runtime_dir,
        scripts=SCRIPTS,
        control=engine_kind == "client",
        warm_roles=["FE", "BE"],
    )
    async with console_on(engine_kind, engine) as app, app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: getattr(app.screen, "started", False), "the engine")
        main = app.screen
        assert isinstance(main, MainScreen)
        await wait_for(lambda: len(main.order) == 2, "the two warm sessions")
        await pilot.press("f9")
        await wait_for(lambda: isinstance(app.screen, PoolScreen), "the pool view")
        pool = app.screen
        assert isinstance(pool, PoolScreen)
        await wait_for(
            lambda: (
                [r[:4] for r in rows(pool)]
                == [
                    ["BE", "#1", "warm", "idle"],
                    ["FE", "#1", "warm", "idle"],
                    ["QA", "", "", "no session"],
                ]
            ),
            "two warm idle sessions, QA without one",
        )
        assert rows(pool)[2][5] == "s starts one"
        summary = str(pool.query_one("#pool-summary").render())
        assert "2/4 sessions · warm 2, cold 0 · leased 0, idle 2 · 0 waiting" in summary
        assert "nothing waiting" in pool.notes_text

        await pilot.press("down", "down", "s")
        await wait_for(
            lambda: any(r[0] == "QA" and r[2:4] == ["cold", "idle"] for r in rows(pool)),
            "QA's session, cold and idle",
        )
        assert not any(r[3] == "no session" for r in rows(pool))
        await pilot.press("escape")
        await wait_for(lambda: app.screen is main, "back to the sessions")
        await wait_for(lambda: len(main.order) == 3, "QA's session in the list")

        assert "F9 Pool" in str(main.query_one(KeyBar).render())
        await run_palette(app, pilot, "Pool")
        await wait_for(lambda: isinstance(app.screen, PoolScreen), "the pool from the palette")
        await pilot.press("escape")
        await wait_for(lambda: app.screen is main, "back again")
        await pilot.press("f1")
        await wait_for(lambda: isinstance(app.screen, KeysHelp), "the keys help")
        assert "F9" in app.export_screenshot()


def test_breakers_and_waiting_requests_are_named_with_their_times() -> None:
    status = pool_view(
        {
            "total": 2,
            "max_sessions": 2,
            "starting": 0,
            "sessions": {
                "s1": {
                    "role": "FE",
                    "warm": True,
                    "leased": True,
                    "task_id": "job-1a2b3c4d5e",
                    "age_s": 130.0,
                    "idle_s": None,
                },
                "s2": {
                    "role": "BE",
                    "warm": False,
                    "leased": False,
                    "task_id": None,
                    "age_s": 30.0,
                    "idle_s": 75.0,
                },
            },
            "down": {"QA": "QA's agent exited at start (exit 1)"},
            "breakers": {
                "QA": {"state": "open", "failures": 3, "retry_after_s": 41.6},
                "FE": {"state": "closed", "failures": 0, "retry_after_s": 0},
            },
            "waiters": [{"role": "BE", "task_id": "job-99887766aa", "waited_s": 12.0}],
        }
    )
    # warm first: FE's session before BE's cold one
    assert [r.cells for r in pool_rows(status, ["FE", "BE", "QA"], {"s1": "#1 Ada"})] == [
        ("FE", "#1 Ada", "warm", "leased", "2m", "job 1a2b3c4d"),
        ("BE", "s2", "cold", "idle", "<1m", "idle 1m"),
        ("QA", "", "warm", "no session", "", "QA's agent exited at start (exit 1)"),
    ]
    assert pool_notes(status) == [
        "breaker QA open: 3 failed starts, retry in 42 s",
        "waiting for BE: job 99887766 (<1m)",
    ]
    assert pool_summary(status) == ("2/2 sessions · warm 1, cold 1 · leased 1, idle 1 · 1 waiting")


async def test_an_eviction_is_announced_with_the_session_and_why(
    tmp_path: Path, runtime_dir: Path, engine_kind: str
) -> None:
    """A full office (2/2) starts QA: the pool ends BE's idle cold session for it, and the
    console says so (a warning naming BE #1 and why), from the session's terminated event."""
    engine = console_engine(
        tmp_path,
        runtime_dir,
        scripts=SCRIPTS,
        control=engine_kind == "client",
        warm_roles=["FE"],
        max_sessions=2,
    )
    async with console_on(engine_kind, engine) as app, app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: getattr(app.screen, "started", False), "the engine")
        main = app.screen
        assert isinstance(main, MainScreen)
        await pilot.press("f9")
        await wait_for(lambda: isinstance(app.screen, PoolScreen), "the pool view")
        pool = app.screen
        assert isinstance(pool, PoolScreen)
        await wait_for(lambda: [r[0] for r in rows(pool)] == ["FE", "BE", "QA"], "FE alone")
        await pilot.press("down", "s")  # BE: cold, then idle
        await wait_for(
            lambda: (
                [r[:4] for r in rows(pool)][:2]
                == [["FE", "#1", "warm", "idle"], ["BE", "#1", "cold", "idle"]]
            ),
            "BE's cold session idle",
        )
        table = pool.query_one("#pool-list", DataTable)
        table.move_cursor(row=[r[0] for r in rows(pool)].index("QA"))
        await pilot.press("s")  # QA: the office is full, BE's session makes room
        await wait_for(
            lambda: [r[:3] for r in rows(pool)][:2] == [["FE", "#1", "warm"], ["QA", "#1", "cold"]],
            "QA's session in BE's place",
        )
        await wait_for(
            lambda: any(n.title == "Session evicted" for n in app._notifications), "the notice"
        )
        notice = next(n for n in app._notifications if n.title == "Session evicted")
        assert notice.severity == "warning"
        assert notice.message.startswith("BE #1 evicted for a QA session (idle ")
