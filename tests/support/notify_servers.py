"""Loopback servers that receive notifications in tests: HTTP (a webhook, an ntfy-like
server) and SMTP (aiosmtpd, with STARTTLS and login on a self-signed certificate).

    with HttpReceiver() as hook:                # http://127.0.0.1:PORT/...
        hook.fail_next = 2                      # the next two requests get 500
        ... hook.requests[0].json ...
    with SmtpReceiver(tmp_path) as smtp:        # STARTTLS required, then AUTH (user/secret)
        ... smtp.messages[0]["Subject"] ...
"""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import threading
from dataclasses import dataclass
from email import message_from_bytes, policy
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SMTP_USER = "semo-user"
SMTP_PASSWORD = "smtp-password-123"


@dataclass(frozen=True)
class Received:
    """One request the HTTP receiver got."""

    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class HttpReceiver:
    """A threaded HTTP server on 127.0.0.1 recording every POST; `fail_next` requests are
    answered 500, `hang` makes it never answer (until closed)."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.fail_next = 0
        self.attempts = 0
        self.hang = threading.Event()
        self._release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                receiver.attempts += 1
                if receiver.hang.is_set():
                    receiver._release.wait(30)
                    return
                if receiver.fail_next > 0:
                    receiver.fail_next -= 1
                    self.send_response(500)
                    self.end_headers()
                    return
                receiver.requests.append(
                    Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> HttpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        self.server.shutdown()
        self.server.server_close()

    def bodies(self) -> list[Any]:
        return [request.json for request in self.requests]


def self_signed_cert(folder: Path) -> tuple[Path, Path]:
    """(certificate, key) for 127.0.0.1 and localhost, made with openssl."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


class SmtpReceiver:
    """aiosmtpd on 127.0.0.1: STARTTLS required before anything, AUTH (SMTP_USER /
    SMTP_PASSWORD) required to send; `messages` the mails received, parsed."""

    def __init__(self, folder: Path) -> None:
        from aiosmtpd.controller import Controller
        from aiosmtpd.smtp import AuthResult

        self.cert, key = self_signed_cert(folder)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert, key)
        self.messages: list[EmailMessage] = []
        self.raw: list[bytes] = []
        self.logins: list[str] = []
        receiver = self

        class Handler:
            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
                receiver.raw.append(envelope.original_content or envelope.content)
                receiver.messages.append(
                    message_from_bytes(envelope.content, policy=policy.default)  # type: ignore[arg-type]
                )
                return "250 OK"

        def authenticate(
            server: Any, session: Any, envelope: Any, mechanism: str, data: Any
        ) -> Any:
            ok = data.login == SMTP_USER.encode() and data.password == SMTP_PASSWORD.encode()
            receiver.logins.append(f"{data.login.decode()}:{'ok' if ok else 'refused'}")
            return AuthResult(success=ok, handled=False)

        with socket.socket() as probe:  # aiosmtpd checks its port by connecting: not 0
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.controller = Controller(
            Handler(),
            hostname="127.0.0.1",
            port=self.port,
            tls_context=context,
            require_starttls=True,
            authenticator=authenticate,
            auth_required=True,
            auth_require_tls=True,
            # smtplib tries LOGIN with an initial response after a refused PLAIN, which
            # aiosmtpd's LOGIN does not read (both wait): PLAIN only
            auth_exclude_mechanism=["LOGIN"],
        )

    def __enter__(self) -> SmtpReceiver:
        self.controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.controller.stop()


def email_sink(smtp: SmtpReceiver, password: str = "${SMTP_PASS}", **keys: Any) -> Any:
    """A `[[notify]]` email sink for `smtp`: STARTTLS with its certificate, login as
    SMTP_USER with `password` (a ${VAR} by default), to ops@example.com."""
    from semo.engine.notify.settings import NotifySink

    return NotifySink(
        sink="email",
        host="127.0.0.1",
        port=smtp.port,
        username=SMTP_USER,
        password=password,
        from_addr="semo@example.com",
        to=["ops@example.com"],
        ca_file=smtp.cert,
        **keys,
    )
