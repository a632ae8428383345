"""The head of a test office's semo.toml: the office (its repository `repo` and workspace
`ws` beside the file) and a sqlite store `semo.db` there."""


def sqlite_office_toml(name: str) -> str:
    """`[office]` named `name` and `[store]` on sqlite; the caller adds `[engine]`, `[pool]`
    and `[[agents]]`."""
    return f"""
[office]
name = "{name}"
repository = "repo"
workspace_root = "ws"

[store]
backend = "sqlite"
sqlite_path = "semo.db"
"""
