"""Replays an asciicast recording through the same pipeline a live session uses (`semo parse`).

Besides output ("o") and resize ("r") events, a recording may carry marker ("m") events:
`hook:{"event": "Stop", "payload": {...}}` for each Claude Code hook the engine received, and
`exit:{"code": 0, "signal": null}` when the process ended. A hook payload's `transcript_path`
is resolved relative to the recording's folder, so a corpus can ship the transcript beside it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from semo.engine.agents import registry
from semo.engine.protocol.monitor import Signal
from semo.engine.protocol.observer import (
    AgentObserver,
    MalformedMessage,
    MessageFound,
    ObserverEvent,
)
from semo.engine.terminal.asciicast import AsciicastEvent, read_asciicast
from semo.engine.terminal.stream import make_screen_and_stream

HOOK_PREFIX = "hook:"
EXIT_PREFIX = "exit:"


@dataclass
class ReplayResult:
    profile: str
    events: list[ObserverEvent]
    columns: int
    rows: int


def hook_marker(event: str, payload: dict[str, object]) -> str:
    return HOOK_PREFIX + json.dumps({"event": event, "payload": payload}, ensure_ascii=False)


def exit_marker(code: int | None, signal: int | None) -> str:
    return EXIT_PREFIX + json.dumps({"code": code, "signal": signal})


def detect_profile(events: list[AsciicastEvent]) -> str:
    """The profile of a recording: the first adapter with hooks when it holds hook events."""
    hooked = any(e.kind == "m" and e.data.startswith(HOOK_PREFIX) for e in events)
    if hooked:
        for name in registry.names():
            if registry.adapter(name).hook_events:
                return name
    return registry.FALLBACK


def replay(
    source: str | Path | TextIO,
    *,
    profile: str | None = None,
    columns: int | None = None,
) -> ReplayResult:
    header, events = read_asciicast(source)
    base = Path(source).parent if isinstance(source, str | Path) else Path.cwd()
    chosen = profile or detect_profile(events)
    adapter = registry.adapter(chosen)
    cols = columns or header.width
    screen, stream = make_screen_and_stream(cols, header.height)

    def read_transcript(path: str) -> str | None:
        return adapter.recorded_turn_text(str(base / path))

    reader = adapter.screen_reader(adapter.profile())
    observer = AgentObserver(reader, read_transcript=read_transcript, screen=screen)
    for event in events:
        if event.kind == "o":
            stream.feed(event.data)
            observer.on_screen(screen, event.time)
        elif event.kind == "r" and columns is None:
            width, _, height = event.data.partition("x")
            screen.resize(int(height), int(width))
            observer.resized(screen)
        elif event.kind == "m" and event.data.startswith(HOOK_PREFIX):
            hook = json.loads(event.data.removeprefix(HOOK_PREFIX))
            observer.on_hook(hook["event"], hook.get("payload") or {}, event.time)
        elif event.kind == "m" and event.data.startswith(EXIT_PREFIX):
            status = json.loads(event.data.removeprefix(EXIT_PREFIX))
            observer.on_exit(status.get("code"), status.get("signal"), event.time)
    return ReplayResult(chosen, list(observer.events), cols, header.height)


def describe_event(event: ObserverEvent) -> dict[str, object]:
    """A JSON-ready view of one pipeline event (what `semo parse --json` prints)."""
    head: dict[str, object] = {"at": round(event.at, 3)}
    if isinstance(event, MessageFound):
        return head | {"type": "message", "source": event.source} | event.message.model_dump()
    if isinstance(event, MalformedMessage):
        return head | {"type": "protocol_error", "source": event.source} | event.error.model_dump()
    if isinstance(event, Signal):
        return head | {
            "type": "signal",
            "signal": event.kind,
            "pattern": event.pattern,
            "priority": event.priority,
            "source": event.source,
            "decisive": event.decisive,
            "text": event.text,
        }
    return head | {
        "type": "state",
        "state": str(event.state),
        "previous": str(event.previous),
        "source": event.source,
        "reason": event.reason,
    }


def format_event(event: ObserverEvent) -> str:
    """One line per event for people: time, type, what, and where it was seen."""
    data = describe_event(event)
    at = f"{data.pop('at'):9.3f}"
    kind = data.pop("type")
    source = data.pop("source")
    if kind == "state":
        return f"{at}  state    {data['state']:<14} ({source}: {data['reason']})"
    if kind == "signal":
        informational = "" if data["decisive"] else ", informational"
        what = f"{data['pattern']} [{source}{informational}]"
        return f"{at}  signal   {data['signal']:<14} {what}: {data['text']}"
    if kind == "message":
        name = data.pop("kind")
        return f"{at}  message  {name:<14} {json.dumps(data, ensure_ascii=False)} [{source}]"
    return f"{at}  error    {data['kind']:<14} {data['detail']} [{source}]"
