"""The control socket's wire format: length-prefixed JSON frames, and screen rows in them.

How it works: docs/CONSOLE.md, "The control socket's wire format".
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from semo.engine import safe_json
from semo.engine.terminal.cell import Cell
from semo.engine.terminal.scrollback import Line, StyleRun

#: a client's request is at most this big (a paste of 1 MiB is plenty for a terminal)
MAX_REQUEST_BYTES = 1 << 20
#: a server message is at most this big: far above any real one (an office snapshot of a few
#: hundred large questions, a long job list are tens of MiB), a bound on a console's memory only
MAX_SERVER_FRAME_BYTES = 1 << 30
#: a message travels in pieces of at most this many bytes (see the module's docstring)
MAX_PIECE_BYTES = 1 << 20
#: deepest JSON nesting of a console's request (a job's context is the deepest part)
MAX_REQUEST_DEPTH = safe_json.DEFAULT_MAX_DEPTH
#: deepest JSON nesting of the engine's messages: what it relays (job contexts, hook payloads)
#: was bounded when it came in, and the envelope adds a few levels
MAX_SERVER_DEPTH = 4 * safe_json.DEFAULT_MAX_DEPTH
PROTOCOL_VERSION = 2
#: how long a request waits for a starting engine (reconcile, warm sessions) to run
START_WAIT_SECONDS = 180.0

_HEADER = 4
_MORE = 1 << 31
_FLAGS = ("bold", "italics", "underscore", "strikethrough", "reverse", "blink", "dim")


class FrameError(Exception):
    """A frame that is too big or not a JSON object: the connection is closed."""


def encode_frame(message: dict[str, Any]) -> bytes:
    """`message` on the wire: its pieces, one after the other."""
    body = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
    if len(body) <= MAX_PIECE_BYTES:
        return len(body).to_bytes(_HEADER, "big") + body
    parts: list[bytes] = []
    for start in range(0, len(body), MAX_PIECE_BYTES):
        piece = body[start : start + MAX_PIECE_BYTES]
        more = _MORE if start + MAX_PIECE_BYTES < len(body) else 0
        parts += ((len(piece) | more).to_bytes(_HEADER, "big"), piece)
    return b"".join(parts)


async def read_frame(
    reader: asyncio.StreamReader, limit: int, max_depth: int = MAX_SERVER_DEPTH
) -> dict[str, Any] | None:
    """The next message, or None at a clean end of stream (FrameError for a bad one)."""
    body = bytearray()
    while True:
        try:
            header = await reader.readexactly(_HEADER)
        except asyncio.IncompleteReadError as error:
            if error.partial or body:
                raise FrameError("the stream ended inside a frame header") from None
            return None
        size, more = piece_size(header, len(body), limit)
        try:
            body += await reader.readexactly(size)
        except asyncio.IncompleteReadError:
            raise FrameError("the stream ended inside a frame") from None
        if not more:
            return decode_body(body, limit, max_depth)


def piece_size(header: bytes, received: int, limit: int) -> tuple[int, bool]:
    """A piece header's length and whether more pieces follow (FrameError when the message,
    `received` bytes so far, would go over `limit`)."""
    value = int.from_bytes(header, "big")
    size, more = value & ~_MORE, bool(value & _MORE)
    if received + size > limit:
        raise FrameError(f"a frame of over {received + size} bytes is over the limit of {limit}")
    return size, more


def decode_body(
    body: bytes | bytearray, limit: int = MAX_SERVER_FRAME_BYTES, max_depth: int = MAX_SERVER_DEPTH
) -> dict[str, Any]:
    """A message's body as the JSON object it must be (FrameError otherwise)."""
    try:
        message = safe_json.loads(body, max_bytes=limit, max_depth=max_depth)
    except safe_json.JSONInputError as error:
        raise FrameError(f"a frame that is not acceptable JSON: {error}") from None
    if not isinstance(message, dict):
        raise FrameError("a frame that is not a JSON object")
    return message


# -- rows ------------------------------------------------------------------------------------


def _style_key(cell: Cell) -> tuple[object, ...]:
    return tuple(cell[1:])


#: a connection's style table starts over beyond this many styles (an agent printing endless
#: distinct colours must not grow it without bound); checked between frames
MAX_STYLES = 4096


class StyleTable:
    """The sender's side of a connection's style interning."""

    def __init__(self) -> None:
        self._ids: dict[tuple[object, ...], int] = {}
        self._new: dict[str, list[object]] = {}

    def begin_frame(self) -> bool:
        """Call before encoding a frame's rows: True when the table started over (the frame
        must then say `styles_reset`, and the receiver forgets every id first)."""
        if len(self._ids) < MAX_STYLES:
            return False
        self._ids.clear()
        self._new.clear()
        return True

    def id_for(self, cell: Cell) -> int:
        key = _style_key(cell)
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = len(self._ids)
            flags = sum(1 << i for i, name in enumerate(_FLAGS) if getattr(cell, name))
            self._new[str(found)] = [cell.fg, cell.bg, flags]
        return found

    def take_new(self) -> dict[str, list[object]]:
        """Definitions of the styles first used since the last call."""
        new, self._new = self._new, {}
        return new


def encode_line(line: Line, styles: StyleTable) -> str | list[object]:
    if not line.runs and not line.wrapped:
        return line.text
    runs: list[int] = []
    for run in line.runs:
        runs += (run.start, run.end, styles.id_for(run.style))
    return [line.text, runs, 1 if line.wrapped else 0]


class StyleBook:
    """The receiver's side: style ids back to cells (shared objects, so caches keyed by cells
    stay small)."""

    def __init__(self) -> None:
        self._cells: dict[int, Cell] = {}

    def clear(self) -> None:
        self._cells.clear()

    def add(self, definitions: dict[str, list[Any]]) -> None:
        for key, (fg, bg, flags) in definitions.items():
            self._cells[int(key)] = Cell(
                " ",
                str(fg),
                str(bg),
                *(bool(int(flags) & (1 << i)) for i in range(len(_FLAGS))),
            )

    def decode_line(self, value: Any) -> Line:
        if isinstance(value, str):
            return Line(value)
        text, flat, wrapped = value
        cells = self._cells
        runs = tuple(
            StyleRun(flat[i], flat[i + 1], cells.get(flat[i + 2], _PLAIN))
            for i in range(0, len(flat) - 2, 3)
        )
        return Line(str(text), runs, bool(wrapped))


_PLAIN = Cell(" ")
