"""semo: an operator console and headless engine for a team of coding agents.

`semo.engine` runs the office (no UI); `semo.console` is the Textual console and the `semo`
command. docs/DESIGN.md describes the layers.
"""
