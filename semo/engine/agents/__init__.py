"""Agent adapters: one package per agent CLI behind `semo.engine.agents.base.AgentAdapter`.

`semo.engine.agents.registry` finds an adapter by profile name (semo.toml's ``profile``) or by the
command an agent runs; sessions, routing and control go through it and never name a CLI.
`semo.engine.agents.persona` renders the persona and protocol an adapter writes into its CLI's
instructions file.
"""
