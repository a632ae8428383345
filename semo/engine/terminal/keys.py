"""Key names -> the bytes a terminal sends, honouring the child's cursor-key mode.

Notation (used by `semo capture --keys`, commands and the console): plain text is typed as is;
`<Name>` is a key: Enter, Esc, Tab, S-Tab, BS, Space, Up, Down, Left, Right, Home, End, PgUp,
PgDn, Ins, Del, F1..F12; modifiers as prefixes: `<C-c>`, `<M-x>`, `<C-Up>`, `<S-Right>`,
`<C-M-Left>`; `<Sleep:200>` pauses 200 ms; `<lt>` types a literal `<`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

_FUNCTION_TILDE = {5: 15, 6: 17, 7: 18, 8: 19, 9: 20, 10: 21, 11: 23, 12: 24}
_CURSOR = {"Up": "A", "Down": "B", "Right": "C", "Left": "D", "Home": "H", "End": "F"}
_TILDE = {"Ins": 2, "Del": 3, "PgUp": 5, "PgDn": 6}
_PLAIN = {
    "Enter": "\r",
    "Esc": "\x1b",
    "Tab": "\t",
    "BS": "\x7f",
    "Space": " ",
    "lt": "<",
    "gt": ">",
}
_ALIASES = {
    "Return": "Enter",
    "CR": "Enter",
    "Escape": "Esc",
    "Backspace": "BS",
    "PageUp": "PgUp",
    "PageDown": "PgDn",
    "Insert": "Ins",
    "Delete": "Del",
    "BTab": "S-Tab",
}
_TOKEN = re.compile(r"<([^<>\s]+)>")
_MOD_BITS = {"S": 1, "M": 2, "C": 4}
_MOD_NAMES = {"S": "S", "M": "M", "A": "M", "C": "C"}


class KeySpecError(ValueError):
    """An unknown or malformed key name."""


@dataclass(frozen=True)
class Sleep:
    milliseconds: int


KeyAction = str | Sleep
T = TypeVar("T")


def parse_keys(spec: str, *, application_cursor: bool = False) -> list[KeyAction]:
    """Split a key spec into text to write and sleeps, e.g. `ls<Enter><Sleep:100>q`."""
    return map_key_spec(spec, lambda name: _named(name, application_cursor))


def map_key_spec(spec: str, on_key: Callable[[str], T]) -> list[str | T]:
    """Tokenize a key spec: literal text stays text, each `<Name>` becomes `on_key(Name)`;
    adjacent text (including keys that map to text) is merged."""
    actions: list[str | T] = []
    pos = 0
    for match in _TOKEN.finditer(spec):
        actions.append(spec[pos : match.start()])
        actions.append(on_key(match.group(1)))
        pos = match.end()
    actions.append(spec[pos:])
    merged: list[str | T] = []
    for action in actions:
        if isinstance(action, str) and merged and isinstance(merged[-1], str):
            merged[-1] += action
        elif action != "":
            merged.append(action)
    return merged


def encode_key(name: str, *, application_cursor: bool = False) -> str:
    """The bytes (as text) for one key name without brackets, e.g. `C-c` or `Up`."""
    action = _named(name, application_cursor)
    if isinstance(action, Sleep):
        raise KeySpecError(f"{name!r} is a pause, not a key")
    return action


def _named(name: str, application_cursor: bool) -> KeyAction:
    if name.startswith("Sleep:"):
        value = name.removeprefix("Sleep:")
        if not value.isdigit():
            raise KeySpecError(f"<{name}>: Sleep takes milliseconds, e.g. <Sleep:200>")
        return Sleep(int(value))
    name = _ALIASES.get(name, name)
    modifiers, base = _split_modifiers(name)
    if base == "Tab" and modifiers == {"S"}:
        return "\x1b[Z"
    if base == "Space" and "C" in modifiers:
        return ("\x1b" if "M" in modifiers else "") + "\x00"
    if base in _PLAIN and not modifiers - {"M"}:
        return ("\x1b" if "M" in modifiers else "") + _PLAIN[base]
    if base in _CURSOR:
        return _csi_key(_CURSOR[base], modifiers, application_cursor, name)
    if base in _TILDE:
        return _tilde_key(_TILDE[base], modifiers)
    if re.fullmatch(r"F([1-9]|1[0-2])", base):
        number = int(base[1:])
        if number <= 4:
            return _csi_key("PQRS"[number - 1], modifiers, True, name)
        return _tilde_key(_FUNCTION_TILDE[number], modifiers)
    if len(base) == 1 and modifiers and modifiers <= {"C", "M"}:
        char = _control(base, name) if "C" in modifiers else base
        return ("\x1b" if "M" in modifiers else "") + char
    raise KeySpecError(f"unknown key <{name}>")


def _split_modifiers(name: str) -> tuple[set[str], str]:
    modifiers: set[str] = set()
    while len(name) > 2 and name[1] == "-" and name[0] in _MOD_NAMES:
        modifiers.add(_MOD_NAMES[name[0]])
        name = name[2:]
    return modifiers, name


def _control(char: str, name: str) -> str:
    if char.isalpha():
        return chr(ord(char.lower()) - 96)
    table = {"@": "\x00", " ": "\x00", "[": "\x1b", "\\": "\x1c", "]": "\x1d"}
    table |= {"^": "\x1e", "_": "\x1f", "?": "\x7f"}
    if char not in table:
        raise KeySpecError(f"<{name}>: no control character for {char!r}")
    return table[char]


def _modifier_param(modifiers: set[str]) -> int:
    return 1 + sum(_MOD_BITS[m] for m in modifiers)


def _csi_key(final: str, modifiers: set[str], ss3: bool, name: str) -> str:
    if modifiers:
        return f"\x1b[1;{_modifier_param(modifiers)}{final}"
    return ("\x1bO" if ss3 else "\x1b[") + final


def _tilde_key(number: int, modifiers: set[str]) -> str:
    if modifiers:
        return f"\x1b[{number};{_modifier_param(modifiers)}~"
    return f"\x1b[{number}~"
