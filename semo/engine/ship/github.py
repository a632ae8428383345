"""Opening a pull request on GitHub: through ``gh``, else GitHub's REST API.

``gh`` when it is installed and logged in, else ``POST {api_url}/repos/{owner}/{name}/pulls``
with a token.

    slug = repo_slug("git@github.com:acme/shop.git")          # "acme/shop"
    pr = await open_pull_request(slug=slug, head="semo/job-1a2b", base="main",
                                 title=title, body=body, api_url=..., token=..., tool="auto")

The API's base URL is a setting (GitHub Enterprise: ``https://HOST/api/v3``; the tests: a
loopback server). The token goes in the ``Authorization`` header only; no message of this
module ever holds it, and what GitHub answers is untrusted text (shown through
semo/engine/plain_text.py by the callers).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import tempfile
import urllib.error
import urllib.request
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel

from semo.engine.gitsafe import git_environment

__all__ = ["GitHubError", "PullRequest", "is_slug", "open_pull_request", "repo_slug"]

DEFAULT_API_URL = "https://api.github.com"
_SLUG = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")
_PR_URL = re.compile(r"https?://\S+/pull/(\d+)")
_SCP = re.compile(r"^[^/:]+:")
#: Seconds a request to GitHub (or a gh run) may take.
TIMEOUT = 60.0

PrTool = Literal["auto", "gh", "api"]


class GitHubError(Exception):
    """A pull request could not be opened; the message says why (never the token)."""


class PullRequest(BaseModel):
    """An opened pull request: its number and its web address ("" when an agent's own
    "Created pull request #N" named none)."""

    number: int
    url: str


def is_slug(slug: str) -> bool:
    """Whether ``slug`` is a GitHub repository's ``owner/name`` (neither part ``.`` or ``..``:
    it goes into the API's URL path)."""
    return _SLUG.fullmatch(slug) is not None and not {".", ".."} & set(slug.split("/"))


def repo_slug(url: str) -> str:
    """``owner/name`` from a remote's URL (``git@host:owner/name.git``, ``https://host/owner/
    name``, ``ssh://git@host/owner/name.git``); :class:`GitHubError` when there is none (a
    local path or ``file://`` remote has no GitHub repository)."""
    text = url.strip()
    path = ""
    if "://" in text:
        parts = urlsplit(text)
        if parts.scheme != "file" and parts.hostname:
            path = parts.path
    elif _SCP.match(text):  # git's scp-like syntax: no slash before the first colon
        path = text.split(":", 1)[1]
    segments = path.strip("/").removesuffix(".git").split("/")
    slug = "/".join(segments[-2:])
    if len(segments) < 2 or not is_slug(slug):
        raise GitHubError(
            f"cannot tell the GitHub repository from the remote {url!r}: set [ship] github_repo "
            '= "owner/name"'
        )
    return slug


def _host(api_url: str) -> str:
    host = urlsplit(api_url).hostname or "github.com"
    return "github.com" if host == "api.github.com" else host


def _post(url: str, token: str, payload: dict[str, str]) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        method="POST",
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "Content-Type": "application/json",
            "User-Agent": "semo",
        },
    )
    # no proxy from the environment, no redirects to follow with the token
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=TIMEOUT) as response:
            return response.status, response.read(1 << 20)
    except urllib.error.HTTPError as error:
        return error.code, error.read(1 << 20)
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise GitHubError(
            f"GitHub's API at {url.split('/repos/')[0]} did not answer: {reason}"
        ) from None


def _api_error(status: int, data: bytes) -> str:
    try:
        answer = json.loads(data)
    except ValueError:
        return f"HTTP {status}"
    if not isinstance(answer, dict):
        return f"HTTP {status}"
    message = str(answer.get("message", ""))[:300]
    errors = answer.get("errors")
    details = []
    if isinstance(errors, list):
        for item in errors[:3]:
            if isinstance(item, dict) and item.get("message"):
                details.append(str(item["message"])[:200])
    return f"HTTP {status}: {message}" + (f" ({'; '.join(details)})" if details else "")


