"""A job's diff cut to what a console can show.

Each file's patch is at most `MAX_PATCH_CHARS`; the rest is replaced by one line that says how
much was left out and where to see it all."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from semo.engine.jobwork.review import JobDiff

__all__ = ["MAX_PATCH_CHARS", "cut_patches"]

#: A file's patch beyond this many characters is cut (the console's frame stays small).
MAX_PATCH_CHARS = 256 * 1024


def cut_patches(diff: JobDiff, limit: int = MAX_PATCH_CHARS) -> JobDiff:
    """`diff` with every patch longer than `limit` cut at a line end before it."""
    files = []
    for change in diff.files:
        if len(change.patch) > limit:
            kept = change.patch[:limit].rsplit("\n", 1)[0]
            left = len(change.patch) - len(kept)
            note = f"\n… {left} more characters of this file: semo job diff {diff.job_id}"
            change = change.model_copy(update={"patch": kept + note})
        files.append(change)
    return diff.model_copy(update={"files": files})
