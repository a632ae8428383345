"""A test office's work to ship: FE's scripted reply that writes the login page, and a local
bare `origin` for the office's repository (tests/store/test_job_cli.py's `write_config`)."""

from __future__ import annotations

from pathlib import Path

from tests.support.git_repo import git

#: FE's script: the page written in its worktree, then [SEMO:DONE] (the job's end commits it)
FE_WRITES_THE_PAGE = [
    {
        "match": "Build the login page",
        "files": {"login.html": "<form>login</form>\n"},
        "text": "[SEMO:DONE] login page built",
    }
]


def with_origin(folder: Path) -> tuple[Path, Path]:
    """`folder/repo` gets `folder/origin.git`, a bare repository, as `origin` with its main
    pushed; (the repository, origin)."""
    repo, origin = folder / "repo", folder / "origin.git"
    git(folder, "init", "-q", "--bare", str(origin))
    git(repo, "remote", "add", "origin", str(origin))
    git(repo, "push", "-q", "origin", "main")
    return repo, origin
