"""The control socket's wire format: length-prefixed JSON frames, and screen rows in them.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON (one object).
Screen rows travel as the terminal core's compact `Line`s: a row without styles is its text
alone; a styled row is `[text, [start, end, style_id, ...], wrapped]`. Styles are interned per
connection: the first frame that uses a style carries its definition
(`"styles": {"id": [fg, bg, flags]}`), later frames only the id. docs/CONSOLE.md says why.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from engine.terminal.cell import Cell
from engine.terminal.scrollback import Line, StyleRun

#: a client's request is at most this big (a paste of 1 MiB is plenty for a terminal)
MAX_REQUEST_BYTES = 1 << 20
#: a server frame is at most this big (a full screen plus a scrollback tail fits easily)
MAX_SERVER_FRAME_BYTES = 64 << 20
PROTOCOL_VERSION = 1
#: how long a request waits for a starting engine (reconcile, warm sessions) to run
START_WAIT_SECONDS = 180.0

_HEADER = 4
_FLAGS = ("bold", "italics", "underscore", "strikethrough", "reverse", "blink", "dim")


class FrameError(Exception):
    """A frame that is too big or not a JSON object: the connection is closed."""


def encode_frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
    return len(body).to_bytes(_HEADER, "big") + body


async def read_frame(reader: asyncio.StreamReader, limit: int) -> dict[str, Any] | None:
    """The next frame, or None at a clean end of stream (FrameError for a bad one)."""
    try:
        header = await reader.readexactly(_HEADER)
    except asyncio.IncompleteReadError as error:
        if error.partial:
            raise FrameError("the stream ended inside a frame header") from None
        return None
    size = frame_size(header, limit)
    try:
        body = await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        raise FrameError("the stream ended inside a frame") from None
    return decode_body(body)


def frame_size(header: bytes, limit: int) -> int:
    """The body's size a frame header gives (FrameError beyond `limit`)."""
    size = int.from_bytes(header, "big")
    if size > limit:
        raise FrameError(f"a frame of {size} bytes is over the limit of {limit}")
    return size


def decode_body(body: bytes) -> dict[str, Any]:
    """A frame's body as the JSON object it must be (FrameError otherwise)."""
    try:
        message = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise FrameError(f"a frame that is not JSON: {error}") from None
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
