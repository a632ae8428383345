"""`[ship] pr_tool = "auto"` with a logged-in `gh` on PATH opens the pull request through it:
a stand-in `gh` program (a script that records how it was run, as a loopback server records
requests) answers `auth status` and `pr create`. semo passes the repository, head, base and
title as arguments and the body on stdin, runs gh in an empty folder (no repository config),
gives it GH_HOST for GitHub Enterprise and the user's GH_CONFIG_DIR (where its login is), and
records the PR gh printed. A gh that is not logged in is skipped for the API."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from semo.engine.ship.settings import ShipSection
from semo.engine.ship.ship import ShipRequest, ship_job
from tests.ship.conftest import World
from tests.support.github_api import GitHubApi

GH = """#!/usr/bin/env python3
import json, os, sys
log = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gh.jsonl")
stdin = sys.stdin.read() if sys.argv[1:3] == ["pr", "create"] else ""
with open(log, "a") as f:
    f.write(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "stdin": stdin,
                        "host": os.environ.get("GH_HOST"), "files": os.listdir("."),
                        "config_dir": os.environ.get("GH_CONFIG_DIR")}) + "\\n")
if sys.argv[1:3] == ["auth", "status"]:
    sys.exit(LOGGED)
print("https://ghe.example/acme/shop/pull/77")
"""


def install_gh(folder: Path, logged_in: bool) -> Path:
    folder.mkdir()
    gh = folder / "gh"
    gh.write_text(GH.replace("LOGGED", "0" if logged_in else "1"))
    gh.chmod(0o755)
    return folder / "gh.jsonl"


def runs(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


async def test_a_logged_in_gh_opens_the_pr(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = install_gh(tmp_path / "bin", logged_in=True)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("GH_CONFIG_DIR", str(tmp_path / "gh-config"))  # where gh's login is
    settings = ShipSection(github_api_url="https://ghe.example/api/v3", github_repo="acme/shop")
    report = await ship_job(
        world.store, world.job.id, ShipRequest(pr=True), settings, world.target, env={}
    )
    assert report.pr is not None and report.pr.number == 77
    auth, create = runs(log)
    assert auth["argv"] == ["auth", "status", "--hostname", "ghe.example"]
    argv = create["argv"]
    assert isinstance(argv, list) and argv[:2] == ["pr", "create"]
    assert argv[argv.index("--repo") + 1] == "acme/shop"
    assert argv[argv.index("--head") + 1] == world.target.branch
    assert argv[argv.index("--base") + 1] == "main"
    assert argv[argv.index("--body-file") + 1] == "-"
    assert world.job.id in str(create["stdin"])
    assert create["host"] == "ghe.example" and create["files"] == []
    assert auth["config_dir"] == create["config_dir"] == str(tmp_path / "gh-config")
    assert str(create["cwd"]) != str(world.repo)


async def test_a_gh_that_is_not_logged_in_leaves_it_to_the_api(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = install_gh(tmp_path / "bin", logged_in=False)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    with GitHubApi() as api:
        settings = ShipSection(github_api_url=api.url, github_repo="acme/shop")
        report = await ship_job(
            world.store,
            world.job.id,
            ShipRequest(pr=True),
            settings,
            world.target,
            env={"GITHUB_TOKEN": api.token},
        )
    assert report.pr is not None and len(api.pulls) == 1
    assert [r["argv"][:2] for r in runs(log)] == [["auth", "status"]]
