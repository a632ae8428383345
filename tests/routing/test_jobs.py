"""Jobs: the error policy (every branch); what decides an attempt of a Claude Code session
(events fed to the runner's watch: decisive signals judged at the turn's end, tool output only
informing, Done and a decisive semo_done winning, a session ending = crash unless the engine ended
it); and JobRunner on real PTYs with the scripted agent (tests/support/script_agent.py, a
`generic` agent) on the sqlite and postgres stores.

What is checked: a job is done when the agent writes `[SEMO:DONE]` (row: done, attempts 1, the
session; the prompt holds the task, the context as JSON and the persona reminder; events
started/session/delivered/done; the session goes back to the pool); an error line followed by
`[SEMO:DONE]` in the same turn is done; ENOENT fails with no retry, Permission denied fails and
needs a human, `fatal:` fails with no retry; a timeout is retried once in the same session (the
agent back at its prompt) and then fails (attempts 2), and a timeout of a busy turn is
interrupted and retried in a new session, which succeeds; a crash (the agent exits 1) is
retried once in a new session and succeeds, a second crash fails; an open circuit breaker stops
the retry and fails the job with the breaker's message; patterns in the task (echoed on the
agent's screen) and inside code fences decide nothing, and a job waits for `[SEMO:DONE]` across
turns (a later prompt delivered by other code); unknown and not-pending jobs are refused
(CommandFailed through run_job); a job whose agent is unknown fails; a cancelled run marks the
job failed and releases the session; run_job through a real CommandDispatcher completes the
command with the job's status.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from semo.engine.agents.claude import CLAUDE
from semo.engine.protocol.messages import Done
from semo.engine.protocol.monitor import Signal, scan_line
from semo.engine.protocol.observer import MessageFound
from semo.engine.protocol.state import AgentState, StateChange
from semo.engine.routing import CommandDispatcher, CommandFailed
from semo.engine.routing.jobs import (
    JobNotPending,
    JobRunner,
    UnknownJob,
    _Outcome,
    _Watch,
    build_prompt,
)
from semo.engine.routing.policy import MAX_ATTEMPTS, Decision, Failure, decide, kind_for_pattern
from semo.engine.sessions.agent_session import AgentSession
from semo.engine.sessions.breaker import CircuitBreaker
from semo.engine.store.base import Store
from semo.engine.store.models import Agent, Job, JobEntry, Office, RunJobPayload
from tests.support.job_rig import TIMEOUT, JobRig
from tests.support.waiting import eventually, eventually_value

#: a job_timeout short enough for tests that wait for a timeout
SHORT = 1.5


# -- the policy -------------------------------------------------------------------------------


def test_policy_enoent_fails_without_retry() -> None:
    decision = decide(Failure(kind="enoent", attempts=1, detail="ENOENT: no such file, x.py"))
    assert decision == Decision(
        retry=False,
        recreate_session=False,
        needs_human=False,
        reason=decision.reason,
    )
    assert "ENOENT" in decision.reason and "x.py" in decision.reason


def test_policy_permission_denied_fails_and_needs_a_human() -> None:
    decision = decide(Failure(kind="permission_denied", attempts=1, detail="/etc/hosts"))
    assert not decision.retry and not decision.recreate_session
    assert decision.needs_human
    assert "permission denied" in decision.reason and "/etc/hosts" in decision.reason


def test_policy_timeout_is_retried_once_in_the_same_session() -> None:
    first = decide(Failure(kind="timeout", attempts=1, detail="no outcome in 5 s"))
    assert first.retry and not first.recreate_session and not first.needs_human
    assert "timed out" in first.reason and "retrying once" in first.reason
    second = decide(Failure(kind="timeout", attempts=MAX_ATTEMPTS))
    assert not second.retry and not second.needs_human
    assert "no retry left" in second.reason


def test_policy_crash_is_retried_once_in_a_new_session() -> None:
    first = decide(Failure(kind="crash", attempts=1, detail="code 1"))
    assert first.retry and first.recreate_session and not first.needs_human
    assert "crashed: code 1" in first.reason
    second = decide(Failure(kind="crash", attempts=2, detail="code 1"))
    assert not second.retry and not second.recreate_session
    assert "no retry left" in second.reason


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("error", "reported an error"),
        ("no_session", "no session"),
        ("terminated", "was ended"),
        ("cancelled", "interrupted"),
    ],
)
def test_policy_other_failures_are_not_retried(kind: Any, words: str) -> None:
    decision = decide(Failure(kind=kind, attempts=1, detail="fatal: not a git repository"))
    assert not decision.retry and not decision.recreate_session and not decision.needs_human
    assert words in decision.reason and "fatal: not a git repository" in decision.reason


def test_policy_signal_patterns_map_to_failure_kinds() -> None:
    assert kind_for_pattern("enoent") == "enoent"
    assert kind_for_pattern("permission_denied") == "permission_denied"
    assert kind_for_pattern("fatal") == "error"
    assert kind_for_pattern("error") == "error"


def test_policy_rejects_a_failure_without_attempts() -> None:
    with pytest.raises(ValueError):
        Failure(kind="timeout", attempts=0)


def test_the_prompt_holds_no_pattern_of_its_own() -> None:
    agent = Agent(office_id="o", name="be", role="BE")
    job = Job(office_id="o", agent_id=agent.id, task="Add /health", context={"file": "api.py"})
    prompt = build_prompt(job, agent, retry="Retry (attempt 2): the previous attempt timed out.")
    lines = prompt.splitlines()
    assert lines[0] == "Add /health"
    assert 'Context (JSON): {"file": "api.py"}' in lines
    assert "You are be, the BE agent" in prompt and "[SEMO:DONE]" in prompt
    assert lines[-1].startswith("Retry (attempt 2)")
    for line in lines:  # neither as typed, nor as echoed after a prompt character
        assert scan_line(line, "screen", 0.0) == []
        assert scan_line(f"❯ {line}", "screen", 0.0) == []
    assert build_prompt(job.model_copy(update={"context": None}), agent).count("\n") == 1
    # a program that does not read prompts gets the operator's task alone, never semo's words
    assert build_prompt(job, agent, retry="Retry (attempt 2): x", reads_prompts=False) == (
        "Add /health"
    )


# -- what decides an attempt in a Claude Code session (hooks: the model's own text) ----------


def claude_watch() -> _Watch:
    session = AgentSession("s-1", ["claude"], CLAUDE, role="BE", agent_id="a-1")
    return _Watch(session, lambda _what: None, lambda: None)


def turn_end(state: AgentState = AgentState.READY) -> StateChange:
    return StateChange(state, AgentState.EXECUTING, "hook", "turn ended", 1.0)


def error_signal(pattern: str, priority: int, source: Any, text: str) -> Signal:
    return Signal("error", pattern, priority, source, text, 1.0)


async def test_claude_sessions_are_judged_on_decisive_signals_at_the_turn_end() -> None:
    watch = claude_watch()
    watch.on_event(error_signal("enoent", 90, "tool_output", "ENOENT: grep output"))
    watch.on_event(turn_end())
    assert not watch.outcome.done() and watch.turns == 1  # tool output only informs
    watch.on_event(error_signal("error", 40, "model_text", "Error: flaky"))
    watch.on_event(error_signal("permission_denied", 85, "model_text", "Permission denied: /x"))
    assert not watch.outcome.done()  # judged when the turn ends
    watch.on_event(turn_end(AgentState.WAITING_INPUT))
    assert watch.outcome.result() == _Outcome(False, "permission_denied", "Permission denied: /x")


async def test_claude_sessions_are_done_on_done_or_a_decisive_semo_done_signal() -> None:
    watch = claude_watch()
    watch.on_event(error_signal("fatal", 70, "model_text", "fatal: x"))
    watch.on_event(MessageFound(Done(text="shipped"), "model_text", 1.0))
    watch.on_event(turn_end())
    assert watch.outcome.result() == _Outcome(True, detail="shipped")  # Done outranks errors
    watch = claude_watch()
    watch.on_event(Signal("completion", "semo_done", 100, "tool_output", "[SEMO:DONE]", 1.0))
    watch.on_event(Signal("completion", "tests_passed", 50, "model_text", "All tests passed", 1.0))
    assert not watch.outcome.done()
    watch.on_event(Signal("completion", "semo_done", 100, "model_text", "[SEMO:DONE] ok", 1.0))
    assert watch.outcome.result() == _Outcome(True, detail="[SEMO:DONE] ok")


async def test_claude_session_ending_is_a_crash_unless_the_engine_ended_it() -> None:
    watch = claude_watch()
    ended = StateChange(AgentState.TERMINATED, AgentState.READY, "hook", "session ended", 1.0)
    watch.on_event(ended)
    assert watch.outcome.result() == _Outcome(False, "crash", "session ended")
    watch = claude_watch()
    ended = StateChange(AgentState.TERMINATED, AgentState.READY, "engine", "pool closed", 1.0)
    watch.on_event(ended)
    assert watch.outcome.result() == _Outcome(False, "terminated", "pool closed")


# -- JobRunner on real sessions ---------------------------------------------------------------


async def test_a_job_is_done_when_the_agent_says_done(job_rig: JobRig) -> None:
    setup = await job_rig.runner(
        ["Looking at api/routes.py\n[STEP_COMPLETE] route added\n[SEMO:DONE] /health added"]
    )
    job = await setup.run(context={"file": "api/routes.py"})
    assert job.status == "done"
    assert job.attempts == 1
    assert job.failure_reason is None and not job.needs_human
    assert job.session_id is not None
    assert job.engine_id == job_rig.manager.engine_id  # so that reconcile knows whose job it was
    assert await job_rig.store.get_job(job.id) == job
    [prompt] = setup.prompts()
    assert prompt.startswith("Add a GET /health endpoint")
    assert 'Context (JSON): {"file": "api/routes.py"}' in prompt
    assert "You are be, the BE agent" in prompt and "[SEMO:DONE]" in prompt
    assert setup.steps(job) == ["started", "session", "delivered", "done"]
    done = job_rig.events[-1]
    assert done.status == "done" and done.session_id == job.session_id
    assert done.detail == "/health added"
    await setup.released()
    assert job.session_id in setup.pool.status().sessions  # back in the pool, idle


async def test_done_outranks_an_error_line_in_the_same_turn(job_rig: JobRig) -> None:
    setup = await job_rig.runner(
        ["Error: the first run was flaky\nran it again\n[SEMO:DONE] green"]
    )
    job = await setup.run()
    assert (job.status, job.attempts, job.failure_reason) == ("done", 1, None)


async def test_enoent_fails_the_job_without_retry(job_rig: JobRig) -> None:
    setup = await job_rig.runner(
        ["Reading the config\nENOENT: no such file or directory, open 'semo.toml'", "again"]
    )
    job = await setup.run()
    assert job.status == "failed"
    assert job.attempts == 1
    assert not job.needs_human
    assert job.failure_reason is not None
    assert "ENOENT" in job.failure_reason and "semo.toml" in job.failure_reason
    assert len(setup.prompts()) == 1
    assert setup.steps(job) == ["started", "session", "delivered", "failed"]
    await setup.released()


async def test_permission_denied_fails_the_job_and_needs_a_human(job_rig: JobRig) -> None:
    setup = await job_rig.runner(["Writing the unit file\nbash: /etc/systemd/x: Permission denied"])
    job = await setup.run()
    assert (job.status, job.attempts, job.needs_human) == ("failed", 1, True)
    assert job.failure_reason is not None and "/etc/systemd/x" in job.failure_reason
    assert job_rig.events[-1].needs_human
    assert len(setup.prompts()) == 1


async def test_another_error_fails_the_job_without_retry(job_rig: JobRig) -> None:
    setup = await job_rig.runner(["fatal: not a git repository (or any parent)"])
    job = await setup.run()
    assert (job.status, job.attempts, job.needs_human) == ("failed", 1, False)
    assert job.failure_reason is not None
    assert "reported an error: fatal: not a git repository" in job.failure_reason
    assert len(setup.prompts()) == 1


async def test_a_timeout_is_retried_once_in_the_same_session_then_fails(job_rig: JobRig) -> None:
    setup = await job_rig.runner(["Thinking about it", "Still thinking"], job_timeout=SHORT)
    job = await setup.run()
    assert (job.status, job.attempts, job.needs_human) == ("failed", 2, False)
    assert job.failure_reason is not None
    assert "timed out" in job.failure_reason and "no retry left" in job.failure_reason
    first, second = setup.prompts()
    assert "Retry" not in first
    assert "Retry (attempt 2): the previous attempt timed out" in second
    steps = setup.steps(job)
    assert steps == [
        "started",
        "session",
        "delivered",
        "turn",
        "retry",
        "session",
        "delivered",
        "turn",
        "failed",
    ]
    sessions = {e.session_id for e in job_rig.events if e.job_id == job.id and e.step == "session"}
    assert sessions == {job.session_id}  # the agent was back at its prompt: same session
    await setup.released()


async def test_a_busy_turn_that_times_out_is_interrupted_and_the_retry_succeeds(
    job_rig: JobRig,
) -> None:
    setup = await job_rig.runner(
        [
            {"match": "Retry", "text": "[SEMO:DONE] done on the second try"},
            {"text": "a very slow reply", "delay": 60},
        ],
        job_timeout=SHORT,
    )
    job = await setup.run()
    assert (job.status, job.attempts, job.failure_reason) == ("done", 2, None)
    assert len(setup.prompts()) == 2
    sessions = [e.session_id for e in job_rig.events if e.job_id == job.id and e.step == "session"]
    assert len(set(sessions)) == 2  # Ctrl+C ended this agent: the retry got a new session
    assert sessions[-1] == job.session_id
    await setup.released()


async def test_a_crash_recreates_the_session_and_the_retry_succeeds(job_rig: JobRig) -> None:
    setup = await job_rig.runner(
        [
            {"match": "Retry", "text": "[SEMO:DONE] recovered"},
            {"text": "about to fall over", "exit": 1},
        ]
    )
    job = await setup.run()
    assert (job.status, job.attempts, job.failure_reason) == ("done", 2, None)
    first, second = setup.prompts()
    assert "Retry" not in first
    assert "Retry (attempt 2): the previous attempt's session ended unexpectedly" in second
    steps = setup.steps(job)
    assert steps == ["started", "session", "delivered", "retry", "session", "delivered", "done"]
    retry = next(e for e in job_rig.events if e.job_id == job.id and e.step == "retry")
    assert "crashed: exited with code 1" in retry.detail
    sessions = [e.session_id for e in job_rig.events if e.job_id == job.id and e.step == "session"]
    assert len(set(sessions)) == 2 and sessions[0] not in setup.pool.status().sessions
    await setup.released()


async def test_a_program_that_does_not_read_prompts_gets_the_task_alone(job_rig: JobRig) -> None:
    """SH does not read prompts (a generic profile): the operator's task is typed as it is, on
    the retry too, without the context line, semo's reminder or the retry note."""
    setup = await job_rig.runner(
        ["Thinking about it", "[SEMO:DONE] done on the second try"],
        role="SH",
        job_timeout=SHORT,
    )
    job = await setup.run("make check", context={"file": "api.py"})
    assert (job.status, job.attempts) == ("done", 2)
    assert setup.prompts() == ["make check", "make check"]
    await setup.released()


