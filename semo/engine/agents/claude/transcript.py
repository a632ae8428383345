"""Reading a turn's text from a Claude Code transcript named by a (possibly hostile) Stop hook.

How it works: docs/SESSIONS.md, "The turn's text from the transcript".
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from semo.engine import safe_json
from semo.engine.protocol.hooks import TurnTextRefused

__all__ = [
    "TAIL_BYTES",
    "TranscriptRefused",
    "TranscriptScope",
    "project_slug",
    "read_turn_text",
    "read_turn_text_at",
    "turn_text_from_lines",
    "turn_text_from_transcript",
]

#: At most this much of the end of a transcript is read.
TAIL_BYTES = 4 * 1024 * 1024

#: Nesting accepted in one transcript line (tool inputs nest a little; this is far from both).
LINE_MAX_DEPTH = 100

#: How often a transcript that is behind the Stop hook is looked at again.
_POLL_SECONDS = 0.02

#: Claude Code cuts escaped project paths longer than this and appends ``-<hash>``.
_SLUG_MAX = 200

_NOT_ALNUM = re.compile(r"[^a-zA-Z0-9]")


class TranscriptRefused(TurnTextRefused):
    """The transcript path or file is not one the engine reads; the message says why."""


def project_slug(path: str) -> str:
    """The folder name Claude Code gives the project at ``path`` (uncut). JavaScript replaces
    UTF-16 code units: a character outside the BMP becomes two dashes."""
    return _NOT_ALNUM.sub(lambda m: "--" if ord(m.group()) > 0xFFFF else "-", path)


@dataclass(frozen=True)
class TranscriptScope:
    """Where one session's transcripts may be: ``projects/<slug>`` for any of ``slugs``.

    The session's TurnTextReader (semo.engine.protocol.hooks): a Stop's ``transcript_path``."""

    #: the hook whose payload names a transcript
    event: ClassVar[str] = "Stop"

    projects: Path
    slugs: frozenset[str]

    def source(self, payload: dict[str, Any]) -> str | None:
        path = payload.get("transcript_path")
        return None if path is None else f"transcript_path {str(path)[:200]!r}"

    def read(self, payload: dict[str, Any], *, wait: float) -> str | None:
        """The turn's text from the Stop's transcript (:func:`read_turn_text`)."""
        path: Any = payload.get("transcript_path")  # untrusted: read_turn_text checks it
        last = payload.get("last_assistant_message")
        final_text = last if isinstance(last, str) else ""
        return read_turn_text(path, self, final_text=final_text, wait=wait)

    @classmethod
    def for_session(cls, worktree: Path | str, env: Mapping[str, str]) -> TranscriptScope:
        """The scope of a Claude Code session started in ``worktree`` with environment ``env``."""
        config = env.get("CLAUDE_CONFIG_DIR")
        if config:
            base = Path(config)
        else:
            home = env.get("HOME")
            base = (Path(home) if home else Path.home()) / ".claude"
        worktree = os.fspath(worktree)
        slugs = {project_slug(worktree), project_slug(os.path.realpath(worktree))}
        return cls(Path(os.path.realpath(base / "projects")), frozenset(slugs))

    def folder_of(self, path: str) -> Path:
        """The real folder holding ``path`` if it is one of this scope's; else refused."""
        if not isinstance(path, str) or not path or "\0" in path or not os.path.isabs(path):
            raise TranscriptRefused("not an absolute path")
        parent, name = os.path.split(os.path.normpath(path))
        if not name.endswith(".jsonl") or name.startswith("."):
            raise TranscriptRefused("not a .jsonl file")
        real = Path(os.path.realpath(parent))
        if real.parent != self.projects or not self._is_ours(real.name):
            raise TranscriptRefused("outside the session's Claude projects folder")
        return real

    def _is_ours(self, name: str) -> bool:
        for slug in self.slugs:
            if name == slug:
                return True
            if len(slug) > _SLUG_MAX and name.startswith(slug[:_SLUG_MAX] + "-"):
                return True
        return False


