"""Each sink against a loopback server, with a hostile notice: it arrives, and inert.

The hostile question carries CR/LF (a mail header injection attempt), Slack markup (a channel
mention, a user mention, a link with a label), bare mentions and links, and terminal escape
sequences (a clipboard write, a title, a C1 CSI). Each sink's payload is checked for what must
not be there, and for the question's words that must."""

from __future__ import annotations

import json
import sys
from email import message_from_bytes, policy
from pathlib import Path

import pytest

from semo.engine.notify.models import Notice
from semo.engine.notify.notifier import deliver
from semo.engine.notify.osc import notification_sequences
from semo.engine.notify.settings import NotifySink
from semo.engine.notify.sinks import SinkError, build_sink
from semo.engine.runtime import pid_alive
from tests.support.notify_servers import (
    SMTP_PASSWORD,
    SMTP_USER,
    HttpReceiver,
    SmtpReceiver,
    email_sink,
)

HOSTILE = (
    "deploy?\r\nBcc: victim@example.com\r\n\r\n<!channel> <@U123> <https://evil.example|click> "
    "@here @channel visit https://evil.example/x \x1b]52;c;cm0gLXJmIH4=\x07 \x1b]2;pwned\x07 "
    "\x9b31m red \u202e txt"
)


def hostile_notice() -> Notice:
    return Notice(
        kind="question",
        office="acme",
        agent="FE",
        title="FE asks you",
        text=HOSTILE,
        answer='semo answer q-1 "..."',
        ref="q-1",
    )


def assert_inert(text: str) -> None:
    """No control character, no CR/LF, none of the question's escape sequences."""
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text), repr(text)
    assert "\u202e" not in text
    assert "deploy?" in text  # the question itself is there


def test_clean_notice_is_one_bounded_line() -> None:
    notice = Notice(kind="question", office="acme", title="t", text="x\n" * 5000)
    assert "\n" not in notice.text and len(notice.text) <= 400
    assert notice.text.endswith("…")
    assert_inert(hostile_notice().text)


async def test_webhook_json_and_slack_forms_are_inert() -> None:
    with HttpReceiver() as hook:
        for form in ("json", "slack"):
            settings = NotifySink(sink="webhook", url=f"{hook.url}/{form}", format=form)
            sink = build_sink(settings, form, bus=None, env={})
            try:
                assert await deliver(sink, hostile_notice()) == "HTTP 200"
            finally:
                await sink.close()
        full, slack = hook.bodies()
    assert set(slack) == {"text"}
    assert full["kind"] == "question" and full["agent"] == "FE" and full["office"] == "acme"
    assert full["answer"] == 'semo answer q-1 "..."'
    for text in (full["text"], slack["text"]):
        assert_inert(text)
        assert "<" not in text and ">" not in text  # no <!channel>, <@U123>, <url|label>
        assert "@here" not in text and "@channel" not in text
        assert "https://" not in text  # no bare link Slack would make clickable
        assert "&lt;!channel&gt;" in text and "https[:]//evil.example" in text
    assert_inert(full["needed"])


async def test_webhook_secret_header_from_the_environment_and_never_in_errors() -> None:
    with HttpReceiver() as hook:
        settings = NotifySink(
            sink="webhook",
            url=hook.url + "/x",
            headers={"Authorization": "Bearer ${HOOK_TOKEN}"},
            retries=0,
        )
        sink = build_sink(settings, "w", bus=None, env={"HOOK_TOKEN": "tok-secret-value"})
        try:
            await deliver(sink, hostile_notice())
            hook.fail_next = 1
            with pytest.raises(SinkError) as failed:
                await deliver(sink, hostile_notice())
        finally:
            await sink.close()
        assert hook.requests[0].headers["authorization"] == "Bearer tok-secret-value"
    assert "tok-secret-value" in sink.secrets
    assert "tok-secret-value" not in str(failed.value) and "HTTP 500" in str(failed.value)
    with pytest.raises(SinkError, match=r"\$\{HOOK_TOKEN\} is not set"):
        build_sink(settings, "w", bus=None, env={})


async def test_ntfy_publishes_json_to_the_topic() -> None:
    with HttpReceiver() as server:
        settings = NotifySink(sink="ntfy", url=f"{server.url}/semo-alerts", priority=4)
        sink = build_sink(settings, "n", bus=None, env={})
        try:
            await deliver(sink, hostile_notice())
        finally:
            await sink.close()
        [request] = server.requests
    body = request.json
    assert request.path == "/" and body["topic"] == "semo-alerts" and body["priority"] == 4
    assert body["title"] == "semo acme: FE asks you"
    assert all(ord(c) >= 0x20 or c == "\n" for c in body["message"])  # lines: text, answer
    assert_inert(body["message"].replace("\n", " "))
    assert body["message"].count("\n") == 1 and "semo answer q-1" in body["message"]