async def test_a_shell_runs_its_job_and_none_of_semos_words(job_rig: JobRig) -> None:
    """A real bash as a job's agent: it runs the operator's task (which prints the done marker)
    and nothing else; semo's reminder typed after the task was run as a command before."""
    bash = ["env", "PS1=$ ", "bash", "--norc", "--noprofile", "-i"]
    setup = await job_rig.runner([], role="SH", command=bash)
    job = await setup.run("echo '[SEMO:DONE]' shell-done")
    assert (job.status, job.attempts) == ("done", 1)
    await setup.released()
    session = job_rig.manager.get(job.session_id or "")
    # bash runs what it was given in order: once this is printed, all of it has run
    await session.deliver("echo barrier-$((40 + 2))", timeout=TIMEOUT)
    await eventually(lambda: "barrier-42" in "\n".join(session.last_lines(40)), TIMEOUT)
    screen = "\n".join(session.last_lines(40))
    assert "command not found" not in screen and "You are" not in screen


async def test_a_second_crash_fails_the_job(job_rig: JobRig) -> None:
    setup = await job_rig.runner([{"text": "falling over", "exit": 3}])
    job = await setup.run()
    assert (job.status, job.attempts) == ("failed", 2)
    assert job.failure_reason is not None
    assert (
        "crashed: exited with code 3" in job.failure_reason
        and "no retry left" in job.failure_reason
    )
    await setup.released()


