"""Recording and reading terminal sessions in asciicast v2 format.

A file is one JSON header line followed by one JSON array per event, `[time, kind, data]`,
where time is seconds since the start of the recording:
https://docs.asciinema.org/manual/asciicast/v2/
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import TracebackType
from typing import IO, Any, Literal, NamedTuple, Self

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

__all__ = [
    "AsciicastError",
    "AsciicastEvent",
    "AsciicastHeader",
    "AsciicastWriter",
    "read_asciicast",
    "replay_output",
]

EventKind = Literal["o", "i", "r", "m"]

# Only these variables go into a header: the rest of an environment may hold secrets.
HEADER_ENV_KEYS = ("TERM", "SHELL")
# Events are flushed to disk once this much recording time has passed since the last flush.
FLUSH_INTERVAL = 0.5
_BUFFER_SIZE = 256 * 1024


class AsciicastHeader(BaseModel):
    model_config = ConfigDict(frozen=True)

    version: Literal[2]
    width: int
    height: int
    timestamp: int | None = None
    title: str | None = None
    # asciinema writes `null` for a variable that is unset (e.g. SHELL on a bare CI runner).
    env: dict[str, str | None] | None = None


class AsciicastEvent(NamedTuple):
    time: float
    kind: EventKind
    data: str


class AsciicastError(ValueError):
    """A malformed asciicast file; `lineno` is the 1-based line at fault."""

    def __init__(self, source: str, lineno: int, reason: str) -> None:
        super().__init__(f"{source}, line {lineno}: {reason}")
        self.lineno = lineno


_event_adapter: TypeAdapter[tuple[float, EventKind, str]] = TypeAdapter(
    tuple[float, EventKind, str]
)


def _dump_line(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n"


def header_env(env: Mapping[str, str]) -> dict[str, str | None] | None:
    """The part of `env` that may be written into a header (None when there is none)."""
    kept: dict[str, str | None] = {key: env[key] for key in HEADER_ENV_KEYS if key in env}
    return kept or None


class AsciicastWriter:
    """Writes an asciicast v2 file; the header is written at once, events as they come.

    Writes are buffered: the file is flushed whenever an event comes `FLUSH_INTERVAL` seconds
    (by `clock`) after the last flush, when the buffer fills, and on `flush`/`close`.
    `env` is the recorded program's environment (default: ours); only TERM and SHELL are kept.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        cols: int,
        rows: int,
        *,
        title: str | None = None,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        header = AsciicastHeader(
            version=2,
            width=cols,
            height=rows,
            timestamp=int(time.time()),
            title=title,
            env=header_env(os.environ if env is None else env),
        )
        self._clock = clock
        self._start = clock()
        self._last_flush = 0.0
        # errors="replace": a lone surrogate in recorded input must not abort the recording.
        self._file = open(  # noqa: SIM115 - owned by this object, closed in close()
            path, "w", encoding="utf-8", errors="replace", newline="\n", buffering=_BUFFER_SIZE
        )
        self._file.write(_dump_line(header.model_dump(exclude_none=True)))
        self._file.flush()

    @property
    def closed(self) -> bool:
        return self._file.closed

    def output(self, text: str) -> None:
        self._event("o", text)

    def input(self, text: str) -> None:
        self._event("i", text)

    def resize(self, cols: int, rows: int) -> None:
        self._event("r", f"{cols}x{rows}")

    def marker(self, label: str = "") -> None:
        self._event("m", label)

    def flush(self) -> None:
        self._file.flush()
        self._last_flush = self._clock() - self._start

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _event(self, kind: EventKind, data: str) -> None:
        if self._file.closed:
            raise ValueError("asciicast writer is closed")
        elapsed = max(0.0, self._clock() - self._start)
        self._file.write(_dump_line([round(elapsed, 6), kind, data]))
        if elapsed - self._last_flush >= FLUSH_INTERVAL:
            self._file.flush()
            self._last_flush = elapsed


def read_asciicast(
    source: str | os.PathLike[str] | IO[str],
) -> tuple[AsciicastHeader, list[AsciicastEvent]]:
    """Parse a whole asciicast v2 file; raises `AsciicastError` (a ValueError) naming the line."""
    if isinstance(source, str | os.PathLike):
        with open(source, encoding="utf-8") as file:
            return _parse(file, os.fspath(source))
    return _parse(source, getattr(source, "name", "<asciicast>"))


def replay_output(events: Iterable[AsciicastEvent]) -> str:
    """Everything the recorded program printed, in order."""
    return "".join(event.data for event in events if event.kind == "o")


def _parse(lines: Iterable[str], name: str) -> tuple[AsciicastHeader, list[AsciicastEvent]]:
    numbered = _content_lines(lines)
    first = next(numbered, None)
    if first is None:
        raise AsciicastError(name, 1, "empty file: missing the header line")
    header = _parse_header(name, *first)
    events = [_parse_event(name, lineno, line) for lineno, line in numbered]
    return header, events


def _content_lines(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    for lineno, line in enumerate(lines, start=1):
        if line.strip():
            yield lineno, line


def _parse_header(name: str, lineno: int, line: str) -> AsciicastHeader:
    try:
        return AsciicastHeader.model_validate_json(line)
    except ValidationError as exc:
        raise AsciicastError(name, lineno, f"invalid header: {_first_error(exc)}") from exc


def _parse_event(name: str, lineno: int, line: str) -> AsciicastEvent:
    try:
        time_, kind, data = _event_adapter.validate_json(line)
    except ValidationError as exc:
        raise AsciicastError(name, lineno, f"invalid event: {_first_error(exc)}") from exc
    return AsciicastEvent(time_, kind, data)


def _first_error(exc: ValidationError) -> str:
    error = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}" if where else error["msg"]
