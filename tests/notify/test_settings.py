"""`[[notify]]` in semo.toml: the example `semo init` writes, errors that name the table and the
key, secrets from the environment, and `semo notify test` on real sinks."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from semo.engine.config import EXAMPLE_CONFIG, ConfigError, parse_config
from semo.engine.notify.models import DEFAULT_EVENTS
from tests.support.notify_servers import HttpReceiver

SEMO = Path(sys.executable).with_name("semo")
OFFICE = '[office]\nname = "acme"\n'


def test_the_init_example_documents_every_sink_and_loads_uncommented(tmp_path: Path) -> None:
    tables = re.findall(r"^# \[\[notify\]\]\n((?:# [a-z_]+ = .*\n)+)", EXAMPLE_CONFIG, re.M)
    assert len(tables) == 5
    text = OFFICE
    for table in tables:
        lines = [re.sub(r"\s+#.*$", "", line.removeprefix("# ")) for line in table.splitlines()]
        text += "[[notify]]\n" + "\n".join(lines) + "\n"
    config = parse_config(text, tmp_path / "semo.toml")
    assert [sink.sink for sink in config.notify] == [
        "console",
        "webhook",
        "ntfy",
        "email",
        "command",
    ]
    webhook = config.notify[1]
    assert webhook.format == "slack" and webhook.wait_delay() == 60.0
    assert config.warnings == []  # the password is a ${VARIABLE}: no secret in the file
    # commented out (as written): the consoles only, with the quiet defaults
    example = parse_config(EXAMPLE_CONFIG, tmp_path / "semo.toml")
    [console] = example.notify_sinks()
    assert console.sink == "console" and console.events == list(DEFAULT_EVENTS)
    assert console.wait_delay() == 0 and "agent_stale" not in console.events


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            'sink = "webhook"',
            r"semo.toml:3: \[\[notify\]\] #1 url: missing: sink = webhook needs it",
        ),
        (
            'sink = "console"\nurl = "https://x"',
            r"semo.toml:5: \[\[notify\]\] #1 url: "
            r"a key of sink = webhook / ntfy, not of sink = console",
        ),
        (
            'sink = "webhook"\nurl = "ftp://x"',
            r"semo.toml:5: \[\[notify\]\] #1 url: must be an http:// or https:// URL",
        ),
        (
            'sink = "ntfy"\nurl = "https://ntfy.sh/t"\nevents = ["questions"]',
            r"\[\[notify\]\] #1 events: 'questions' is not an event \(events: question, ",
        ),
        ('sink = "pager"', r"\[\[notify\]\] #1 sink: Input should be 'console', 'webhook'"),
        (
            'sink = "webhook"\nurl = "https://x"\nheaders = { X = "a\\r\\nBcc: y" }',
            r"\[\[notify\]\] #1 headers: X: a header value must be one line",
        ),
        (
            'sink = "email"\nhost = "h"\nfrom_addr = "a@b"\nto = ["x@y\\r\\nBcc: z@w"]',
            r"is not a mail address",
        ),
        ('sink = "command"\ncommand = ["x"]\nretry = 1', r"unknown key \(did you mean retries"),
    ],
)
def test_bad_tables_are_clear_errors(tmp_path: Path, table: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(f"{OFFICE}[[notify]]\n{table}\n", tmp_path / "semo.toml")
    assert re.search(message, str(caught.value)), str(caught.value)


def test_a_password_written_in_the_file_gives_a_warning_without_the_secret(tmp_path: Path) -> None:
    config = parse_config(
        f'{OFFICE}[[notify]]\nsink = "email"\nhost = "h"\nfrom_addr = "a@b.c"\nto = ["x@y.z"]\n'
        'username = "u"\npassword = "hunter2-long"\n',
        tmp_path / "semo.toml",
    )
    [warning] = config.warnings
    assert "[[notify]] #1 password is a secret" in warning and "hunter2" not in warning
    assert "hunter2" not in repr(config)


def test_semo_notify_test_prints_each_sink_and_fails_when_one_fails(tmp_path: Path) -> None:
    with HttpReceiver() as hook, HttpReceiver() as broken:
        broken.fail_next = 10
        (tmp_path / "semo.toml").write_text(
            f'{OFFICE}[[notify]]\nsink = "webhook"\nname = "team chat"\n'
            f'url = "{hook.url}/T/s3cr3t"\n'
            f'format = "slack"\n[[notify]]\nsink = "webhook"\nurl = "{broken.url}/x"\n'
            '[[notify]]\nsink = "ntfy"\nurl = "${NTFY_TOPIC_URL}"\n[[notify]]\nsink = "console"\n'
        )
        done = subprocess.run(
            [str(SEMO), "notify", "test", "--config", str(tmp_path / "semo.toml")],
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
            timeout=60,
        )
        [sent] = hook.bodies()
    assert done.returncode == 1, done
    lines = done.stdout.splitlines()
    assert lines[0] == f"team chat: ok: {hook.url}: HTTP 200"  # the URL's path (a token) not shown
    assert lines[1] == f"webhook #2: FAILED: {broken.url}: HTTP 500"
    assert lines[2] == "ntfy #3: FAILED: ${NTFY_TOPIC_URL} is not set in the engine's environment"
    assert lines[3].startswith("console #4: ok: skipped: not a terminal")
    assert broken.attempts == 1  # one attempt each: a test, not a delivery
    assert sent["text"].startswith("semo acme: test notification")
