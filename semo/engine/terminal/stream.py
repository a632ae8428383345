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
from functools import partial
from itertools import repeat

from pyte import modes

from semo.engine.terminal.plain import PlainBatch
from semo.engine.terminal.screen import (
    _HAS_REGIONAL_INDICATOR,
    NOT_FLAG_MODES,
    STYLED_SPLIT,
    TerminalScreen,
)
from semo.engine.terminal.width import char_width

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
# The fast path's parts: a printable run (with the SGRs in it), Ink's frame erase, a whole OSC,
# CR LF, a whole CSI, an ESC sequence (not CSI, OSC or a string introducer), or any single
# control (a lone ESC among them: the general path reads it)
_PARTS = re.compile(
    r"[^\x00-\x1f\x7f-\x9f]++"  # text, and on in it: SGR, CHA/CUF/CUD, CR, CR LF, text
    r"(?:\x1b\[(?:[0-9;:]*+m|[0-9]{0,5}+[GCB])|\r\n?+|[^\x00-\x1f\x7f-\x9f]++)*+"
    r"|(?:\x1b\[2K\x1b\[1A)++"  # Ink erasing its previous frame, row by row
    r"|\x1b\][^\x07\x1b\x9c]*+(?:\x07|\x1b\\|\x9c)"  # a whole OSC (titles)
    r"|\r\n"
    r"|\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b[ -/]*[0-OQ-WYZ\\`a-~]"
    r"|[\x00-\x1f\x7f-\x9f]"
)
_ERASE_UP = "\x1b[2K\x1b[1A"
_CONTROLS = frozenset(map(chr, [*range(0x20), *range(0x7F, 0xA0)]))
_BREAKS = frozenset(["\r", "\n", "\r\n"])  # where the plain-output batch may start
_INTERMEDIATES = "".join(map(chr, range(0x20, 0x30)))
MAX_CALLS = 4096  # the table of ready calls is emptied when it reaches this size
MAX_CALL_KEY = 64  # longer sequences are parsed each time, never kept
_FIRST_WINDOW, _MAX_WINDOW = 256, 16384  # characters cut into parts at a time
_PLAIN_RUN = re.compile(r"(?:[ -~\xa0-\U0010ffff\r\n]++|\x1b\[[0-9;:]*+m)++")
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


def _num(digits: str) -> int:
    """A parameter's ASCII digits as an int, capped at 65535 (however many digits it has)."""
    if len(digits) > 5:
        digits = digits.lstrip("0")
        if len(digits) > 5:
            return 65535
    return min(int(digits or "0"), 65535)


def _parsing(handler: Callable[[list[int], str], None]) -> Callable[[str], None]:
    """`handler` called with the parameters parsed and as written."""
    return lambda params: handler(_ints(params), params)


def _ints(params: str) -> list[int]:
    """CSI parameters as ints (missing -> 0); sub-parameters after ':' are ignored."""
    if params.isdigit():
        return [_num(params)]
    if not params:
        return []
    out = []
    for field in params.split(";"):
        head = field.split(":", 1)[0]
        out.append(_num(head) if head.isdigit() else 0)
    return out


def _cup_args(params: str) -> tuple[int | None, ...]:
    """CUP's arguments for `cursor_position`, from its raw parameters."""
    if not params:
        return ()
    row, _, column = params.partition(";")
    if row.isdigit() and (not column or column.isdigit()):
        return (_num(row), _num(column) if column else None)
    return tuple(_ints(params)[:2])


def _ignore() -> None:
    return None