async def test_an_open_circuit_breaker_stops_the_retry(job_rig: JobRig) -> None:
    breaker = CircuitBreaker(failure_threshold=1, window_seconds=60.0, reset_timeout=60.0)
    setup = await job_rig.runner(
        [
            {"match": "Retry", "text": "[SEMO:DONE] never reached"},
            {"text": "falling over", "exit": 1},
        ],
        breaker=breaker,
    )
    job = await setup.run()
    assert (job.status, job.attempts) == ("failed", 1)
    assert job.failure_reason is not None
    assert "no session to run the job in" in job.failure_reason
    assert "circuit breaker open" in job.failure_reason
    assert len(setup.prompts()) == 1
    assert setup.steps(job)[-2:] == ["retry", "failed"]


async def test_patterns_in_the_task_and_in_quotes_decide_nothing_across_turns(
    job_rig: JobRig,
) -> None:
    quoted = "\n".join(
        [
            "Here is what the log showed:",
            "```",
            "[SEMO:DONE]",
            "Error: boom",
            "ENOENT: no such file or directory",
            "```",
            "~~~text",
            "fatal: not a git repository",
            "Permission denied",
            "~~~",
            "It mentions [SEMO:DONE] in a sentence. Now I wait for QA.",
        ]
    )
    setup = await job_rig.runner(
        [
            {"match": "RESULT", "text": "QA agrees.\n[SEMO:DONE] TypeError fixed"},
            {"text": quoted},
        ]
    )
    job = await setup.job("Fix the TypeError: x is undefined; the log says ENOENT: a.txt")
    running = asyncio.create_task(setup.runner.execute_job(job.id))
    await eventually(lambda: "turn" in setup.steps(job), TIMEOUT)
    assert not running.done()  # the first turn ended: neither done nor failed
    session_id = (await job_rig.store.get_job(job.id)).session_id
    assert session_id is not None
    session = job_rig.manager.get(session_id)
    await session.deliver("RESULT from QA: all tests pass", timeout=TIMEOUT)
    job = await asyncio.wait_for(running, TIMEOUT)
    assert (job.status, job.attempts, job.failure_reason) == ("done", 1, None)
    assert setup.steps(job) == ["started", "session", "delivered", "turn", "done"]
    assert len(setup.prompts()) == 2


