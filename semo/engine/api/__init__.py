"""The Sessions REST API: `semo engine --http HOST:PORT` or `semo api` (docs/API.md).

- `semo.engine.api.settings`: `[api]` of semo.toml and the tokens (no web framework imported, so
  engine.config can use it cheaply);
- `semo.engine.api.app`: the FastAPI app over a Store (`create_app`);
- `semo.engine.api.server`: uvicorn on the running loop (`ApiServer`, `start_api`, `semo api`).
"""
