"""semo console: the Textual operator app; talks only to semo.engine.interface."""