async def test_a_generic_agents_pull_request_is_the_jobs_as_for_claude(job_rig: JobRig) -> None:
    """A generic agent's "Created pull request #N" is on the timeline as `pr_created` (ref `#N`,
    the address), once, as a Claude Code session's is; another completion line ("All tests
    passed", a commit line) in a turn that ends without [SEMO:DONE] fails nothing."""
    url = "https://github.com/acme/shop/pull/7"
    setup = await job_rig.runner(
        [
            {"text": f"All tests passed\nCreated pull request #7: {url}\nWaiting for QA."},
            {"match": "RESULT", "text": f"Created pull request #7: {url}\n[SEMO:DONE] PR #7"},
        ]
    )
    job = await setup.job()
    running = asyncio.create_task(setup.runner.execute_job(job.id))
    await eventually(lambda: "turn" in setup.steps(job), TIMEOUT)
    assert not running.done()
    session = job_rig.manager.get((await job_rig.store.get_job(job.id)).session_id or "")
    await session.deliver("RESULT from QA: fine", timeout=TIMEOUT)
    job = await asyncio.wait_for(running, TIMEOUT)
    assert (job.status, job.failure_reason) == ("done", None)
    prs = [e for e in job_rig.events if e.job_id == job.id and e.step == "pr_created"]
    assert [e.detail for e in prs] == [url]
    entries = await job_rig.store.list_job_entries(job.id)
    assert [(e.ref_id, e.detail) for e in entries if e.step == "pr_created"] == [("#7", url)]


