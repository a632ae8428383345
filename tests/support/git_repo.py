"""One real git repository for tests: an office's repository, a worktree's source."""

import subprocess
from pathlib import Path

AUTHOR = ("-c", "user.email=t@example.com", "-c", "user.name=t")


def git(cwd: Path, *args: str) -> str:
    """Run `git ARGS` in `cwd` (it must succeed) and return its stdout."""
    return subprocess.run(
        ["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True
    ).stdout


def make_repo(
    path: Path, files: dict[str, str] | None = None, *, author_in_config: bool = False
) -> Path:
    """Create `path` as a git repository on `main` with one commit holding `files`
    (default a README). The commit's author is given on the command line, or, with
    `author_in_config`, kept in the repository's config so later commits there work too."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    author: tuple[str, ...] = AUTHOR
    if author_in_config:
        git(path, "config", "user.email", "t@example.com")
        git(path, "config", "user.name", "t")
        author = ()
    for name, text in (files or {"README": "office repo\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(text.encode())
    git(path, "add", "-A")
    git(path, *author, "commit", "-q", "-m", "init")
    return path
