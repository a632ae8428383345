"""Select Graphic Rendition (CSI ... m), including the colon sub-parameter forms.

pyte parses `38:2::r:g:b` or `4:3` as garbage; here both the semicolon form (`38;2;r;g;b`,
`38;5;n`) and the ITU T.416 colon form (`38:2::r:g:b`, `38:2:r:g:b`, `38:5:n`, `4:3`) work.
Colours use pyte's vocabulary: ANSI names ("red", "brightblue", "default") or "rrggbb" hex.
"""

from __future__ import annotations

import re

from pyte import graphics

from semo.engine.terminal.cell import Cell

_ANSI_NAMES = [graphics.FG_ANSI[30 + i] for i in range(8)]
_BRIGHT_NAMES = ["bright" + name for name in _ANSI_NAMES]
_PALETTE = _ANSI_NAMES + _BRIGHT_NAMES + graphics.FG_BG_256[16:]

_ON = {1: "bold", 2: "dim", 3: "italics", 4: "underscore", 5: "blink", 6: "blink", 7: "reverse"}
_ON[9] = "strikethrough"
_ON[21] = "underscore"
_OFF: dict[int, tuple[str, ...]] = {
    23: ("italics",),
    24: ("underscore",),
    25: ("blink",),
    27: ("reverse",),
}
_OFF[22] = ("bold", "dim")
_OFF[29] = ("strikethrough",)

Groups = list[list[int | None]]
_VALID = re.compile(r"[0-9;:]*").fullmatch


def parse_params(params: str) -> Groups:
    """`"1;38:2::1:2:3"` -> `[[1], [38, 2, None, 1, 2, 3]]`; empty fields become None, numbers
    past 65535 become 65535 (they mean nothing here; int() of thousands of digits raises)."""
    return [
        [_number(field) if field else None for field in group.split(":")]
        for group in params.split(";")
    ]


def _number(digits: str) -> int:
    if len(digits) > 5:
        digits = digits.lstrip("0")
        if len(digits) > 5:
            return 65535
    return min(int(digits or "0"), 65535)


def _extended_colour(groups: Groups, index: int) -> tuple[str | None, int]:
    """Decode 38/48/58 at groups[index]; return (colour or None, groups consumed)."""
    head = groups[index]
    if len(head) > 1:  # colon form: everything is inside this one group
        mode = head[1]
        if mode == 5 and len(head) >= 3 and head[2] is not None:
            return _palette(head[2]), 1
        if mode == 2:
            rgb = head[3:6] if len(head) >= 6 else head[2:5]
            if len(rgb) == 3:
                return _hex(rgb), 1
        return None, 1
    rest = [g[0] for g in groups[index + 1 : index + 5]]
    if rest[:1] == [5] and len(rest) >= 2 and rest[1] is not None:
        return _palette(rest[1]), 3
    if rest[:1] == [2] and len(rest) >= 4:
        return _hex(rest[1:4]), 5
    return None, 1 + min(len(rest), 1)


def _palette(index: int) -> str | None:
    return _PALETTE[index] if 0 <= index < 256 else None


def _hex(rgb: list[int | None]) -> str:
    return "".join(f"{min(max(c or 0, 0), 255):02x}" for c in rgb)


def apply_sgr(attrs: Cell, params: str, default: Cell) -> Cell:
    """Return `attrs` changed by the SGR parameter string `params` (the text between CSI and m)."""
    if params in ("", "0"):
        return default
    if not _VALID(params):  # `<=>?` inside the parameters: tmux ignores the whole sequence
        return attrs
    groups = parse_params(params)
    changes: dict[str, object] = {}
    index = 0
    while index < len(groups):
        group = groups[index]
        code = group[0] or 0
        index += 1
        if code == 0:
            changes = dict(default._asdict())
            del changes["data"]
        elif code == 4 and len(group) > 1:  # 4:0 off, 4:1..5 underline styles
            changes["underscore"] = bool(group[1])
        elif code in _ON:
            changes[_ON[code]] = True
        elif code in _OFF:
            for name in _OFF[code]:
                changes[name] = False
        elif 30 <= code <= 37:
            changes["fg"] = _ANSI_NAMES[code - 30]
        elif 40 <= code <= 47:
            changes["bg"] = _ANSI_NAMES[code - 40]
        elif 90 <= code <= 97:
            changes["fg"] = _BRIGHT_NAMES[code - 90]
        elif 100 <= code <= 107:
            changes["bg"] = _BRIGHT_NAMES[code - 100]
        elif code == 39:
            changes["fg"] = "default"
        elif code == 49:
            changes["bg"] = "default"
        elif code in (38, 48, 58):
            colour, used = _extended_colour(groups, index - 1)
            index += used - 1
            if colour is not None and code != 58:  # 58 = underline colour: parsed, not kept
                changes["fg" if code == 38 else "bg"] = colour
    # changes holds str colours and bool flags by field name: more than one type for **
    return attrs._replace(**changes) if changes else attrs  # type: ignore[arg-type]
