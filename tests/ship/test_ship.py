"""`ship_job` over real git (a local bare `origin`) and a loopback GitHub API:

- --pr pushes the job's branch and the API receives exactly one pull request whose title and
  body name the job (a second --pr does not open another); the timeline says pushed, pr_opened.
- --merge fast-forwards the checked-out base (its working tree follows), or makes a merge
  commit when the base moved on; a conflicting merge is refused naming the files, and nothing
  moves (base, branch, the checkout's files and its uncommitted change).
- a job that is not done is refused; a PR without a token says how to give one; a refused
  token is reported without the token.
- the GitHub repository comes from the remote's URL; a local path or file:// remote (or `..` in
  the URL) has none, and a PR then asks for `[ship] github_repo` and sends nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from semo.engine.office.job_ops import job_timeline
from semo.engine.ship.github import GitHubError, repo_slug
from semo.engine.ship.settings import ShipSection
from semo.engine.ship.ship import ShipError, ShipRequest, ship_job
from tests.ship.conftest import World
from tests.support.git_repo import git
from tests.support.github_api import GitHubApi

TOKEN = "ghp_loopback_0123456789abcdef"


def api_settings(api: GitHubApi) -> ShipSection:
    return ShipSection(pr_tool="api", github_api_url=api.url, github_repo="acme/shop")


async def steps(world: World) -> list[tuple[str, str]]:
    timeline = await job_timeline(world.store, world.job.id)
    return [(e.step, e.detail) for e in timeline.entries]


def head(repo: Path, ref: str) -> str:
    return git(repo, "rev-parse", ref).strip()


async def test_pr_pushes_the_branch_and_opens_exactly_one_pull_request(world: World) -> None:
    with GitHubApi(token=TOKEN) as api:
        env = {"GITHUB_TOKEN": TOKEN}
        report = await ship_job(
            world.store,
            world.job.id,
            ShipRequest(pr=True),
            api_settings(api),
            world.target,
            env=env,
        )
        again = await ship_job(
            world.store,
            world.job.id,
            ShipRequest(pr=True),
            api_settings(api),
            world.target,
            env=env,
        )
    assert (
        head(world.origin, world.target.branch)
        == head(world.repo, world.target.branch)
        == report.pushed
    )
    assert len(api.pulls) == 1
    pull = api.pulls[0]
    assert pull["repo"] == "acme/shop"
    assert (pull["head"], pull["base"]) == (world.target.branch, "main")
    assert world.job.id in pull["body"] and world.job.id[:8] in pull["title"]
    assert "Build the login page" in pull["body"] and "GET /health added" in pull["body"]
    assert "login.html" in pull["body"]  # the diffstat
    assert TOKEN not in pull["body"] and TOKEN not in pull["title"]
    assert report.pr is not None and report.pr.number == 1
    assert again.pr == report.pr and again.pr_existed
    recorded = await steps(world)
    assert [s for s, _ in recorded].count("pr_opened") == 1
    assert ("pr_opened", report.pr.url) in recorded
    assert any(
        s == "pushed" and d.startswith(f"{world.target.branch} to origin") for s, d in recorded
    )


async def test_merge_fast_forwards_the_checked_out_base(world: World) -> None:
    branch_head = head(world.repo, world.target.branch)
    report = await ship_job(
        world.store, world.job.id, ShipRequest(merge=True), ShipSection(), world.target
    )
    assert report.merge_kind == "fast-forward"
    assert head(world.repo, "main") == branch_head
    assert (world.repo / "login.html").read_text() == "<form>login</form>\n"
    assert git(world.repo, "status", "--porcelain") == ""
    assert any(s == "merged" and "fast-forward" in d for s, d in await steps(world))


async def test_merge_makes_a_merge_commit_when_the_base_moved(world: World) -> None:
    git(world.repo, "checkout", "-q", "--detach")  # main checked out nowhere: update-ref
    world.commit("main", "NOTES", "notes\n", "someone else's work")
    old_main = head(world.repo, "main")
    report = await ship_job(
        world.store, world.job.id, ShipRequest(merge=True), ShipSection(), world.target
    )
    assert report.merge_kind == "merge"
    parents = git(world.repo, "rev-list", "--parents", "-n1", "main").split()
    assert parents[1:] == [old_main, head(world.repo, world.target.branch)]
    files = git(world.repo, "ls-tree", "--name-only", "main").split()
    assert {"NOTES", "login.html", "app.py"} <= set(files)


async def test_a_conflicting_merge_is_refused_and_nothing_moves(world: World) -> None:
    world.commit(world.target.branch, "app.py", "x = 2  # FE\n", "FE: x")
    (world.repo / "app.py").write_text("x = 3  # main\n")
    git(world.repo, "-c", "user.email=t@e", "-c", "user.name=t", "commit", "-q", "-a", "-m", "x")
    (world.repo / "README").write_text("uncommitted\n")
    before = (head(world.repo, "main"), head(world.repo, world.target.branch))
    with pytest.raises(ShipError) as caught:
        await ship_job(
            world.store, world.job.id, ShipRequest(merge=True), ShipSection(), world.target
        )
    message = str(caught.value)
    assert "conflicts in app.py" in message and "Nothing was changed" in message
    assert (head(world.repo, "main"), head(world.repo, world.target.branch)) == before
    assert (world.repo / "app.py").read_text() == "x = 3  # main\n"
    assert (world.repo / "README").read_text() == "uncommitted\n"
    assert not (world.repo / ".git" / "MERGE_HEAD").exists()
    assert ("ship_failed", message) in await steps(world)


async def test_only_a_done_job_ships(world: World) -> None:
    await world.store.update_job(world.job.id, status="running")
    with pytest.raises(ShipError, match="is running: only a job that is done"):
        await ship_job(
            world.store, world.job.id, ShipRequest(push=True), ShipSection(), world.target
        )
    assert git(world.origin, "branch", "--list", world.target.branch) == ""


async def test_a_job_that_needs_review_is_refused_until_resolved(world: World) -> None:
    await world.store.update_job(world.job.id, status="needs_review", needs_human=True)
    with pytest.raises(ShipError, match=r"needs review: .* resolve it first"):
        await ship_job(
            world.store,
            world.job.id,
            ShipRequest(push=True, merge=True),
            ShipSection(),
            world.target,
        )
    assert git(world.origin, "branch", "--list", world.target.branch) == ""
    assert head(world.repo, "main") != head(world.repo, world.target.branch)


async def test_a_pr_without_a_token_says_how_to_give_one(world: World) -> None:
    with GitHubApi(token=TOKEN) as api:
        with pytest.raises(ShipError, match=r"no GitHub token: .*GITHUB_TOKEN"):
            await ship_job(
                world.store,
                world.job.id,
                ShipRequest(pr=True),
                api_settings(api),
                world.target,
                env={},
            )
        wrong = "ghp_wrong_token_9876543210"
        with pytest.raises(ShipError) as caught:
            await ship_job(
                world.store,
                world.job.id,
                ShipRequest(pr=True),
                api_settings(api),
                world.target,
                env={"GH_TOKEN": wrong},
            )
    assert "HTTP 401: Bad credentials" in str(caught.value)
    assert wrong not in str(caught.value)
    assert api.pulls == []
    assert api.requests[0]["headers"]["Authorization"] == f"Bearer {wrong}"


async def test_auto_without_gh_uses_the_api(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(Path(git(world.repo, "--exec-path").strip())) + ":/usr/bin:/bin")
    with GitHubApi(token=TOKEN) as api:
        settings = ShipSection(github_api_url=api.url)  # pr_tool auto, repo from the remote
        world_remote = "https://github.example/acme/shop.git"
        git(world.repo, "remote", "set-url", "--add", "--push", "origin", str(world.origin))
        git(world.repo, "config", "remote.origin.url", world_remote)
        report = await ship_job(
            world.store,
            world.job.id,
            ShipRequest(pr=True),
            settings,
            world.target,
            env={"GITHUB_TOKEN": TOKEN},
        )
    assert report.pr is not None
    assert api.pulls[0]["repo"] == "acme/shop"


@pytest.mark.parametrize(
    ("url", "slug"),
    [
        ("git@github.com:acme/shop.git", "acme/shop"),
        ("https://github.com/acme/shop", "acme/shop"),
        ("https://ghe.example/acme/shop.git/", "acme/shop"),
        ("ssh://git@github.com/acme/shop.git", "acme/shop"),
        ("github.com:acme/shop", "acme/shop"),
    ],
)
def test_the_repository_comes_from_the_remotes_url(url: str, slug: str) -> None:
    assert repo_slug(url) == slug


@pytest.mark.parametrize(
    "url",
    [
        "../origin.git",  # a local path: no GitHub repository
        "/srv/git/shop.git",
        "file:///srv/git/acme/shop.git",
        "https://github.com/acme/..",
        "git@github.com:../shop.git",
        "https://github.com/shop",
    ],
)
def test_a_remote_without_a_github_repository_says_to_name_it(url: str) -> None:
    with pytest.raises(GitHubError, match=r'set \[ship\] github_repo = "owner/name"'):
        repo_slug(url)


def test_github_repo_is_owner_and_name() -> None:
    assert ShipSection(github_repo="acme/shop.js").github_repo == "acme/shop.js"
    for bad in ("../shop", "acme/..", "acme", "acme/shop/x"):
        with pytest.raises(ValueError, match="is not"):
            ShipSection(github_repo=bad)


async def test_a_pr_to_a_local_remote_asks_for_the_repository(world: World) -> None:
    """The world's origin is a local bare repository: no PR goes to a made-up repository."""
    with GitHubApi(token=TOKEN) as api:
        settings = ShipSection(pr_tool="api", github_api_url=api.url)
        with pytest.raises(ShipError, match=r"set \[ship\] github_repo"):
            await ship_job(
                world.store,
                world.job.id,
                ShipRequest(pr=True),
                settings,
                world.target,
                env={"GITHUB_TOKEN": TOKEN},
            )
    assert api.requests == []
    assert head(world.origin, world.target.branch) == head(world.repo, world.target.branch)
    assert [step for step, _ in await steps(world)][-2:] == ["pushed", "ship_failed"]


async def test_a_push_to_a_relative_remote_is_recorded_as_gits_own(world: World) -> None:
    """origin as a path relative to the repository (as `git remote add origin ../origin.git`
    writes it); after the push its tracking branch names the commit, so `semo worktrees` calls
    the work shipped."""
    git(world.repo, "remote", "set-url", "origin", "../origin.git")
    report = await ship_job(
        world.store, world.job.id, ShipRequest(push=True), ShipSection(), world.target, env={}
    )
    assert report.pushed == head(world.origin, world.target.branch)
    assert head(world.repo, f"refs/remotes/origin/{world.target.branch}") == report.pushed
