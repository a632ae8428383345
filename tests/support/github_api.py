"""A loopback stand-in for GitHub's REST API (the part semo uses: opening a pull request).

    with GitHubApi(token="ghp_test") as api:
        settings = ShipSection(pr_tool="api", github_api_url=api.url, github_repo="acme/shop")
        ...
        assert len(api.pulls) == 1 and "job" in api.pulls[0]["body"]

`POST /repos/{owner}/{name}/pulls` with `Authorization: Bearer <token>` records the request
(headers and JSON body) and answers 201 `{"number", "html_url", ...}` as GitHub does; a wrong
token is 401, a second pull request for the same head 422 ("A pull request already exists"),
anything else 404. `answer` replaces the next answer (status, JSON) to test hostile servers.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class GitHubApi:
    """The server, on 127.0.0.1 and a free port, in a thread; a context manager."""

    def __init__(self, token: str = "ghp_loopback_token") -> None:
        self.token = token
        self.pulls: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.answer: tuple[int, Any] | None = None
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: object) -> None:
                pass

            def _send(self, status: int, value: Any) -> None:
                data = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                with api._lock:
                    api.requests.append(
                        {"path": self.path, "headers": dict(self.headers), "raw": raw}
                    )
                    if api.answer is not None:
                        status, value = api.answer
                        api.answer = None
                        self._send(status, value)
                        return
                    if self.headers.get("Authorization") != f"Bearer {api.token}":
                        self._send(401, {"message": "Bad credentials"})
                        return
                    parts = self.path.strip("/").split("/")
                    if len(parts) != 4 or parts[0] != "repos" or parts[3] != "pulls":
                        self._send(404, {"message": "Not Found"})
                        return
                    body = json.loads(raw)
                    if any(p["head"] == body.get("head") for p in api.pulls):
                        self._send(
                            422,
                            {
                                "message": "Validation Failed",
                                "errors": [{"message": "A pull request already exists"}],
                            },
                        )
                        return
                    number = len(api.pulls) + 1
                    slug = f"{parts[1]}/{parts[2]}"
                    pull = body | {"number": number, "repo": slug}
                    api.pulls.append(pull)
                    self._send(
                        201,
                        {
                            "number": number,
                            "html_url": f"https://github.example/{slug}/pull/{number}",
                            "state": "open",
                            "title": body.get("title"),
                        },
                    )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> GitHubApi:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()
