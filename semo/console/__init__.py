"""semo console: the Textual operator app; talks only to engine/interface.py's EngineInterface."""
