"""Terminal core: PTY process, VT screen, scrollback, key encoding, asciicast recording."""