def read_turn_text(
    path: str,
    scope: TranscriptScope,
    *,
    final_text: str = "",
    wait: float = 0.0,
    tail_bytes: int = TAIL_BYTES,
) -> str | None:
    """The last turn's assistant text from the transcript at ``path``, or None if it holds none.

    Claude Code runs the Stop hook before it has written the turn's last entry (about 0.1 s
    before, in 2.1.328): when the text read holds earlier blocks of the turn but does not end
    with ``final_text`` (the hook's ``last_assistant_message``), the file is read again as it
    grows, for up to ``wait`` seconds. Blocking (run it in a thread). Raises
    :class:`TranscriptRefused` for a path outside ``scope``, a symlink, anything but a regular
    file, or a file that cannot be opened.
    """
    folder = scope.folder_of(path)
    name = os.path.basename(os.path.normpath(path))
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        dir_fd = os.open(folder, flags | os.O_DIRECTORY)
    except OSError as exc:
        raise TranscriptRefused(f"cannot open its folder ({exc.strerror})") from None
    try:
        try:
            fd = os.open(name, flags | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=dir_fd)
        except OSError as exc:
            raise TranscriptRefused(f"cannot open it ({exc.strerror})") from None
    finally:
        os.close(dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TranscriptRefused("not a regular file")
        size = st.st_size
        text = _tail_turn_text(fd, size, tail_bytes)
        deadline = time.monotonic() + wait
        final_text = final_text.strip()
        # the turn's entries may not be in the file yet at all (None): wait for them as well
        while (text is None and final_text) or (text is not None and not text.endswith(final_text)):
            if time.monotonic() >= deadline:
                break
            time.sleep(_POLL_SECONDS)
            grown = os.fstat(fd).st_size
            if grown != size:
                size = grown
                text = _tail_turn_text(fd, size, tail_bytes)
        return text
    finally:
        os.close(fd)


def read_turn_text_at(path: str | os.PathLike[str], *, tail_bytes: int = TAIL_BYTES) -> str | None:
    """The last turn's assistant text of the transcript at a path the caller chose (a recorded
    corpus, a replay), or None when it holds none or cannot be read. No scope check, but the
    same bounded read as `read_turn_text`: the last ``tail_bytes`` of a regular file (a FIFO
    or a device is not read), lines parsed back to the turn's prompt with bounded JSON."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        return _tail_turn_text(fd, st.st_size, tail_bytes)
    except OSError:
        return None
    finally:
        os.close(fd)


def _tail_turn_text(fd: int, size: int, tail_bytes: int) -> str | None:
    start = max(0, size - tail_bytes)
    lines = _read_from(fd, start, size - start).split(b"\n")
    if start > 0:
        lines = lines[1:]  # the first one is cut
    return turn_text_from_lines(reversed(lines), max_bytes=tail_bytes)


def _read_from(fd: int, offset: int, size: int) -> bytes:
    chunks: list[bytes] = []
    while size > 0:
        chunk = os.pread(fd, min(size, 1 << 20), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def turn_text_from_lines(
    lines_backwards: Iterable[bytes | str], *, max_bytes: int = TAIL_BYTES
) -> str | None:
    """All assistant text blocks after the last prompt, given the transcript's JSONL lines from
    the last one backwards. Lines that are not JSON objects are skipped, as are side chains."""
    texts: list[str] = []
    for raw in lines_backwards:
        if not raw.strip():
            continue
        try:
            entry = safe_json.loads(raw, max_bytes=max_bytes, max_depth=LINE_MAX_DEPTH)
        except safe_json.JSONInputError:
            continue
        if not isinstance(entry, dict) or entry.get("isSidechain"):
            continue
        message = entry.get("message")
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if entry.get("type") == "user" and _is_prompt(content):
            break
        if entry.get("type") == "assistant" and isinstance(content, list):
            blocks = [
                block["text"]
                for block in content
                if isinstance(block, dict)
                and block.get("type") == "text"
                and isinstance(block.get("text"), str)
            ]
            texts.extend(reversed(blocks))
    return "\n\n".join(reversed(texts)) if texts else None


def _is_prompt(content: object) -> bool:
    if isinstance(content, str):
        return True
    return isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == "text" for block in content
    )


def turn_text_from_transcript(path: str) -> str | None:
    """All assistant text of the last turn in a Claude Code transcript (JSONL), or None.

    The Stop hook's `last_assistant_message` holds only the turn's final text block; a marker
    written before a tool call would be lost without this. The engine reads transcripts named
    by hooks through `read_turn_text` (scoped to the session's folder); this is the same
    bounded reader for a path the caller chose (replays, the recorded corpus).
    """
    return read_turn_text_at(path)
