from __future__ import annotations

import pytest

from semo.engine.terminal.keys import KeySpecError, Sleep, encode_key, parse_keys


@pytest.mark.parametrize(
    ("name", "normal", "application"),
    [
        ("Up", "\x1b[A", "\x1bOA"),
        ("Left", "\x1b[D", "\x1bOD"),
        ("Home", "\x1b[H", "\x1bOH"),
        ("C-Up", "\x1b[1;5A", "\x1b[1;5A"),
        ("S-Right", "\x1b[1;2C", "\x1b[1;2C"),
        ("C-M-Left", "\x1b[1;7D", "\x1b[1;7D"),
        ("F1", "\x1bOP", "\x1bOP"),
        ("F5", "\x1b[15~", "\x1b[15~"),
        ("F12", "\x1b[24~", "\x1b[24~"),
        ("S-F5", "\x1b[15;2~", "\x1b[15;2~"),
        ("PgDn", "\x1b[6~", "\x1b[6~"),
        ("Del", "\x1b[3~", "\x1b[3~"),
        ("S-Tab", "\x1b[Z", "\x1b[Z"),
        ("BTab", "\x1b[Z", "\x1b[Z"),
        ("Enter", "\r", "\r"),
        ("Esc", "\x1b", "\x1b"),
        ("BS", "\x7f", "\x7f"),
        ("C-c", "\x03", "\x03"),
        ("C-[", "\x1b", "\x1b"),
        ("C-Space", "\x00", "\x00"),
        ("M-x", "\x1bx", "\x1bx"),
        ("A-x", "\x1bx", "\x1bx"),
        ("M-Enter", "\x1b\r", "\x1b\r"),
        ("C-M-a", "\x1b\x01", "\x1b\x01"),
    ],
)
def test_key_encoding_follows_cursor_key_mode(name, normal, application):
    assert encode_key(name) == normal
    assert encode_key(name, application_cursor=True) == application


def test_parse_mixes_text_keys_and_sleeps():
    assert parse_keys("ls -l<Enter><Sleep:50>q<lt>x>") == ["ls -l\r", Sleep(50), "q<x>"]


@pytest.mark.parametrize("spec", ["<Bogus>", "<Sleep:abc>", "<C-1>", "<Q-x>"])
def test_bad_key_names_are_clear_errors(spec):
    with pytest.raises(KeySpecError, match="<"):
        parse_keys(spec)


def test_sleep_is_not_a_key():
    with pytest.raises(KeySpecError, match="pause"):
        encode_key("Sleep:10")
