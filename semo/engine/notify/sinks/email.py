"""Mail over SMTP: STARTTLS (default) or implicit TLS, optional login.

The subject is the notice's headline (one line: no header can be injected), the body its
lines, in plain text."""

from __future__ import annotations

import asyncio
import smtplib
import ssl
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from semo.engine.notify.models import Notice
from semo.engine.notify.settings import NotifySink
from semo.engine.notify.sinks.base import Sink, SinkError


class EmailSink(Sink):
    def __init__(self, settings: NotifySink, label: str, env: Mapping[str, str]) -> None:
        super().__init__(settings, label)
        self.username = self._expand(settings.username, env, secret=False)
        password = settings.password.get_secret_value() if settings.password else ""
        self.password = self._expand(password, env, secret=True) if password else ""
        self.context = ssl.create_default_context(
            cafile=str(settings.ca_file) if settings.ca_file else None
        )
        # smtplib blocks: its own thread, so a server that hangs holds none of the engine's
        # (the default executor's threads serve git and the store)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="semo-smtp")

    def message(self, notice: Notice) -> EmailMessage:
        """The mail for `notice`."""
        message = EmailMessage()
        message["Subject"] = notice.headline
        message["From"] = self.settings.from_addr
        message["To"] = ", ".join(self.settings.to)
        message["Date"] = formatdate(localtime=False)
        message["Message-ID"] = make_msgid(domain="semo.invalid")
        message.set_content("\n".join([notice.line(), "", *notice.lines()]) + "\n")
        return message

    async def send(self, notice: Notice) -> str:
        message = self.message(notice)
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._send, message)

    async def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)

    def _send(self, message: EmailMessage) -> str:
        settings = self.settings
        timeout = settings.timeout
        try:
            if settings.tls:
                client: smtplib.SMTP = smtplib.SMTP_SSL(
                    settings.host, settings.port, timeout=timeout, context=self.context
                )
            else:
                client = smtplib.SMTP(settings.host, settings.port, timeout=timeout)
            with client:
                if settings.starttls and not settings.tls:
                    client.starttls(context=self.context)
                if self.username:
                    client.login(self.username, self.password)
                refused = client.send_message(message)
        except smtplib.SMTPAuthenticationError as error:
            raise SinkError(f"login refused ({error.smtp_code})", retry=False) from None
        except smtplib.SMTPRecipientsRefused:
            raise SinkError("every recipient was refused", retry=False) from None
        except smtplib.SMTPNotSupportedError as error:
            raise SinkError(f"the server does not support it: {error}", retry=False) from None
        except ssl.SSLError as error:
            raise SinkError(f"TLS failed: {error.reason or error}", retry=False) from None
        except (smtplib.SMTPException, OSError) as error:
            raise SinkError(f"{type(error).__name__}: {error}") from None
        if refused:
            return f"sent; refused by {len(refused)} recipient(s)"
        return f"sent to {len(settings.to)} recipient(s)"

    def where(self) -> str:
        mode = "TLS" if self.settings.tls else "STARTTLS" if self.settings.starttls else "plain"
        return f"smtp://{self.settings.host}:{self.settings.port} ({mode})"