async def test_a_generic_agents_pull_request_in_its_last_turn_is_recorded(job_rig: JobRig) -> None:
    setup = await job_rig.runner(["Created pull request #12\n[SEMO:DONE] opened #12"])
    job = await setup.run()
    assert job.status == "done"
    entries = await job_rig.store.list_job_entries(job.id)
    assert [e.ref_id for e in entries if e.step == "pr_created"] == ["#12"]


async def test_unknown_and_not_pending_jobs_are_refused(job_rig: JobRig) -> None:
    setup = await job_rig.runner(["[SEMO:DONE]"])
    with pytest.raises(UnknownJob, match="no job 'nope'"):
        await setup.runner.execute_job("nope")
    with pytest.raises(CommandFailed, match="no job 'nope'"):
        await setup.runner.run_job(RunJobPayload(job_id="nope"))
    done = await setup.job(status="done")
    with pytest.raises(JobNotPending, match="is done; only a pending job can be run"):
        await setup.runner.execute_job(done.id)
    with pytest.raises(CommandFailed, match="is done"):
        await setup.runner.run_job(RunJobPayload(job_id=done.id))
    other = await job_rig.store.create_office(Office(name="elsewhere"))
    foreign = await job_rig.store.create_job(
        Job(office_id=other.id, agent_id=setup.agent.id, task="not ours")
    )
    with pytest.raises(UnknownJob, match="another office"):
        await setup.runner.execute_job(foreign.id)
    assert setup.prompts() == []
    assert (await job_rig.store.get_job(done.id)).status == "done"


