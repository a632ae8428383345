"""Textual key events -> the bytes a terminal would send to the child program.

Textual names keys like `ctrl+up`, `alt+x`, `shift+tab`, `f5`, `left_square_bracket`; the child
expects what xterm sends. The named keys are translated to `semo.engine.terminal.keys` notation and
encoded there, so the console and `semo capture --keys` agree on every sequence (cursor keys in
CSI or SS3 form by the child's application-cursor-keys mode, `CSI 1;N X` and `CSI n;N ~` for
modified keys, F1-F4 as SS3). Keys nobody can type to a terminal (e.g. a bare `shift`) give None.
"""

from __future__ import annotations

from textual.keys import REPLACED_KEYS, key_to_character

from semo.engine.terminal.keys import KeySpecError, encode_key

_NAMED = {
    "enter": "Enter",
    "tab": "Tab",
    "escape": "Esc",
    "backspace": "BS",
    "space": "Space",
    "up": "Up",
    "down": "Down",
    "left": "Left",
    "right": "Right",
    "home": "Home",
    "end": "End",
    "pageup": "PgUp",
    "pagedown": "PgDn",
    "insert": "Ins",
    "delete": "Del",
} | {f"f{n}": f"F{n}" for n in range(1, 13)}
# xterm reports shift+F1..F12 as F13..F24; Textual names them that way.
_SHIFTED_F = {f"f{n + 12}": f"F{n}" for n in range(1, 13)}
_MODIFIERS = {"shift": "S", "ctrl": "C", "alt": "M", "meta": "M"}
_ESC = "\x1b"
_PASTE_END = "\x1b[201~"


def _is_control(character: str | None) -> bool:
    return (
        character is not None
        and len(character) == 1
        and (ord(character) < 0x20 or character == "\x7f")
    )


def key_to_bytes(
    key: str, character: str | None = None, *, application_cursor: bool = False
) -> str | None:
    """What the child should receive for a Textual key (`event.key`, `event.character`).

    `application_cursor` is the child's DECCKM (`CSI ? 1 h`): arrows, Home and End go out as
    `ESC O A` instead of `ESC [ A`. Returns None for keys that send nothing.
    """
    *modifier_names, base = key.split("+")
    modifiers = {_MODIFIERS[m] for m in modifier_names if m in _MODIFIERS}
    if len(modifier_names) != sum(m in _MODIFIERS for m in modifier_names):
        return None  # super/hyper chords: a terminal has no bytes for them
    base_name: str | None
    if base in _SHIFTED_F:
        modifiers.add("S")
        base_name = _SHIFTED_F[base]
    else:
        base_name = _NAMED.get(base)
    if base_name is not None and base_name not in ("Enter", "Tab", "Esc", "BS", "Space"):
        return _encode(base_name, modifiers, application_cursor)
    # What a real terminal sent for enter, tab, escape, backspace, ctrl+letter (Textual keeps
    # the control character; ctrl+h and backspace differ only there).
    if _is_control(character) and modifiers <= {"C"}:
        return character
    if base_name is not None:
        if base_name == "Tab" and modifiers == {"S"}:
            return "\x1b[Z"
        if base_name == "Space" and "C" in modifiers:
            return (_ESC if "M" in modifiers else "") + "\x00"
        prefix = _ESC if "M" in modifiers else ""
        return prefix + _encode(base_name, set(), application_cursor)
    char = key_to_character(REPLACED_KEYS.get(base, base)) if len(base) > 1 else base
    if char is None:
        return character if character and not modifiers else None
    prefix = _ESC if "M" in modifiers else ""
    if "C" in modifiers:
        try:
            return prefix + encode_key(f"C-{char.lower()}")
        except KeySpecError:  # ctrl+digit and the like: xterm sends the plain character
            return prefix + char
    if "S" in modifiers and char.isalpha():
        char = char.upper()
    if character and not _is_control(character) and not modifiers - {"S", "M"}:
        char = character  # the text the keyboard produced (layouts, shifted symbols)
    return prefix + char


def _encode(name: str, modifiers: set[str], application_cursor: bool) -> str:
    spec = "".join(f"{m}-" for m in sorted(modifiers, key="CMS".index)) + name
    try:
        return encode_key(spec, application_cursor=application_cursor)
    except KeySpecError:  # e.g. ctrl+enter: xterm sends the key without the modifier
        return encode_key(name, application_cursor=application_cursor)


def paste_to_bytes(text: str, *, bracketed: bool) -> str:
    """Pasted text as a terminal sends it: newlines as CR, wrapped in ESC[200~ ... ESC[201~
    when the child enabled bracketed paste (mode 2004). End markers inside the text are removed
    until none is left (one pass over `ESC[20ESC[201~1~` rebuilds one), so a paste can never end
    the bracket early."""
    text = text.replace("\r\n", "\r").replace("\n", "\r")
    if not bracketed:
        return text
    while _PASTE_END in text:
        text = text.replace(_PASTE_END, "")
    return "\x1b[200~" + text + _PASTE_END


def prefix_key(spec: str) -> str:
    """`[console] prefix` ("ctrl+]", "ctrl+b") as Textual names it (ctrl+right_square_bracket)."""
    from textual.keys import _character_to_key

    modifier, _, base = spec.rpartition("+")
    if len(base) == 1:
        base = _character_to_key(base)
    return f"{modifier}+{base}" if modifier else base
