"""Write an agent's persona into its CLI's instructions file in the worktree (seed 004).

How it works: docs/SESSIONS.md, "Personas".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import subprocess
import sysconfig
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from semo.engine.agents.errors import AgentSetupError
from semo.engine.agents.gitexclude import ensure_git_exclude
from semo.engine.fsutil import (
    UnsafePathError,
    contained_path,
    read_text_in,
    unlink_in,
    write_text_in,
)
from semo.engine.gitsafe import git_argv, git_environment
from semo.engine.store.models import Agent

__all__ = [
    "PERSONA_RELPATH",
    "SECTION_END",
    "SECTION_START",
    "InjectResult",
    "PersonaError",
    "PersonaInjector",
    "agent_protocol_text",
    "merge_section",
    "protocol_file",
    "remove_section",
    "render_persona",
]

log = logging.getLogger("semo.persona")

#: Where Claude Code's persona goes, relative to the worktree (seed 004): the default.
PERSONA_RELPATH = Path(".claude") / "CLAUDE.md"

SECTION_START = "<!-- semo:persona:start -->"
SECTION_END = "<!-- semo:persona:end -->"

PROTOCOL_START = "<!-- agent-protocol:start -->"
PROTOCOL_END = "<!-- agent-protocol:end -->"

#: Where an installed wheel keeps docs/PROTOCOL.md, under the installation's data directory.
INSTALLED_PROTOCOL = "share/semo/docs/PROTOCOL.md"

_HERE = Path(__file__).resolve().parent


class PersonaError(AgentSetupError):
    """The persona cannot be written (bad input, a file semo must not overwrite, ...)."""


# -- docs/PROTOCOL.md ---------------------------------------------------------------------------


def _protocol_candidates() -> list[Path]:
    candidates = [_HERE.parents[2] / "docs" / "PROTOCOL.md"]  # source checkout / editable
    for scheme in (sysconfig.get_default_scheme(), sysconfig.get_preferred_scheme("user")):
        with contextlib.suppress(KeyError, ValueError):
            candidates.append(Path(sysconfig.get_path("data", scheme)) / INSTALLED_PROTOCOL)
    return list(dict.fromkeys(candidates))


def protocol_file(candidates: Iterable[Path] | None = None) -> Path:
    """The docs/PROTOCOL.md to inject (see the module docstring for where it is looked for)."""
    looked = list(candidates) if candidates is not None else _protocol_candidates()
    for candidate in looked:
        if candidate.is_file():
            return candidate
    raise PersonaError(
        "cannot find docs/PROTOCOL.md (looked in "
        + ", ".join(str(c) for c in looked)
        + "); reinstall semo or pass the protocol text to PersonaInjector"
    )


def agent_protocol_text(path: Path | None = None) -> str:
    """The text between the ``agent-protocol`` markers of docs/PROTOCOL.md, trimmed."""
    path = path or protocol_file()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PersonaError(f"cannot read {path}: {exc}") from exc
    if text.count(PROTOCOL_START) != 1 or text.count(PROTOCOL_END) != 1:
        raise PersonaError(f"{path}: expected exactly one {PROTOCOL_START} ... {PROTOCOL_END}")
    start, end = text.index(PROTOCOL_START) + len(PROTOCOL_START), text.index(PROTOCOL_END)
    if end < start:
        raise PersonaError(f"{path}: {PROTOCOL_END} comes before {PROTOCOL_START}")
    section = text[start:end].strip("\n")
    if not section.strip():
        raise PersonaError(f"{path}: the agent-protocol section is empty")
    return section


# -- rendering ----------------------------------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _code(text: str) -> str:
    """``text`` as a Markdown code span (so Claude Code never reads ``@path`` in it as an
    import, and ``*`` stays a star)."""
    text = _one_line(text)
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def render_persona(agent: Agent, peers: Sequence[Agent], protocol: str) -> str:
    """semo's section for ``agent``, markers included, ``\\n`` line ends, no final newline.

    ``peers``: the agents it may invoke (itself and repeated roles are left out)."""
    name, role = _one_line(agent.name), agent.role
    lines = [
        SECTION_START,
        "<!-- Written by semo when the session starts; edit the agent in semo, not here. -->",
        "",
        f"# You are {name}, the {role} agent",
        "",
        f"You are the agent `{role}` (name: {name}) of a team of coding agents run by semo. "
        "Each agent works in its own git worktree; this one is yours.",
    ]
    prompt = agent.prompt.strip("\n")
    if prompt.strip():
        lines += ["", prompt]

    lines += ["", "## Files you may change", ""]
    patterns = [p for p in (_one_line(p) for p in agent.scope_patterns) if p]
    if patterns:
        lines.append(
            "Change only files whose path (relative to the repository root) matches one of "
            "these patterns. For a change anywhere else, ask the agent that owns it with INVOKE."
        )
        lines.append("")
        lines += [f"- {_code(p)}" for p in patterns]
    else:
        lines.append("No limits were set: you may change any file of this repository.")

    skills = [s for s in (_one_line(s) for s in agent.core_skills) if s]
    if skills:
        lines += ["", "## Core skills", ""]
        lines += [f"- {s}" for s in skills]

    lines += ["", "## Agents you can invoke", ""]
    seen = {agent.role}
    team: list[Agent] = []
    for peer in peers:
        if peer.id == agent.id or peer.role in seen:
            continue
        seen.add(peer.role)
        team.append(peer)
    if team:
        lines.append(
            "Address an agent by its role, exactly as written here "
            f"(e.g. `[INVOKE:{team[0].role}]`):"
        )
        lines.append("")
        lines += [f"- `{p.role}`: {_one_line(p.name)}" for p in team]
    else:
        lines.append("None: do the task yourself, and ask the user (ASK_USER) when you need help.")

    lines += ["", protocol.strip("\n"), "", SECTION_END]
    text = "\n".join(lines)
    body = text[len(SECTION_START) : -len(SECTION_END)]
    if SECTION_START in body or SECTION_END in body:
        raise PersonaError(
            f"the persona of {agent.role} contains semo's own marker ({SECTION_START} or "
            f"{SECTION_END}); remove it from the agent's prompt"
        )
    return text


# -- merging ------------------------------------------------------------------------------------


def _find_section(text: str, source: str) -> tuple[int, int] | None:
    """(start, end) of semo's section in ``text`` (end after the end marker), or None."""
    starts = [m.start() for m in re.finditer(re.escape(SECTION_START), text)]
    ends = [m.start() for m in re.finditer(re.escape(SECTION_END), text)]
    if not starts and not ends:
        return None
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise PersonaError(
            f"{source}: semo's section is damaged ({len(starts)} start and {len(ends)} end "
            f"markers); fix or remove the {SECTION_START} ... {SECTION_END} part, semo will not "
            "overwrite it"
        )
    return starts[0], ends[0] + len(SECTION_END)