async def test_smtp_starttls_login_and_no_header_injection(tmp_path: Path) -> None:
    with SmtpReceiver(tmp_path) as smtp:
        settings = email_sink(smtp)
        sink = build_sink(settings, "e", bus=None, env={"SMTP_PASS": SMTP_PASSWORD})
        assert await deliver(sink, hostile_notice()) == "sent to 1 recipient(s)"
        await sink.close()
        assert smtp.logins == [f"{SMTP_USER}:ok"]
        [mail] = smtp.messages
        raw = smtp.raw[0]
    headers = raw.split(b"\r\n\r\n", 1)[0] if b"\r\n\r\n" in raw else raw.split(b"\n\n", 1)[0]
    names = [
        line.split(b":", 1)[0].lower() for line in headers.splitlines() if line[:1] not in b" \t"
    ]
    assert b"bcc" not in names  # the question's "Bcc:" line stayed text in the subject/body
    assert mail["To"] == "ops@example.com"
    assert mail["Subject"] == "semo acme: FE asks you"
    body = mail.get_content()
    assert "deploy? Bcc: victim@example.com" in body
    assert "\x1b" not in body and "\x07" not in body and "\x9b" not in body
    reparsed = message_from_bytes(raw, policy=policy.default)
    assert reparsed.get_all("Bcc") is None


async def test_smtp_wrong_password_is_a_clear_failure_without_retry(tmp_path: Path) -> None:
    with SmtpReceiver(tmp_path) as smtp:
        settings = email_sink(smtp, retries=3)
        sink = build_sink(settings, "e", bus=None, env={"SMTP_PASS": "wrong-password"})
        with pytest.raises(SinkError, match="login refused") as failed:
            await deliver(sink, hostile_notice())
        await sink.close()
        assert not failed.value.retry and len(smtp.logins) == 1  # not retried
        assert "wrong-password" not in str(failed.value)
        assert smtp.messages == []


async def test_smtp_untrusted_certificate_is_refused(tmp_path: Path) -> None:
    with SmtpReceiver(tmp_path) as smtp:
        settings = NotifySink(
            sink="email",
            host="127.0.0.1",
            port=smtp.port,
            from_addr="semo@example.com",
            to=["ops@example.com"],
        )
        sink = build_sink(settings, "e", bus=None, env={})
        with pytest.raises(SinkError, match="TLS failed"):
            await deliver(sink, hostile_notice())
        await sink.close()
        assert smtp.messages == []


async def test_command_gets_the_notice_as_json_on_stdin(tmp_path: Path) -> None:
    out = tmp_path / "got.json"
    script = (
        f"import sys, os; open({str(out)!r}, 'w')"
        ".write(sys.stdin.read() + repr(sorted(os.environ)))"
    )
    settings = NotifySink(sink="command", command=[sys.executable, "-c", script])
    env = {"PATH": "/usr/bin:/bin", "SEMO_DATABASE_URL": "postgresql://u:pw@h/db", "KEEP": "1"}
    sink = build_sink(settings, "c", bus=None, env=env)
    assert "exited 0" in await deliver(sink, hostile_notice())
    text, _, names = out.read_text().partition("\n")
    data = json.loads(text)
    assert data["kind"] == "question" and data["ref"] == "q-1"
    assert_inert(data["needed"])
    assert "'KEEP'" in names and "SEMO_DATABASE_URL" not in names  # engine credentials kept out


async def test_command_that_hangs_is_killed_and_one_that_fails_is_reported(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    hang = NotifySink(
        sink="command", command=["sh", "-c", f"echo $$ > {pid_file}; exec sleep 30"], timeout=0.5
    )
    sink = build_sink(hang, "h", bus=None, env={"PATH": "/usr/bin:/bin"})
    with pytest.raises(SinkError, match=r"(did not finish|no answer) within 0.5 s"):
        await deliver(sink, hostile_notice(), retries=0)
    pid = int(pid_file.read_text())
    assert not pid_alive(pid)  # killed and reaped, not left running
    fail = NotifySink(sink="command", command=["sh", "-c", "echo nope >&2; exit 3"], retries=0)
    sink = build_sink(fail, "f", bus=None, env={"PATH": "/usr/bin:/bin"})
    with pytest.raises(SinkError, match="exited 3: nope"):
        await deliver(sink, hostile_notice())


def test_terminal_sequences_carry_no_escape_from_the_text() -> None:
    notice = hostile_notice()
    for tmux in (False, True):
        out = notification_sequences(notice.headline, HOSTILE + ";x", tmux=tmux)
        body = out.removesuffix("\a")
        # only the sequences' own ESCs: 2 (OSC 9) + 2 (OSC 777), doubled and wrapped in tmux
        assert body.count("\x1b") == (4 if not tmux else 2 * 4 + 2 * 2)
        assert "\x07" not in body and "\x9b" not in body and "\x1b]52" not in body
        assert "]777;notify;semo acme: FE asks you;" in body.replace("\x1b\x1b", "\x1b")
    assert notification_sequences("t", "9;4;1", tmux=False).startswith("\x1b]9;semo: 9;4;1")