async def test_two_engines_running_one_job_at_once_run_it_once(job_rig: JobRig) -> None:
    """Two engines' runners get a run_job command for one pending job (one requeued it while
    the other's was slow) and start it at the same time: one runs it (one prompt typed), the
    other is refused as not pending; the job is done once."""
    setup = await job_rig.runner(["[SEMO:DONE] once", "[SEMO:DONE] twice"])
    other = JobRunner(
        job_rig.store,
        setup.pool,
        office_id=job_rig.office.id,
        agents_by_id={setup.agent.id: setup.agent},
        engine_id="engine-b",
        job_timeout=TIMEOUT,
    )
    job = await setup.job()
    ran = await asyncio.wait_for(
        asyncio.gather(
            setup.runner.execute_job(job.id), other.execute_job(job.id), return_exceptions=True
        ),
        3 * TIMEOUT,
    )
    [done] = [r for r in ran if isinstance(r, Job)]
    [refused] = [r for r in ran if isinstance(r, JobNotPending)]
    assert done.status == "done" and "is running" in str(refused)
    assert len(setup.prompts()) == 1
    steps = [e.step for e in await job_rig.store.list_job_entries(job.id)]
    assert steps.count("started") == 1 and steps.count("done") == 1
    await other.close()
    await setup.released()


async def test_a_burst_beyond_max_sessions_queues_for_the_sessions(job_rig: JobRig) -> None:
    """Three jobs at once on a pool of one session that is busy (an engine's max_jobs above
    max_sessions): none fails for want of a session; each waits (a `queued` step saying the
    pool is full) and takes the session in turn as it frees, and all end done in it."""
    setup = await job_rig.runner(
        ["[SEMO:DONE] one", "[SEMO:DONE] two", "[SEMO:DONE] three"], max_sessions=1
    )
    held = await setup.pool.acquire(agent_id=setup.agent.id, wait=TIMEOUT)  # the only one
    jobs = [await setup.job(f"task {n}") for n in range(3)]
    running = [asyncio.create_task(setup.runner.execute_job(j.id)) for j in jobs]
    await eventually(lambda: setup.pool.status().waiting == 3, TIMEOUT)
    await eventually(lambda: all("queued" in setup.steps(j) for j in jobs), TIMEOUT)
    queued = [e for e in job_rig.events if e.step == "queued"]
    assert all(
        "waiting for a session: office has 1/1 sessions, all busy" in e.detail for e in queued
    )
    assert not any(t.done() for t in running)
    setup.pool.release(held.session_id)
    done = await asyncio.wait_for(asyncio.gather(*running), 3 * TIMEOUT)
    assert [(j.status, j.attempts) for j in done] == [("done", 1)] * 3
    assert {j.session_id for j in done} == {held.session_id}
    assert len(setup.prompts()) == 3

    async def on_timeline() -> list[str] | None:
        steps = [e.step for e in await job_rig.store.list_job_entries(jobs[2].id)]
        return steps if "done" in steps else None

    steps = await eventually_value(on_timeline, "the timeline written", TIMEOUT)
    assert steps[:3] == ["started", "queued", "session"]
    await setup.released()