def merge_section(existing: str | None, section: str, *, source: str = "CLAUDE.md") -> str:
    """``existing`` with semo's ``section`` put in: replacing the previous one in place, or
    appended after a blank line. Line ends follow the file's (CRLF if it uses CRLF)."""
    if not existing or not existing.strip():
        return section + "\n"
    newline = "\r\n" if "\r\n" in existing else "\n"
    section = section.replace("\n", newline)
    span = _find_section(existing, source)
    if span is not None:
        return existing[: span[0]] + section + existing[span[1] :]
    return existing.rstrip("\r\n") + newline * 2 + section + newline


def remove_section(existing: str, *, source: str = "CLAUDE.md") -> str:
    """``existing`` without semo's section (and the blank line :func:`merge_section` put
    before it)."""
    span = _find_section(existing, source)
    if span is None:
        return existing
    before, after = existing[: span[0]], existing[span[1] :]
    if not before.strip():
        return after.lstrip("\r\n")
    newline = "\r\n" if "\r\n" in existing else "\n"
    if not after.strip():
        return before.rstrip("\r\n") + newline
    return before.rstrip("\r\n") + newline * 2 + after.lstrip("\r\n")


# -- files and git ------------------------------------------------------------------------------


@dataclass(frozen=True)
class InjectResult:
    """What :meth:`PersonaInjector.inject` did."""

    path: Path  # the file written (symlinks resolved)
    changed: bool  # False when the file already held exactly this
    hidden_by: Literal["exclude", "skip-worktree"] | None  # None: not in a git repository


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    env = git_environment(GIT_LITERAL_PATHSPECS="1")
    try:
        return subprocess.run(
            git_argv("git", cwd, *args),
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def _git_top(worktree: Path) -> Path | None:
    proc = _git(worktree, "rev-parse", "--show-toplevel")
    if proc is None or proc.returncode != 0 or not proc.stdout.strip():
        return None
    return Path(os.path.realpath(proc.stdout.strip()))


def _index_flags(top: Path, rel: str) -> str | None:
    """``git ls-files -v`` tag of ``rel``: "H" tracked, "S" tracked with skip-worktree, None
    untracked."""
    proc = _git(top, "ls-files", "-v", "--", rel)
    if proc is None or proc.returncode != 0 or not proc.stdout:
        return None
    return proc.stdout[0]


def _update_index(top: Path, flag: str, rel: str) -> None:
    proc = _git(top, "update-index", flag, "--", rel)
    if proc is None or proc.returncode != 0:
        message = proc.stderr.strip() if proc is not None else "git did not run"
        raise PersonaError(f"git update-index {flag} {rel} failed: {message}")


def _read(root: Path, relpath: Path) -> str | None:
    try:
        return read_text_in(root, relpath)
    except (OSError, UnicodeDecodeError) as exc:
        raise PersonaError(f"cannot read {root / relpath} ({exc}); semo left it unchanged") from exc


def _write(root: Path, relpath: Path, text: str) -> None:
    try:
        write_text_in(root, relpath, text)
    except OSError as exc:
        raise PersonaError(f"cannot write {root / relpath}: {exc}") from exc


class PersonaInjector:
    """Writes personas into worktrees. ``protocol``: the agent-protocol text to inject (default:
    read from docs/PROTOCOL.md on first use, see :func:`agent_protocol_text`)."""

    def __init__(self, protocol: str | None = None, *, protocol_path: Path | None = None) -> None:
        self._protocol = protocol
        self._protocol_path = protocol_path

    @property
    def protocol(self) -> str:
        if self._protocol is None:
            self._protocol = agent_protocol_text(self._protocol_path)
        return self._protocol

    def render(self, agent: Agent, peers: Sequence[Agent] = ()) -> str:
        """semo's section for ``agent`` (markers included)."""
        return render_persona(agent, peers, self.protocol)

    def _target(self, worktree: Path, relpath: Path) -> tuple[Path, Path]:
        """(resolved worktree, resolved persona file), refusing a file that leads outside."""
        root = Path(os.path.realpath(worktree))
        if not root.is_dir():
            raise PersonaError(f"worktree {worktree} does not exist or is not a folder")
        try:
            target = contained_path(root, relpath)
        except UnsafePathError as exc:
            raise PersonaError(str(exc)) from None
        if target.exists() and not target.is_file():
            raise PersonaError(f"{target} exists and is not a file")
        return root, target

    def inject(
        self,
        worktree: Path,
        agent: Agent,
        peers: Sequence[Agent] = (),
        *,
        relpath: Path = PERSONA_RELPATH,
    ) -> InjectResult:
        """Write (or update) semo's section in ``worktree/relpath`` and keep the file out of
        commits. Blocking (file and git I/O): from the event loop use
        :meth:`inject_async`. Raises :class:`PersonaError`; a file it cannot merge safely is
        never overwritten."""
        section = self.render(agent, peers)
        root, target = self._target(worktree, relpath)
        top = _git_top(root)
        rel = target.relative_to(top).as_posix() if top and target.is_relative_to(top) else None
        flags = _index_flags(top, rel) if top and rel else None

        existing = _read(root, relpath)
        merged = merge_section(existing, section, source=str(target))
        changed = merged != existing
        if changed:
            _write(root, relpath, merged)

        hidden_by: Literal["exclude", "skip-worktree"] | None = None
        if top is not None and rel is not None:
            if flags is None:
                ensure_git_exclude(root, target.relative_to(root))
                hidden_by = "exclude"
            else:
                if flags != "S":
                    _update_index(top, "--skip-worktree", rel)
                hidden_by = "skip-worktree"
        log.debug("persona of %s in %s (changed: %s, %s)", agent.role, target, changed, hidden_by)
        return InjectResult(target, changed, hidden_by)

    async def inject_async(
        self,
        worktree: Path,
        agent: Agent,
        peers: Sequence[Agent] = (),
        *,
        relpath: Path = PERSONA_RELPATH,
    ) -> InjectResult:
        """:meth:`inject` in a worker thread."""
        if self._protocol is None:
            await asyncio.to_thread(lambda: self.protocol)
        return await asyncio.to_thread(self.inject, worktree, agent, peers, relpath=relpath)

    def remove(self, worktree: Path, *, relpath: Path = PERSONA_RELPATH) -> bool:
        """Take semo's section out again: a file left empty is deleted (if git does not track
        it); a tracked file loses its skip-worktree mark. Returns whether anything changed."""
        root, target = self._target(worktree, relpath)
        existing = _read(root, relpath)
        if existing is None:
            return False
        top = _git_top(root)
        rel = target.relative_to(top).as_posix() if top and target.is_relative_to(top) else None
        flags = _index_flags(top, rel) if top and rel else None
        rest = remove_section(existing, source=str(target))
        if rest == existing:
            return False
        if not rest.strip() and flags is None:
            try:
                unlink_in(root, relpath)
            except OSError as exc:
                raise PersonaError(f"cannot remove {target}: {exc}") from exc
            with contextlib.suppress(OSError):
                contained_path(root, target.parent.relative_to(root)).rmdir()
        else:
            _write(root, relpath, rest)
        if flags == "S" and top is not None and rel is not None:
            _update_index(top, "--no-skip-worktree", rel)
        return True
