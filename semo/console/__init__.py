"""semo console: the Textual operator app; talks only to the Engine facade."""
