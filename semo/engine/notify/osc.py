"""Terminal desktop notifications: OSC 9 and OSC 777 and the bell, as bytes for a terminal.

Terminals such as iTerm2, WezTerm, foot, Windows Terminal and urxvt show OSC 9 or OSC 777 as
desktop notifications; they travel through SSH like any output; inside tmux they are wrapped
in tmux's passthrough (tmux 3.3+ needs `set -g allow-passthrough on`). The texts are cleaned
here whatever the caller did (every control character removed, `;` out of OSC 777's title):
a single ESC or BEL in them would end the sequence and let the rest act on the terminal.
Standard library only: the console imports it.
"""

from __future__ import annotations

import re

_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
#: characters of a notification's body at most
MAX_BODY = 240


def _inert(text: str, limit: int) -> str:
    return _CONTROLS.sub("", text)[:limit]


def _tmux(sequence: str) -> str:
    """`sequence` in tmux's DCS passthrough (each ESC doubled)."""
    return "\x1bPtmux;" + sequence.replace("\x1b", "\x1b\x1b") + "\x1b\\"


def notification_sequences(headline: str, body: str, *, tmux: bool, bell: bool = True) -> str:
    """OSC 9 (body), OSC 777 (title and body), then BEL: what the terminal is sent."""
    title = _inert(headline, 100).replace(";", ",")
    text = _inert(body, MAX_BODY)
    if not text.startswith("semo"):
        text = "semo: " + text  # never a digit first: "9;4;..." is a progress report
    osc9 = f"\x1b]9;{text}\x1b\\"
    osc777 = f"\x1b]777;notify;{title};{text}\x1b\\"
    if tmux:
        osc9, osc777 = _tmux(osc9), _tmux(osc777)
    return osc9 + osc777 + ("\a" if bell else "")
