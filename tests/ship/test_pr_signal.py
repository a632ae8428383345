"""An agent's own "Created pull request #N" (seed 001's completion signal) is the job's pull
request: the attempt's watch reports it once (the model's words, not tool output), the
timeline keeps it as `pr_created` (ref `#N`, the address when the line has one), and
`semo job ship --pr` then opens no second one."""

from __future__ import annotations

from semo.engine.agents.claude import CLAUDE
from semo.engine.protocol.monitor import Signal
from semo.engine.routing.jobs import _Watch, pull_request_detail
from semo.engine.sessions.agent_session import AgentSession
from semo.engine.ship.settings import ShipSection
from semo.engine.ship.ship import ShipRequest, ship_job
from semo.engine.store.models import JobEntry
from tests.ship.conftest import World
from tests.support.github_api import GitHubApi

LINE = "Created pull request #42: https://github.com/acme/shop/pull/42"


def pr_signal(source: str, text: str) -> Signal:
    return Signal("completion", "pull_request", 80, source, text, 1.0)  # type: ignore[arg-type]


async def test_the_watch_reports_the_agents_pull_request_once() -> None:
    seen: list[tuple[int, str]] = []
    session = AgentSession("s-1", ["claude"], CLAUDE, role="FE", agent_id="a-1")
    watch = _Watch(session, lambda _w: None, lambda: None, lambda n, line: seen.append((n, line)))
    watch.on_event(pr_signal("tool_output", "Created pull request #7"))  # a tool's output
    watch.on_event(pr_signal("model_text", LINE))
    watch.on_event(pr_signal("model_text", LINE))  # the same line again
    assert seen == [(42, LINE)]
    assert not watch.outcome.done()  # a PR is not the job's end: [SEMO:DONE] is


def test_the_timeline_keeps_the_address_or_the_line() -> None:
    assert pull_request_detail(LINE) == "https://github.com/acme/shop/pull/42"
    assert pull_request_detail("  Created pull request #3  ") == "Created pull request #3"
    assert pull_request_detail("Created pull request #3 " + "x" * 500).endswith("x")
    assert len(pull_request_detail("Created pull request #3 " + "x" * 500)) == 300


async def test_an_agents_pull_request_is_the_jobs_and_ship_opens_no_other(world: World) -> None:
    await world.store.add_job_entry(
        JobEntry(
            job_id=world.job.id,
            office_id=world.job.office_id,
            step="pr_created",
            ref_id="#42",
            detail="https://github.com/acme/shop/pull/42",
        )
    )
    with GitHubApi() as api:
        settings = ShipSection(pr_tool="api", github_api_url=api.url, github_repo="acme/shop")
        report = await ship_job(
            world.store,
            world.job.id,
            ShipRequest(pr=True),
            settings,
            world.target,
            env={"GITHUB_TOKEN": api.token},
        )
    assert api.pulls == []
    assert report.pr is not None and report.pr_existed
    assert (report.pr.number, report.pr.url) == (42, "https://github.com/acme/shop/pull/42")


async def test_an_agents_pull_request_without_an_address_has_none(world: World) -> None:
    """A generic agent's "Created pull request #3" with no address: the job's PR is #3, and
    its url is empty rather than the agent's line."""
    await world.store.add_job_entry(
        JobEntry(
            job_id=world.job.id,
            office_id=world.job.office_id,
            step="pr_created",
            ref_id="#3",
            detail=pull_request_detail("Created pull request #3"),
        )
    )
    with GitHubApi() as api:
        settings = ShipSection(pr_tool="api", github_api_url=api.url, github_repo="acme/shop")
        report = await ship_job(
            world.store,
            world.job.id,
            ShipRequest(pr=True),
            settings,
            world.target,
            env={"GITHUB_TOKEN": api.token},
        )
    assert api.pulls == []
    assert report.pr is not None and (report.pr.number, report.pr.url) == (3, "")