def _narrow_prefix(text: str) -> str:
    """The part of `text` before its first character that is not one cell wide (wide, zero
    width, a regional indicator): the batch path counts one cell per character."""
    for found in _NON_ASCII.finditer(text):
        chars = found.group()
        cut = bytes(map(_one_cell, map(char_width, chars), repeat(0))).find(0)  # 1 = one cell
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

    def __init__(self, screen: TerminalScreen, *, batch: bool = True, fast: bool = True) -> None:
        self.screen = screen
        self.batch_enabled = batch
        self.fast = fast  # False: token by token only (the reference the fast path is checked by)
        self._calls: dict[str, Callable[[], None]] = {}
        self._no_batch_before = 0  # after a declined run, do not rescan it (keeps feed linear)
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
            final: _parsing(handler)
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
        self._no_batch_before = 0
        if self.fast:
            self._feed_parts(data)
        else:
            self._feed_tokens(data, 0, len(data))

    def _feed_parts(self, data: str) -> None:
        """The fast path. A C-level `findall` cuts the read into parts (printable runs, CSI and
        ESC sequences, single controls); a part that is not text is looked up whole in a table
        of ready calls (`ESC[38;5;246m`, `ESC[20;1H`, `\r` recur thousands of times in a TUI's
        output), so a sequence is parsed once, not at every occurrence. What the table cannot
        take (OSC, DCS, a lone ESC, an unfinished tail) and every point where the plain-output
        batch may take over go to the general path, `_feed_tokens`, until it stops where a part
        starts. Parts are cut a window at a time (growing while the fast path keeps them), so
        text the batch takes in bulk is not cut into parts for nothing."""
        size = len(data)
        pos = 0
        window = _FIRST_WINDOW
        findall = _PARTS.findall
        screen = self.screen
        batch = self.batch_enabled
        while pos < size:
            if batch and screen.deferred_rows and data[pos] not in _CONTROLS:
                # text continuing the batch's rows (a part would go to the general path)
                pos = self._feed_tokens(data, pos, pos + 1)
                continue
            limit = pos + window
            parts = findall(data, pos, limit) if limit < size else []
            if len(parts) > 1:
                parts.pop()  # it may be cut short at the window's edge
            else:
                parts = findall(data, pos)
            covered = pos + sum(map(len, parts))
            pos = self._run_parts(data, parts, pos)
            window = min(window * 2, _MAX_WINDOW) if pos == covered else _FIRST_WINDOW

    def _run_parts(self, data: str, parts: list[str], pos: int) -> int:
        """Apply `parts` (cut from data[pos:]); return where the next part starts: after the
        last one, or wherever the general path stopped past them."""
        screen = self.screen
        call_for = self._calls.get
        draw = screen.draw
        draw_styled = screen.draw_styled
        split_styled = STYLED_SPLIT.split
        batch = self.batch_enabled
        batch_row = screen.lines - 1 if batch else -1  # where a CR LF may start the batch
        controls = _CONTROLS
        breaks = _BREAKS
        numbered = enumerate(parts)
        at = index = 0  # pos is where parts[at] starts
        while True:
            taken = 0  # of parts[index] when the loop breaks: the general path goes on from there
            if batch and screen.deferred_rows:  # the batch's rows: the general path goes on
                item = next(numbered, None)
                if item is None:
                    return pos + sum(map(len, parts[at:]))
                index = item[0]
            else:  # (nothing here makes deferred rows: only the general path's batch does)
                for index, part in numbered:  # noqa: B007 (index is read after the loop)
                    if part[0] not in controls:  # text, maybe with SGRs and CR LFs in it
                        if "\x1b" in part or "\r" in part:
                            taken = draw_styled(split_styled(part), batch_row)
                            if taken:
                                break
                        else:
                            draw(part)
                        continue
                    call = call_for(part)
                    if call is None:  # a sequence not in the table yet
                        call = self._call_for(part)
                        if call is None:
                            break
                    if part in breaks and screen.cursor.y == batch_row:
                        break  # where the batch may start
                    call()
                else:
                    return pos + sum(map(len, parts[at:]))
            pos += sum(map(len, parts[at:index]))
            at = index
            # the general path from parts[index] on, until it stops where a part starts
            end = pos + taken
            count = len(parts)
            while True:
                end = self._feed_tokens(data, end, end + 1)
                while at < count and pos + len(parts[at]) <= end:
                    pos += len(parts[at])
                    at += 1
                if at == count or end >= len(data):
                    return end
                if pos == end:
                    break
            for _ in range(at - index - 1):  # the general path took parts[index:at]
                next(numbered)

    def _call_for(self, part: str) -> Callable[[], None] | None:
        """The call that applies the sequence or control `part`, kept in the table (bounded)
        unless it is long; None for what only the general path reads (a lone ESC)."""
        if part == "\x1b":
            return None
        call: Callable[[], None]
        if len(part) == 1:
            call = self._controls.get(part, _ignore)
        elif part == "\r\n":
            call = self.screen.crlf
        elif part[1] == "]":
            cut = -2 if part[-1] == "\\" else -1
            call = partial(self._osc, part[2:cut], part[cut:])
        elif part.startswith(_ERASE_UP):
            call = partial(self.screen.erase_rows_up, len(part) // len(_ERASE_UP))
        elif part[1] == "[":
            params, inter, final = part[2:-1], "", part[-1]
            if params[-1:] and params[-1] < "0":  # intermediates end the parameters
                body = params.rstrip(_INTERMEDIATES)
                params, inter = body, params[len(body) :]
            call = self._csi_call(params, inter, final)
        else:
            call = partial(self._escape, part[1:-1], part[-1])
        if len(part) <= MAX_CALL_KEY:
            calls = self._calls
            if len(calls) >= MAX_CALLS:
                calls.clear()
            calls[part] = call
        return call

    def _csi_call(self, params: str, inter: str, final: str) -> Callable[[], None]:
        screen = self.screen
        if inter or (params and params[0] in "<=>?"):
            if not inter and final in "hl" and params[:1] == "?":
                flags = tuple(_ints(params[1:]))
                if flags and NOT_FLAG_MODES.isdisjoint(flags):  # DEC modes that are flags
                    if final == "h":
                        return partial(screen.set_flag_modes, flags)
                    return partial(screen.reset_flag_modes, flags)
            return partial(self._dispatch_csi, params, inter, final)
        if final == "m":
            return partial(screen.sgr, params)
        if final in "Hf":
            return partial(screen.cursor_position, *_cup_args(params))
        method = self._single.get(final)
        if method is not None:
            return partial(method, _first(params))
        plain = self._plain_csi.get(final)
        if plain is not None:
            return partial(plain, params)
        return partial(self._dispatch_csi, params, inter, final)

    def _feed_tokens(self, data: str, pos: int, stop: int) -> int:
        """The general path: token by token from `pos` while before `stop` (at least one step),
        with the batch for plain scrolling output. Returns where it stopped; len(data) once the
        rest is kept as an unfinished sequence (or skipped)."""
        screen = self.screen
        match_token = _TOKEN.match
        draw = screen.draw
        plain_csi_for = self._plain_csi.get
        controls = self._controls
        batch = self.batch_enabled
        bottom = screen.lines - 1
        end = len(data)
        while pos < stop:
            if (
                batch
                and pos >= self._no_batch_before
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
                    self._no_batch_before = run.end()
            token = match_token(data, pos)
            if token is None:
                if _PARTIAL.match(data, pos):
                    rest = data[pos:]
                    if len(rest) <= MAX_PENDING:
                        self._pending = rest
                    else:
                        self._start_skip(rest)
                    return end
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
        return pos

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
            s.cursor_position(*_cup_args(params))

        def single(method: Callable[[int], None]) -> Callable[[str], None]:
            def handler(params: str) -> None:
                if not params:
                    method(0)
                elif params.isdigit():
                    method(_num(params))
                else:
                    method(_first(params))

            return handler

        table["H"] = table["f"] = cup
        table["m"] = s.sgr
        self._single: dict[str, Callable[[int], None]] = {
            "A": s.cursor_up, "B": s.cursor_down, "C": s.cursor_forward, "D": s.cursor_back,
            "G": s.cursor_to_column, "`": s.cursor_to_column, "d": s.cursor_to_line,
            "J": s.erase_in_display, "K": s.erase_in_line, "X": s.erase_characters,
            "P": s.delete_characters, "@": s.insert_characters, "L": s.insert_lines,
            "M": s.delete_lines,
        }  # fmt: skip
        for final, method in self._single.items():
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
            for _n in range(count(args)):
                s.tab()

        def tab_back(args: list[int], _: str) -> None:
            for _n in range(count(args)):
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

        def on_first(method: Callable[[int], None]) -> Callable[[list[int], str], None]:
            return lambda args, _: method(first(args))

        for final, method in simple.items():
            table["", "", final] = on_first(method)
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
    fast: bool = True,
) -> tuple[TerminalScreen, TerminalStream]:
    """A screen wired to a stream; `respond` receives query answers (DSR, DA, ...)."""
    kwargs = {} if scrollback is None else {"scrollback": scrollback}
    screen = TerminalScreen(columns, lines, respond=respond, **kwargs)
    return screen, TerminalStream(screen, batch=batch, fast=fast)
