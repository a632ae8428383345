"""Audit of issue 12, hooks: a session's hook token is a secret of the engine's logs.

A hook token lets whoever holds it speak for the session, so no log line may show it, in any
form, however it got there (an agent can make its token appear in text semo logs, e.g. by
printing it; a library's error message can quote a request). The HookServer registers each token
with `engine.logs.add_secret` when it issues (or adopts) it and discards it when the session is
unregistered or the server closes. Real HookServer on a real socket, real log handler.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from semo.engine.protocol.hooks import HookServer
from tests.support.temp_dirs import captured_logs, short_temp_dir


@pytest.fixture
def short_dir() -> Iterator[Path]:
    with short_temp_dir("semo-ah-") as path:
        yield path


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    with captured_logs("json") as stream:
        yield stream


async def test_hook_tokens_are_redacted_while_their_session_holds_them(
    short_dir: Path, captured: io.StringIO
) -> None:
    log = logging.getLogger("semo.test.audit")
    async with HookServer(runtime_dir=short_dir / "rt") as server:
        issued = server.register_session("s1")
        adopted = server.register_session("s2", token="adopted-token-0123456789")
        # not next to a secret-looking name: only the registration can redact these
        log.info("agent printed: %s and %r", issued, [adopted])
        server.unregister("s1")
        log.info("after s1 ended: %s", issued)
    log.info("after close: %s", adopted)
    lines = [json.loads(line)["msg"] for line in captured.getvalue().splitlines()]
    assert issued not in lines[0] and adopted not in lines[0]
    assert lines[0].count("***") == 2
    # a token is only redacted while it is a live secret (discard_secret on unregister/close)
    assert issued in lines[1]
    assert adopted in lines[2]


async def test_a_replaced_token_is_still_redacted_once_and_the_new_one_too(
    short_dir: Path, captured: io.StringIO
) -> None:
    log = logging.getLogger("semo.test.audit")
    async with HookServer(runtime_dir=short_dir / "rt") as server:
        old = server.register_session("s1")
        new = server.register_session("s1")  # a new token for the same session
        log.info("tokens %s %s", old, new)
    [line] = captured.getvalue().splitlines()
    message = json.loads(line)["msg"]
    assert new not in message
    # the old token no longer works (unregistered), so it is no longer a secret
    assert old in message