async def _via_api(api_url: str, token: str, slug: str, fields: dict[str, str]) -> PullRequest:
    url = f"{api_url.rstrip('/')}/repos/{slug}/pulls"
    status, data = await asyncio.to_thread(_post, url, token, fields)
    if status != 201:
        raise GitHubError(f"GitHub refused the pull request: {_api_error(status, data)}")
    try:
        answer = json.loads(data)
        return PullRequest(number=int(answer["number"]), url=str(answer["html_url"]))
    except (ValueError, KeyError, TypeError):
        raise GitHubError("GitHub's answer to the pull request is not what its API says") from None


async def _gh(
    gh: str, *args: str, env: dict[str, str], stdin: bytes | None = None
) -> tuple[int, str]:
    # in an empty folder: gh then reads no repository's config (which agents can write)
    with tempfile.TemporaryDirectory(prefix="semo-gh-") as cwd:
        proc = await asyncio.create_subprocess_exec(
            gh,
            *args,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        try:
            async with asyncio.timeout(TIMEOUT):
                out, _ = await proc.communicate(stdin)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise GitHubError(f"gh {args[0]} took longer than {TIMEOUT:g}s; stopped it") from None
    assert proc.returncode is not None
    return proc.returncode, out.decode("utf-8", "replace")


async def gh_ready(api_url: str, token: str | None, gh: str = "gh") -> str | None:
    """The path of ``gh`` when it is installed and logged in for the API's host, else None."""
    path = shutil.which(gh)
    if path is None:
        return None
    env = _gh_env(api_url, token)
    status, _ = await _gh(path, "auth", "status", "--hostname", _host(api_url), env=env)
    return path if status == 0 else None


def _gh_env(api_url: str, token: str | None) -> dict[str, str]:
    env = git_environment(GH_PROMPT_DISABLED="1", NO_COLOR="1", GH_NO_UPDATE_NOTIFIER="1")
    if os.environ.get("GH_CONFIG_DIR"):  # where the user's gh keeps its login
        env["GH_CONFIG_DIR"] = os.environ["GH_CONFIG_DIR"]
    host = _host(api_url)
    if host != "github.com":
        env["GH_HOST"] = host
    if token:
        env["GH_ENTERPRISE_TOKEN" if host != "github.com" else "GH_TOKEN"] = token
    return env


async def open_pull_request(
    *,
    slug: str,
    head: str,
    base: str,
    title: str,
    body: str,
    api_url: str = DEFAULT_API_URL,
    token: str | None = None,
    tool: PrTool = "auto",
    gh: str = "gh",
) -> PullRequest:
    """Open the pull request ``head`` -> ``base`` on ``slug`` (see the module docstring)."""
    if not is_slug(slug):
        raise GitHubError(f"{slug!r} is not a GitHub repository (owner/name)")
    gh_path = await gh_ready(api_url, token, gh) if tool in ("auto", "gh") else None
    if gh_path is not None:
        status, out = await _gh(
            gh_path,
            "pr",
            "create",
            "--repo",
            slug,
            "--head",
            head,
            "--base",
            base,
            "--title",
            title,
            "--body-file",
            "-",
            env=_gh_env(api_url, token),
            stdin=body.encode(),
        )
        match = _PR_URL.search(out)
        if status != 0 or match is None:
            last = out.strip().splitlines()[-1:] or [f"exit status {status}"]
            raise GitHubError(f"gh pr create failed: {last[0][:300]}")
        return PullRequest(number=int(match.group(1)), url=match.group(0))
    if tool == "gh":
        raise GitHubError(
            f"gh is not installed or not logged in to {_host(api_url)} (gh auth login)"
        )
    if not token:
        raise GitHubError(
            "no GitHub token: log in with gh (gh auth login), or set GITHUB_TOKEN (or GH_TOKEN) "
            "in the environment of semo (the engine's, for a job the engine ships) or [ship] "
            "github_token in semo.toml"
        )
    fields = {"title": title, "head": head, "base": base, "body": body}
    return await _via_api(api_url, token, slug, fields)
