"""PersonaInjector: the persona and the protocol in .claude/CLAUDE.md, merged with a project's
file, idempotent, and invisible to git in real repositories and worktrees."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from semo.engine.agents.persona import (
    PERSONA_RELPATH,
    SECTION_END,
    SECTION_START,
    PersonaError,
    PersonaInjector,
    agent_protocol_text,
    merge_section,
    protocol_file,
    remove_section,
)
from semo.engine.protocol.parser import parse_reply
from semo.engine.sessions.worktrees import WorktreeManager
from semo.engine.store.models import Agent
from tests.support.git_repo import git
from tests.support.git_repo import make_repo as new_repo

PROTOCOL_MD = Path(__file__).resolve().parents[2] / "docs" / "PROTOCOL.md"

OFFICE = "office-1"
BE = Agent(
    office_id=OFFICE,
    name="Backend Bob",
    role="BE",
    prompt="You build the HTTP API.\nPrefer small, tested changes. persona-marker-7f3a",
    scope_patterns=["api/**", "tests/api/*.py"],
    core_skills=["python", "postgres"],
)
FE = Agent(office_id=OFFICE, name="Frontend Fran", role="FE", prompt="You build the UI.")
QA = Agent(office_id=OFFICE, name="Quality Quinn", role="QA")


def status(cwd: Path) -> str:
    return git(cwd, "status", "--porcelain", "--untracked-files=all", "--ignored=no")


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    return new_repo(path, {"README": "hello\n", **(files or {})}, author_in_config=True)


def agent_section() -> str:
    text = PROTOCOL_MD.read_text(encoding="utf-8")
    start, end = "<!-- agent-protocol:start -->", "<!-- agent-protocol:end -->"
    return text[text.index(start) + len(start) : text.index(end)].strip("\n")


@pytest.fixture
def injector() -> PersonaInjector:
    return PersonaInjector()


# -- rendering ---------------------------------------------------------------------------------


def test_render_has_persona_scope_skills_peers_and_protocol(injector: PersonaInjector) -> None:
    text = injector.render(BE, [BE, FE, QA])
    assert text.startswith(SECTION_START) and text.endswith(SECTION_END)
    assert "# You are Backend Bob, the BE agent" in text
    assert "You build the HTTP API.\nPrefer small, tested changes. persona-marker-7f3a" in text
    assert "## Files you may change" in text
    assert "- `api/**`\n- `tests/api/*.py`" in text
    assert "## Core skills\n\n- python\n- postgres" in text
    assert "- `FE`: Frontend Fran\n- `QA`: Quality Quinn" in text
    assert "- `BE`:" not in text  # not itself
    assert agent_section() in text  # verbatim
    assert text.count("## Messages to semo") == 1


def test_render_without_scope_skills_or_peers(injector: PersonaInjector) -> None:
    text = injector.render(QA)
    assert "No limits were set" in text
    assert "## Core skills" not in text
    assert "None: do the task yourself" in text


def test_rendered_persona_sends_no_protocol_message(injector: PersonaInjector) -> None:
    # a model that echoes its instructions must not send anything by doing so
    assert parse_reply(injector.render(BE, [FE, QA])) == []


def test_peers_with_repeated_roles_are_listed_once(injector: PersonaInjector) -> None:
    other_fe = Agent(office_id=OFFICE, name="Second FE", role="FE")
    text = injector.render(BE, [FE, other_fe])
    assert text.count("- `FE`:") == 1 and "Second FE" not in text


def test_odd_scope_patterns_stay_code(injector: PersonaInjector) -> None:
    agent = BE.model_copy(update={"scope_patterns": ["a`b/**", "@docs/*.md", "x\ny"]})
    text = injector.render(agent)
    assert "- ``a`b/**``" in text
    assert "- `@docs/*.md`" in text  # a code span: never read as an @import
    assert "- `x y`" in text


@pytest.mark.parametrize("marker", [SECTION_START, SECTION_END])
def test_persona_containing_semo_markers_is_refused(injector: PersonaInjector, marker: str) -> None:
    agent = BE.model_copy(update={"prompt": f"text {marker} more"})
    with pytest.raises(PersonaError, match="contains semo's own marker"):
        injector.render(agent)


# -- docs/PROTOCOL.md --------------------------------------------------------------------------


def test_protocol_is_read_from_the_checkout() -> None:
    assert protocol_file() == PROTOCOL_MD
    assert agent_protocol_text() == agent_section()


def test_protocol_is_found_where_a_wheel_installs_it(tmp_path: Path) -> None:
    installed = tmp_path / "prefix" / "share" / "semo" / "docs" / "PROTOCOL.md"
    installed.parent.mkdir(parents=True)
    shutil.copy(PROTOCOL_MD, installed)
    found = protocol_file([tmp_path / "checkout" / "docs" / "PROTOCOL.md", installed])
    assert found == installed
    assert PersonaInjector(protocol_path=found).protocol == agent_section()


def test_missing_or_broken_protocol_file(tmp_path: Path) -> None:
    with pytest.raises(PersonaError, match=r"cannot find docs/PROTOCOL\.md"):
        protocol_file([tmp_path / "nope.md"])
    broken = tmp_path / "PROTOCOL.md"
    broken.write_text("no markers here\n")
    with pytest.raises(PersonaError, match="expected exactly one"):
        agent_protocol_text(broken)
    broken.write_text("<!-- agent-protocol:end --> x <!-- agent-protocol:start -->\n")
    with pytest.raises(PersonaError, match="comes before"):
        agent_protocol_text(broken)


# -- merging (pure) ----------------------------------------------------------------------------

SECTION = f"{SECTION_START}\nsemo text\n{SECTION_END}"


def test_merge_into_nothing_and_into_project_text() -> None:
    assert merge_section(None, SECTION) == SECTION + "\n"
    assert merge_section("  \n", SECTION) == SECTION + "\n"
    project = "# Project\n\nUse tabs.\n"
    merged = merge_section(project, SECTION)
    assert merged == project + "\n" + SECTION + "\n"
    assert remove_section(merged) == project


def test_merge_replaces_only_the_section_in_place() -> None:
    text = f"# Top\n\n{SECTION}\n\n## Bottom\nkept\n"
    new = f"{SECTION_START}\nnew text\n{SECTION_END}"
    assert merge_section(text, new) == f"# Top\n\n{new}\n\n## Bottom\nkept\n"
    assert merge_section(merge_section(text, new), new) == merge_section(text, new)
    assert remove_section(text) == "# Top\n\n## Bottom\nkept\n"


def test_merge_keeps_crlf() -> None:
    project = "# Project\r\nline\r\n"
    merged = merge_section(project, SECTION)
    assert merged == project + "\r\n" + SECTION.replace("\n", "\r\n") + "\r\n"
    assert merge_section(merged, SECTION) == merged
    assert remove_section(merged) == project


@pytest.mark.parametrize(
    "damaged",
    [
        f"x\n{SECTION_START}\nno end\n",
        f"x\n{SECTION_END}\nno start\n",
        f"{SECTION_END}\n{SECTION_START}\n",
        f"{SECTION}\n{SECTION}\n",
    ],
)
def test_damaged_sections_are_refused(damaged: str) -> None:
    with pytest.raises(PersonaError, match="damaged"):
        merge_section(damaged, SECTION)


# -- files in real repositories ----------------------------------------------------------------


def test_inject_into_a_new_worktree_keeps_git_clean(
    injector: PersonaInjector, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "semo/BE/t1", str(wt))
    result = injector.inject(wt, BE, [FE, QA])
    path = wt / PERSONA_RELPATH
    assert result.path == path.resolve() and result.changed and result.hidden_by == "exclude"
    text = path.read_text()
    assert text == injector.render(BE, [FE, QA]) + "\n"
    assert "persona-marker-7f3a" in text and agent_section() in text
    assert status(wt) == "" and status(repo) == ""
    assert "/.claude/CLAUDE.md" in (repo / ".git" / "info" / "exclude").read_text()


def test_inject_is_idempotent_and_updates_in_place(
    injector: PersonaInjector, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    first = injector.inject(repo, BE, [FE])
    before = first.path.read_bytes()
    stamp = first.path.stat().st_mtime_ns
    again = injector.inject(repo, BE, [FE])
    assert not again.changed
    assert first.path.read_bytes() == before and first.path.stat().st_mtime_ns == stamp
    exclude = (repo / ".git" / "info" / "exclude").read_text()
    assert exclude.count("/.claude/CLAUDE.md") == 1

    # the operator's own notes next to semo's section survive a persona change
    first.path.write_text("# My notes\nkeep me\n\n" + first.path.read_text())
    changed = BE.model_copy(update={"prompt": "A new prompt. persona-v2"})
    result = injector.inject(repo, changed, [FE])
    text = result.path.read_text()
    assert result.changed
    assert text.startswith("# My notes\nkeep me\n\n" + SECTION_START)
    assert "persona-v2" in text and "persona-marker-7f3a" not in text
    assert text.count(SECTION_START) == 1
    assert status(repo) == ""


def test_tracked_claude_md_is_merged_and_hidden_with_skip_worktree(
    injector: PersonaInjector, tmp_path: Path
) -> None:
    project = "# Project rules\n\nRun `make test` before committing.\n"
    repo = make_repo(tmp_path / "repo", {".claude/CLAUDE.md": project})
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "semo/BE/t1", str(wt))

    result = injector.inject(wt, BE, [FE])
    assert result.hidden_by == "skip-worktree" and result.changed
    text = (wt / PERSONA_RELPATH).read_text()
    assert text.startswith(project) and "persona-marker-7f3a" in text
    assert status(wt) == ""
    assert git(wt, "diff", "HEAD") == ""
    assert git(wt, "ls-files", "-v", ".claude/CLAUDE.md").startswith("S ")

    # the agent commits everything it changed: semo's section is not in the commit
    (wt / "api.py").write_text("print('hi')\n")
    git(wt, "add", "-A")
    git(wt, "commit", "-q", "-m", "work")
    assert git(wt, "show", "--name-only", "--format=", "HEAD").split() == ["api.py"]
    assert git(wt, "show", "HEAD:.claude/CLAUDE.md") == project
    assert status(wt) == ""
    # the main checkout's copy is untouched
    assert (repo / PERSONA_RELPATH).read_text() == project and status(repo) == ""

    assert not injector.inject(wt, BE, [FE]).changed
    assert injector.remove(wt)
    assert (wt / PERSONA_RELPATH).read_text() == project
    assert git(wt, "ls-files", "-v", ".claude/CLAUDE.md").startswith("H ")
    assert status(wt) == ""


def test_project_root_claude_md_is_left_alone(injector: PersonaInjector, tmp_path: Path) -> None:
    project = "# Root instructions\n"
    repo = make_repo(tmp_path / "repo", {"CLAUDE.md": project})
    result = injector.inject(repo, BE)
    assert result.path == (repo / PERSONA_RELPATH).resolve()
    assert (repo / "CLAUDE.md").read_text() == project
    assert status(repo) == ""


def test_tracked_symlink_into_the_worktree_is_followed(
    injector: PersonaInjector, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo", {"CLAUDE.md": "# Shared\n"})
    (repo / ".claude").mkdir()
    (repo / PERSONA_RELPATH).symlink_to("../CLAUDE.md")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "link")
    result = injector.inject(repo, BE)
    assert result.path == (repo / "CLAUDE.md").resolve()
    assert result.hidden_by == "skip-worktree"
    assert (repo / PERSONA_RELPATH).is_symlink()
    assert "persona-marker-7f3a" in (repo / "CLAUDE.md").read_text()
    assert status(repo) == ""


def test_symlink_leading_outside_is_refused(injector: PersonaInjector, tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / ".claude").mkdir(parents=True)
    outside = tmp_path / "outside.md"
    outside.write_text("not yours\n")
    (work / PERSONA_RELPATH).symlink_to(outside)
    with pytest.raises(PersonaError, match="outside the worktree"):
        injector.inject(work, BE)
    assert outside.read_text() == "not yours\n"


def test_damaged_file_is_never_overwritten(injector: PersonaInjector, tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / ".claude").mkdir(parents=True)
    damaged = f"# Mine\n{SECTION_START}\nhalf a section\n"
    (work / PERSONA_RELPATH).write_text(damaged)
    with pytest.raises(PersonaError, match="damaged"):
        injector.inject(work, BE)
    assert (work / PERSONA_RELPATH).read_text() == damaged


def test_outside_git_the_file_is_just_written(injector: PersonaInjector, tmp_path: Path) -> None:
    work = tmp_path / "plain"
    work.mkdir()
    result = injector.inject(work, BE)
    assert result.hidden_by is None and result.changed
    assert "persona-marker-7f3a" in result.path.read_text()
    assert injector.remove(work)
    assert not (work / ".claude").exists()
    assert not injector.remove(work)


def test_missing_worktree_is_an_error(injector: PersonaInjector, tmp_path: Path) -> None:
    with pytest.raises(PersonaError, match="does not exist"):
        injector.inject(tmp_path / "missing", BE)


def test_file_mode_is_kept(injector: PersonaInjector, tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / ".claude").mkdir(parents=True)
    path = work / PERSONA_RELPATH
    path.write_text("# Mine\n")
    os.chmod(path, 0o640)
    injector.inject(work, BE)
    assert path.stat().st_mode & 0o777 == 0o640


async def test_inject_async_in_a_managed_worktree(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    manager = WorktreeManager(repo, tmp_path / "workspace")
    wt = await manager.create("BE", "t1")
    result = await PersonaInjector().inject_async(wt.path, BE, [FE, QA])
    assert "persona-marker-7f3a" in result.path.read_text()
    assert status(wt.path) == "" and status(repo) == ""
    assert await manager.remove(wt) is True  # an untracked, excluded file does not block it
