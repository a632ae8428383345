"""Shipping with hostile agents (docs/SECURITY.md):

- an agent's result full of Markdown tricks (a mention, an issue reference, a link, an image,
  HTML, a fence of its own, escape sequences, the token itself) lands in the pull request's
  body only inside a code block whose fence it cannot close, with its control characters made
  visible and the token redacted; the title neither mentions nor references.
- a repository whose config (written by an agent through its worktree) sets a pre-push hook,
  core.hooksPath, core.sshCommand, a credential helper, remote.origin.receivepack, core.askPass
  and core.fsmonitor: pushing and merging run none of them.
- the same config's http settings (a proxy, TLS checks off, a CA, extra headers, a cookie
  file, also for the remote's URL alone) do not apply to semo's push: it goes to the remote
  itself, as the user's own git settings say.
"""

from __future__ import annotations

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from semo.engine.office.job_ops import job_timeline
from semo.engine.ship.pr_text import pr_body, pr_title
from semo.engine.ship.settings import ShipSection
from semo.engine.ship.ship import ShipError, ShipRequest, ship_job
from tests.ship.conftest import make_world
from tests.support.git_repo import git
from tests.support.github_api import GitHubApi

TOKEN = "ghp_loopback_0123456789abcdef"
HOSTILE = (
    "done @octocat see #1 and [click](https://evil.example) ![x](https://evil.example/p.png)\n"
    "<img src=x onerror=alert(1)> <!-- hidden -->\n"
    "````\nnow outside the fence? @everyone\n````\n"
    f"\x1b]52;c;ZXZpbA==\x07 \u202e gnirts  token={TOKEN}"
)


def code_blocks(body: str) -> tuple[str, str]:
    """(what is inside fences, what is outside), by CommonMark's fence rules for backticks."""
    inside: list[str] = []
    outside: list[str] = []
    fence: str | None = None
    for line in body.split("\n"):
        if fence is None:
            match = re.match(r"^(`{3,})", line)
            if match:
                fence = match.group(1)
            else:
                outside.append(line)
        elif re.fullmatch(rf"{fence}`*\s*", line):
            fence = None
        else:
            inside.append(line)
    assert fence is None, "a fence was left open"
    return "\n".join(inside), "\n".join(outside)


async def test_an_agents_markdown_tricks_stay_inert_in_the_pr(tmp_path: Path) -> None:
    world = await make_world(tmp_path, summary=HOSTILE)
    try:
        await world.store.update_job(world.job.id, task="Fix it @octocat #2\x1b[2J")
        with GitHubApi(token=TOKEN) as api:
            settings = ShipSection(pr_tool="api", github_api_url=api.url, github_repo="acme/shop")
            await ship_job(
                world.store,
                world.job.id,
                ShipRequest(pr=True),
                settings,
                world.target,
                env={"GITHUB_TOKEN": TOKEN},
            )
        (pull,) = api.pulls
        body, title = pull["body"], pull["title"]
        inside, outside = code_blocks(body)
        for trick in ("@octocat", "#1", "](", "<img", "<!--", "@everyone", "gnirts"):
            assert trick in inside
            assert trick not in outside
        assert "\x1b" not in body and "\u202e" not in body and "\x07" not in body
        assert "\\x1b]52" in inside and "\\u202e" in inside
        assert TOKEN not in body and "token=[redacted]" in inside
        assert "@octocat" not in title and "#2" not in title and "\x1b" not in title
        assert title.startswith(f"semo job {world.job.id[:8]}: Fix it @")
    finally:
        await world.store.close()


async def test_the_fence_outgrows_any_backtick_run() -> None:
    from semo.engine.office.job_ops import JobTimeline, JobView

    job = JobView(office_id="o", agent_id="a", task="x" + "`" * 9 + "\n@a", status="done")
    body = pr_body(JobTimeline(job=job, entries=[], questions=[], invocations=[], results=[]), "")
    inside, outside = code_blocks(body)
    assert "@a" in inside and "@a" not in outside
    assert "`" * 10 + "text" in body
    assert pr_title(JobTimeline(job=job, entries=[], questions=[], invocations=[], results=[]))


async def test_a_hostile_repository_config_runs_nothing_when_semo_ships(tmp_path: Path) -> None:
    world = await make_world(tmp_path)
    try:
        marker = tmp_path / "ran"
        evil = tmp_path / "evil.sh"
        evil.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\nexit 1\n')
        evil.chmod(0o755)
        hooks = world.repo / ".git" / "hooks"
        for name in ("pre-push", "reference-transaction", "post-merge", "post-checkout"):
            (hooks / name).write_text(evil.read_text())
            (hooks / name).chmod(0o755)
        for key, value in (
            ("core.hooksPath", str(hooks)),
            ("core.sshCommand", str(evil)),
            ("core.askPass", str(evil)),
            ("core.fsmonitor", str(evil)),
            ("credential.helper", f"!{evil}"),
            ("remote.origin.receivepack", str(evil)),
        ):
            git(world.repo, "config", key, value)
        report = await ship_job(
            world.store,
            world.job.id,
            ShipRequest(push=True, merge=True),
            ShipSection(),
            world.target,
        )
        assert report.pushed == git(world.origin, "rev-parse", world.target.branch).strip()
        assert report.merge_kind == "fast-forward"
        assert not marker.exists(), marker.read_text()
        timeline = await job_timeline(world.store, world.job.id)
        assert [e.step for e in timeline.entries][-2:] == ["pushed", "merged"]
    finally:
        await world.store.close()


class _Recorder:
    """A loopback HTTP server that records each request's first line and headers and answers
    401 (a git server that wants credentials, or a proxy that is never meant to be used)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: object) -> None:
                pass

            def _answer(self) -> None:
                recorder.requests.append((self.requestline, dict(self.headers)))
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_CONNECT = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _Recorder:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()


async def test_a_push_takes_no_http_setting_from_the_repositorys_config(tmp_path: Path) -> None:
    """An agent's http.proxy (with TLS checks off, its own CA, extra headers) in the shared
    config would route semo's push, and the user's credentials with it, through its server:
    the push uses the user's own (global) git settings only."""
    world = await make_world(tmp_path)
    try:
        with _Recorder() as remote, _Recorder() as proxy:
            url = f"{remote.url}/acme/shop.git"
            git(world.repo, "remote", "set-url", "origin", url)
            for key, value in (
                ("http.proxy", proxy.url),
                (f"http.{remote.url}/.proxy", proxy.url),
                ("http.sslVerify", "false"),
                ("http.sslCAInfo", str(tmp_path / "agent-ca.pem")),
                ("http.extraHeader", "X-Planted: by the agent"),
                ("http.cookieFile", str(tmp_path / "cookies")),
            ):
                git(world.repo, "config", key, value)
            with pytest.raises(ShipError, match="pushing"):
                await ship_job(
                    world.store,
                    world.job.id,
                    ShipRequest(push=True),
                    ShipSection(),
                    world.target,
                    env={},
                )
        assert proxy.requests == []
        assert remote.requests, "the push went to the remote itself"
        for line, headers in remote.requests:
            assert "/acme/shop.git/info/refs" in line
            assert "X-Planted" not in headers
    finally:
        await world.store.close()
