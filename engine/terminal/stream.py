"""Turns decoded terminal output into calls on a `TerminalScreen`.

pyte's Stream feeds every byte of every escape sequence through a Python generator, prints
colon-form SGR, DCS/APC strings and private-prefix CSI (`CSI > 4;2 m`, `CSI < u`) as text or
misapplies them, and loses sequences split across reads. This stream tokenizes with one regex
(ECMA-48 grammar: CSI params/intermediates/final, OSC, DCS/APC/PM/SOS strings, ESC sequences),
keeps an incomplete tail between feeds, ignores what it does not know, and has a batch path for
plain scrolling output that never builds cells for rows that scroll away within the same feed.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from itertools import repeat

from pyte import modes
from wcwidth import wcwidth

from engine.terminal.plain import PlainBatch
from engine.terminal.screen import _HAS_REGIONAL_INDICATOR, TerminalScreen

log = logging.getLogger("semo.terminal")

_TOKEN = re.compile(
    r"(?P<text>[^\x00-\x1f\x7f-\x9f]+)"
    r"|\x1b\[(?P<params>[0-?]*)(?P<inter>[ -/]*)(?P<final>[@-~])"
    r"|(?P<bad_csi>\x1b\[[0-?]*[ -/]+[0-?][ -?]*[@-~])"
    r"|\x1b\](?P<osc>[^\x07\x1b\x9c]*)(?P<osc_end>\x07|\x1b\\|\x9c)"
    r"|(?P<string>\x1b[P_^X].*?(?:\x1b\\|\x9c))"
    r"|\x1b(?P<esc_inter>[ -/]*)(?P<esc_final>[0-OQ-WYZ\\`a-~])"
    r"|(?P<ctl>[\x00-\x1a\x1c-\x1f\x7f-\x9f])",
    re.DOTALL,
)
_TEXT, _PARAMS, _INTER, _FINAL, _CTL = (
    _TOKEN.groupindex[name] for name in ("text", "params", "inter", "final", "ctl")
)
_PARTIAL = re.compile(
    r"\x1b(?:\[[ -?]*|\][^\x07\x1b\x9c]*\x1b?|[P_^X].*|[ -/]*)?\Z",
    re.DOTALL,
)
_PLAIN_RUN = re.compile(r"(?:[ -~\xa0-\U0010ffff]+|\r|\n|\x1b\[[0-9;:]*m)+")
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
XTVERSION_REPLY = "\x1bP>|semo\x1b\\"
MAX_PENDING = 4096  # an unfinished sequence longer than this is skipped to its end, unkept
MAX_OSC = 4096  # longer OSC bodies (titles, notifications, cwd) are cut to this
# Where a sequence that outgrew MAX_PENDING ends, by its introducer (after ESC). OSC ends at
# BEL, ST or any ESC (ESC other than ST is left for the parser); CSI at its final byte or at
# anything that cannot be part of it; DCS/APC/PM/SOS only at ST.
_SKIP_END = {
    "]": re.compile(r"[\x07\x9c\x1b]"),
    "[": re.compile(r"[^ -?]"),
    "P": re.compile(r"\x1b\\|\x9c"),
}
_SKIP_END["_"] = _SKIP_END["^"] = _SKIP_END["X"] = _SKIP_END["P"]
_SKIP_END[""] = re.compile(r"[^ -/]")  # ESC + endless intermediates


def _ints(params: str) -> list[int]:
    """CSI parameters as ints (missing -> 0); sub-parameters after ':' are ignored."""
    if params.isdigit():
        return [min(int(params), 65535)]
    if not params:
        return []
    out = []
    for field in params.split(";"):
        head = field.split(":", 1)[0]
        out.append(min(int(head), 65535) if head.isdigit() else 0)
    return out


def _narrow_prefix(text: str) -> str:
    """The part of `text` before its first character that is not one cell wide (wide, zero
    width, a regional indicator): the batch path counts one cell per character."""
    for found in _NON_ASCII.finditer(text):
        chars = found.group()
        cut = bytes(map(_one_cell, map(wcwidth, chars), repeat(0))).find(0)  # 1 = one cell
        flag = _HAS_REGIONAL_INDICATOR(chars)  # wcwidth says 2, tmux gives 1: general path
        if flag is not None and (cut < 0 or flag.start() < cut):
            cut = flag.start()
        if cut >= 0:
            return text[: found.start() + cut]
    return text


_one_cell = {1: 1}.get


def _first(params: str) -> int:
    args = _ints(params)
    return args[0] if args else 0


class TerminalStream:
    """Feed it decoded text; it drives the screen. Safe across arbitrary chunk boundaries."""

    def __init__(self, screen: TerminalScreen, *, batch: bool = True) -> None:
        self.screen = screen
        self.batch_enabled = batch
        self.unknown_sequences = 0
        self._pending = ""
        self._skipping: re.Pattern[str] | None = None  # inside an oversize sequence
        self._skip_esc = False  # the skipped DCS data ended in ESC (maybe half an ST)
        self._batch = PlainBatch(screen)
        self._csi: dict[tuple[str, str, str], Callable[[list[int], str], None]] = {}
        self._register_csi()
        # CSI without prefix or intermediates, by final byte, taking the raw parameters: the
        # common ones parse them directly (TUIs send thousands of CUP/EL/SGR per frame)
        self._plain_csi: dict[str, Callable[[str], None]] = {
            final: (lambda params, handler=handler: handler(_ints(params), params))
            for (prefix, inter, final), handler in self._csi.items()
            if not prefix and not inter
        }
        self._register_plain_csi()
        screen = self.screen
        self._controls: dict[str, Callable[[], None]] = {
            "\r": screen.carriage_return,
            "\n": screen.linefeed,
            "\x0b": screen.linefeed,
            "\x0c": screen.linefeed,
            "\x08": screen.backspace,
            "\t": screen.tab,
            "\x07": screen.bell,
            "\x0e": screen.shift_out,
            "\x0f": screen.shift_in,
        }

    # -- feeding ----------------------------------------------------------------------------

    def feed(self, text: str) -> None:
        if self._skipping is not None:
            text = self._skip(text)
            if not text:
                return
        data = self._pending + text if self._pending else text
        self._pending = ""
        screen = self.screen
        match_token = _TOKEN.match
        draw = screen.draw
        plain_csi_for = self._plain_csi.get
        controls = self._controls
        batch = self.batch_enabled
        bottom = screen.lines - 1
        pos, end = 0, len(data)
        no_batch_before = 0  # after a declined run, do not rescan it (keeps feed linear)
        while pos < end:
            if (
                batch
                and pos >= no_batch_before
                and (screen.deferred_rows or (data[pos] in "\r\n" and screen.cursor.y == bottom))
                and self._batch_ready()
            ):
                run = _PLAIN_RUN.match(data, pos)
                if run is not None:
                    text = run.group()
                    if not text.isascii():
                        text = _narrow_prefix(text)
                    consumed = self._batch.feed(text) if text else 0
                    if consumed:
                        pos += consumed
                        continue
                    no_batch_before = run.end()
            token = match_token(data, pos)
            if token is None:
                if _PARTIAL.match(data, pos):
                    rest = data[pos:]
                    if len(rest) <= MAX_PENDING:
                        self._pending = rest
                    else:
                        self._start_skip(rest)
                    return
                self.unknown_sequences += 1
                pos += 1  # a malformed escape: drop the ESC, keep what follows
                continue
            pos = token.end()
            kind = token.lastgroup
            if kind == "text":
                draw(token.group(_TEXT))
            elif kind == "final":
                params, inter, final = token.group(_PARAMS, _INTER, _FINAL)
                if not inter and (not params or params[0] not in "<=>?"):
                    plain_csi = plain_csi_for(final)
                    if plain_csi is not None:
                        plain_csi(params)
                        continue
                self._dispatch_csi(params, inter, final)
            elif kind == "ctl":
                control = controls.get(token.group(_CTL))
                if control is not None:
                    control()
            elif kind == "osc_end":
                self._osc(token.group("osc"), token.group("osc_end"))
            elif kind == "esc_final":
                self._escape(token.group("esc_inter"), token.group("esc_final"))
            elif kind == "bad_csi":
                self.unknown_sequences += 1
            # "string" (DCS/APC/PM/SOS) is consumed and ignored

    def _start_skip(self, rest: str) -> None:
        """`rest` is an unfinished sequence too long to keep: drop it and whatever follows up
        to its end, so memory stays bounded and its payload never shows up as text."""
        self.unknown_sequences += 1
        kind = rest[1] if rest[1] in _SKIP_END else ""
        self._skipping = _SKIP_END[kind]
        self._skip_esc = kind in "P_^X" and kind != "" and rest.endswith("\x1b")

    def _skip(self, text: str) -> str:
        """Drop the skipped sequence's part of `text`; return what follows its end."""
        pattern = self._skipping
        assert pattern is not None
        if self._skip_esc and text.startswith("\\"):
            self._skipping, self._skip_esc = None, False
            return text[1:]
        end = pattern.search(text)
        if end is None:
            self._skip_esc = pattern is _SKIP_END["P"] and text.endswith("\x1b")
            return ""
        self._skipping, self._skip_esc = None, False
        found = end.group()
        if pattern is _SKIP_END["]"] and found == "\x1b":
            return text[end.start() :]  # ST or another sequence: the parser reads it
        if pattern is _SKIP_END["["] and not "@" <= found <= "~":
            return text[end.start() :]  # a control inside CSI: the CSI is abandoned
        if pattern is _SKIP_END[""] and not "0" <= found <= "~":
            return text[end.start() :]
        return text[end.end() :]

    def _batch_ready(self) -> bool:
        screen = self.screen
        return (
            screen.margins is None
            and screen.cursor.y == screen.lines - 1
            and modes.DECAWM in screen.mode
            and modes.IRM not in screen.mode
            and modes.LNM not in screen.mode
            and screen.plain_text_ok()
        )

    # -- C0 controls and ESC sequences -----------------------------------------------------

    def _control(self, char: str) -> None:
        control = self._controls.get(char)
        if control is not None:
            control()

    def _escape(self, inter: str, final: str) -> None:
        screen = self.screen
        if inter in ("(", ")"):
            screen.define_charset(final, inter)
        elif inter == "#":
            if final == "8":
                screen.alignment_display()
        elif inter:
            return  # ESC % G and friends: nothing to do in UTF-8
        elif final == "7":
            screen.save_cursor()
        elif final == "8":
            screen.restore_cursor()
        elif final == "D":
            screen.index()
        elif final == "E":
            screen.carriage_return()
            screen.index()
        elif final == "M":
            screen.reverse_index()
        elif final == "H":
            screen.set_tab_stop()
        elif final == "c":
            screen.reset()
        elif final in "=>":
            screen.keypad_application = final == "="
        elif final != "\\":
            self.unknown_sequences += 1

    # -- OSC ---------------------------------------------------------------------------------

    def _osc(self, body: str, terminator: str) -> None:
        code, _, arg = body[:MAX_OSC].partition(";")
        screen = self.screen
        if code in ("0", "1"):
            screen.set_icon_name(arg)
        if code in ("0", "2"):
            screen.set_title(arg)
        elif code == "7":
            screen.cwd = re.sub(r"^file://[^/]*", "", arg) or None
        elif code == "9" and not arg.startswith("4;"):
            screen.notifications.append(arg)
        elif code == "777" and arg.startswith("notify;"):
            screen.notifications.append(arg.removeprefix("notify;"))
        elif code in ("10", "11") and arg == "?":
            colour = "ffff/ffff/ffff" if code == "10" else "0000/0000/0000"
            end = "\x07" if terminator == "\x07" else "\x1b\\"
            screen.write_process_input(f"\x1b]{code};rgb:{colour}{end}")

    # -- CSI ---------------------------------------------------------------------------------

    def _dispatch_csi(self, params: str, inter: str, final: str) -> None:
        prefix = ""
        if params and params[0] in "<=>?":
            prefix, params = params[0], params[1:]
        handler = self._csi.get((prefix, inter, final))
        if handler is None:
            self.unknown_sequences += 1
            return
        handler(_ints(params), params)

    def _register_plain_csi(self) -> None:
        s = self.screen
        table = self._plain_csi

        def cup(params: str) -> None:
            if not params:
                s.cursor_position()
                return
            row, _, column = params.partition(";")
            if row.isdigit() and (not column or column.isdigit()):
                s.cursor_position(min(int(row), 65535), min(int(column), 65535) if column else None)
            else:
                s.cursor_position(*_ints(params)[:2])

        def single(method: Callable[[int], None]) -> Callable[[str], None]:
            def handler(params: str) -> None:
                if not params:
                    method(0)
                elif params.isdigit():
                    method(min(int(params), 65535))
                else:
                    method(_first(params))

            return handler

        table["H"] = table["f"] = cup
        table["m"] = lambda params: s.select_graphic_rendition(params=params)
        for final, method in {
            "A": s.cursor_up, "B": s.cursor_down, "C": s.cursor_forward, "D": s.cursor_back,
            "G": s.cursor_to_column, "`": s.cursor_to_column, "d": s.cursor_to_line,
            "J": s.erase_in_display, "K": s.erase_in_line, "X": s.erase_characters,
            "P": s.delete_characters, "@": s.insert_characters, "L": s.insert_lines,
            "M": s.delete_lines,
        }.items():  # fmt: skip
            table[final] = single(method)

    def _register_csi(self) -> None:
        s = self.screen

        def first(args: list[int], default: int = 0) -> int:
            return args[0] if args else default

        def count(args: list[int]) -> int:
            return max(first(args), 1)

        def cup(args: list[int], _: str) -> None:
            s.cursor_position(*args[:2])

        def tab_forward(args: list[int], _: str) -> None:
            for _ in range(count(args)):
                s.tab()

        def tab_back(args: list[int], _: str) -> None:
            for _ in range(count(args)):
                stops = [t for t in s.tabstops if t < s.cursor.x]
                s.cursor.x = max(stops) if stops else 0

        def repeat(args: list[int], _: str) -> None:
            # tmux repeats at most up to the right margin: 7 bytes never draw a screenful
            times = min(count(args), s.columns - s.cursor.x)
            if s.last_graphic and times > 0:
                s.draw(s.last_graphic * times)

        def window_ops(args: list[int], _: str) -> None:
            if first(args) == 18:
                s.write_process_input(f"\x1b[8;{s.lines};{s.columns}t")

        def scroll_down(args: list[int], _: str) -> None:
            if len(args) <= 1:  # CSI Ps ; Ps ; Ps ; Ps ; Ps T is mouse highlighting, not SD
                s.scroll_down(count(args))

        def soft_reset(args: list[int], _: str) -> None:
            s.soft_reset()

        def kitty_push(args: list[int], _: str) -> None:
            s.push_kitty_flags(first(args))

        def kitty_pop(args: list[int], _: str) -> None:
            s.pop_kitty_flags(count(args))

        def modify_keys(args: list[int], _: str) -> None:
            if first(args) == 4:
                s.modify_other_keys = args[1] if len(args) > 1 else 0

        def cursor_style(args: list[int], _: str) -> None:
            s.cursor_style = first(args)

        def decrqm(private: bool) -> Callable[[list[int], str], None]:
            return lambda args, _: s.report_mode(first(args), private=private)

        simple: dict[str, Callable[..., None]] = {
            "@": s.insert_characters,
            "A": s.cursor_up,
            "B": s.cursor_down,
            "C": s.cursor_forward,
            "D": s.cursor_back,
            "E": s.cursor_down1,
            "F": s.cursor_up1,
            "G": s.cursor_to_column,
            "`": s.cursor_to_column,
            "J": s.erase_in_display,
            "K": s.erase_in_line,
            "L": s.insert_lines,
            "M": s.delete_lines,
            "P": s.delete_characters,
            "S": s.scroll_up,
            "X": s.erase_characters,
            "a": s.cursor_forward,
            "d": s.cursor_to_line,
            "e": s.cursor_down,
            "g": s.clear_tab_stop,
            "n": s.report_device_status,
        }
        table = self._csi
        for final, method in simple.items():
            table["", "", final] = lambda args, _, m=method: m(first(args))
        table["", "", "H"] = table["", "", "f"] = cup
        table["", "", "I"] = tab_forward
        table["", "", "Z"] = tab_back
        table["", "", "b"] = repeat
        table["", "", "T"] = scroll_down
        table["", "", "t"] = window_ops
        table["", "", "m"] = lambda args, raw: s.select_graphic_rendition(params=raw)
        table["", "", "h"] = lambda args, _: s.set_mode(*args)
        table["", "", "l"] = lambda args, _: s.reset_mode(*args)
        table["", "", "r"] = lambda args, _: s.set_margins(*args[:2])
        table["", "", "c"] = lambda args, _: s.report_device_attributes(first(args))
        table["", "", "s"] = lambda args, _: s.save_cursor()
        table["", "", "u"] = lambda args, _: s.restore_cursor()
        table["?", "", "h"] = lambda args, _: s.set_mode(*args, private=True)
        table["?", "", "l"] = lambda args, _: s.reset_mode(*args, private=True)
        table["?", "", "J"] = lambda args, _: s.erase_in_display(first(args))
        table["?", "", "K"] = lambda args, _: s.erase_in_line(first(args))
        table["?", "", "n"] = lambda args, _: s.report_device_status(first(args), private=True)
        table["?", "$", "p"] = decrqm(True)
        table["", "$", "p"] = decrqm(False)
        table[">", "", "c"] = lambda args, _: s.report_device_attributes(
            first(args), secondary=True
        )
        table[">", "", "m"] = modify_keys
        table[">", "", "u"] = kitty_push
        table["<", "", "u"] = kitty_pop
        table["", " ", "q"] = cursor_style
        table["", "!", "p"] = soft_reset
        table[">", "", "q"] = lambda args, _: s.write_process_input(XTVERSION_REPLY)
        for ignored in (("?", "", "u"), ("=", "", "u"), ("=", "", "c")):
            table[ignored] = lambda args, _: None
        for ignored in ((">", "", "n"), ("?", "", "S"), ("", '"', "q"), ("", "", "q")):
            table[ignored] = lambda args, _: None


def make_screen_and_stream(
    columns: int,
    lines: int,
    *,
    respond: Callable[[str], None] | None = None,
    scrollback: int | None = None,
    batch: bool = True,
) -> tuple[TerminalScreen, TerminalStream]:
    """A screen wired to a stream; `respond` receives query answers (DSR, DA, ...)."""
    kwargs = {} if scrollback is None else {"scrollback": scrollback}
    screen = TerminalScreen(columns, lines, respond=respond, **kwargs)
    return screen, TerminalStream(screen, batch=batch)
