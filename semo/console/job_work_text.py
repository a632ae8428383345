"""A job's work (branch, base, commits, diffstat) as lines for the jobs view's side panel.

The console adds no markup: the lines go through semo/console/text.py.

    lines = review_lines(review)      # semo.engine.jobwork.review.JobReview
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from semo.console.diff_text import counts

if TYPE_CHECKING:
    from semo.engine.jobwork.review import JobReview

#: Commits and files listed, at most (the diff view and `semo job show` have them all).
MAX_LISTED = 8
KEYS_LINE = "d diff · Enter the agent's pane · s a shell in the worktree"


def review_lines(review: JobReview) -> list[str]:
    """`branch: ...`, the base, the commits (oldest first), the files with their counts."""
    base = review.base_branch or "?"
    at = f" at {review.base_commit[:7]}" if review.base_commit else ""
    lines = [f"branch: {review.branch or '(none yet)'}", f"base: {base}{at}"]
    if review.conflict is not None:
        files = ", ".join(review.conflict.files) or "?"
        lines.append(f"conflict ({', '.join(review.conflict.roles)}): {files}")
    lines.append(f"commits ({len(review.commits)}):")
    for commit in review.commits[:MAX_LISTED]:
        role = f"[{commit.role}] " if commit.role else ""
        lines.append(f"  {commit.short} {role}{commit.subject}")
    if len(review.commits) > MAX_LISTED:
        lines.append(f"  … {len(review.commits) - MAX_LISTED} more")
    changed = f"{len(review.files)} file(s), +{review.insertions} -{review.deletions}"
    lines.append(f"files: {changed}")
    for stat in review.files[:MAX_LISTED]:
        lines.append(f"  {stat.path}  {counts(stat.added, stat.removed)}")
    if len(review.files) > MAX_LISTED:
        lines.append(f"  … {len(review.files) - MAX_LISTED} more")
    lines.append(KEYS_LINE)
    return lines
