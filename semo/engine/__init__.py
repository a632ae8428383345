"""semo engine: runs agents in PTYs; asyncio only, never imports the UI."""
