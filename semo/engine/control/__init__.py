"""The engine's local control endpoint: a Unix socket consoles attach to (docs/CONSOLE.md)."""