async def test_a_job_of_an_unknown_agent_fails(job_rig: JobRig) -> None:
    setup = await job_rig.runner(["[SEMO:DONE]"])
    job = await job_rig.store.create_job(
        Job(office_id=job_rig.office.id, agent_id="ghost", task="x")
    )
    job = await setup.runner.execute_job(job.id)
    assert (job.status, job.attempts) == ("failed", 0)
    assert job.failure_reason is not None and "no agent 'ghost'" in job.failure_reason


async def test_a_cancelled_run_fails_the_job_and_releases_the_session(job_rig: JobRig) -> None:
    setup = await job_rig.runner(["Working on it, slowly"])
    job = await setup.job()
    running = asyncio.create_task(setup.runner.execute_job(job.id))
    await eventually(lambda: "turn" in setup.steps(job), TIMEOUT)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    row = await job_rig.store.get_job(job.id)
    assert (row.status, row.attempts) == ("failed", 1)
    assert row.failure_reason is not None and "interrupted" in row.failure_reason
    await setup.released()
    assert setup.runner.running == frozenset()


async def test_run_job_through_the_command_dispatcher(job_rig: JobRig) -> None:
    setup = await job_rig.runner(
        [
            {"match": "Fail", "text": "fatal: bad object HEAD"},
            {"text": "[SEMO:DONE] shipped"},
        ]
    )

    async def no_sessions(payload: Any) -> Any:
        raise CommandFailed("not in this test")

    dispatcher = CommandDispatcher(
        job_rig.store,
        job_rig.manager,
        office_id=job_rig.office.id,
        engine_id="engine-1",
        bus=job_rig.bus,
        create_session=no_sessions,
        run_job=setup.runner.run_job,
        poll_interval=0.1,
    )
    dispatcher.start()
    try:
        ok = await setup.job("Ship it")
        bad = await setup.job("Fail on purpose")
        results = {}
        for job_id in (ok.id, bad.id, "missing"):
            command = await job_rig.store.insert_command(
                job_rig.office.id, "run_job", {"job_id": job_id}
            )
            results[job_id] = await wait_result(job_rig.store, command.id)
    finally:
        await dispatcher.stop(grace=5)
    assert results[ok.id].success
    assert results[ok.id].result == {
        "job_id": ok.id,
        "status": "done",
        "attempts": 1,
        "needs_human": False,
    }
    failed = results[bad.id]
    assert failed.success  # the command ran; the job failed
    assert failed.result is not None
    assert (failed.result["status"], failed.result["attempts"]) == ("failed", 1)
    assert "fatal: bad object HEAD" in failed.result["failure_reason"]
    assert not results["missing"].success
    assert results["missing"].error == "no job 'missing'"
    assert (await job_rig.store.get_job(ok.id)).status == "done"


async def wait_result(store: Store, command_id: str) -> Any:
    return await eventually_value(
        lambda: store.get_result(command_id), f"the result of command {command_id}", 2 * TIMEOUT
    )


async def test_a_timeline_row_after_close_starts_no_writer_that_outlives_the_runner(
    job_rig: JobRig,
) -> None:
    """A session event that comes in while the engine stops (after `close`) is logged, not
    queued: a writer started then would be destroyed pending with the event loop."""
    setup = await job_rig.runner(["ok"])
    job = await job_rig.store.create_job(
        Job(office_id=job_rig.office.id, agent_id=setup.agent.id, task="after close")
    )
    setup.runner._record(JobEntry(job_id=job.id, office_id=job_rig.office.id, step="before"))
    await setup.runner.close()
    assert [e.step for e in await job_rig.store.list_job_entries(job.id)] == ["before"]
    setup.runner._record(JobEntry(job_id=job.id, office_id=job_rig.office.id, step="after"))
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "job timeline"]
