"""What a job's agents worked in (``jobs.work``) and the names of its branches.

    work = JobWork.of(job)                      # from the row (empty when nothing yet)
    work.roles["FE"] = RoleWork(branch=role_branch("FE", job.id), worktree="/w/agent/FE/warm-fe")
    await store.update_job(job.id, work=work.dump())

Branches (docs/JOBS.md "Shipping a job's work"): the job's ``semo/job/<job id>``, where the
roles' work is combined; each role's ``semo/<ROLE>/job-<job id>``, where that role commits
(in whichever of its worktrees it runs); leftovers of an earlier job saved under
``semo/saved/<ROLE>/<when>``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from semo.engine.store.models import Job

__all__ = [
    "SAVED_PREFIX",
    "Conflict",
    "JobWork",
    "ResolveRequest",
    "RoleWork",
    "job_branch",
    "role_branch",
]

#: Where an earlier job's uncommitted leftovers are kept (a branch each).
SAVED_PREFIX = "semo/saved"


def job_branch(job_id: str) -> str:
    """The job's own branch."""
    return f"semo/job/{job_id}"


def role_branch(role: str, job_id: str) -> str:
    """The branch `role` works on for the job (its worktree's branch while it does)."""
    return f"semo/{role}/job-{job_id}"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class RoleWork(_Model):
    """A role that worked on the job: its branch, and the worktree it last worked in."""

    branch: str
    worktree: str | None = None


class Conflict(_Model):
    """The roles' work does not combine: the roles whose branch did not merge, the files."""

    roles: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    detail: str = ""


class ResolveRequest(_Model):
    """The operator handed a conflict to `role`: its session gets `prompt` in its worktree."""

    role: str
    prompt: str


class JobWork(_Model):
    """``jobs.work``: the roles that worked on the job, a conflict, a resolve request."""

    roles: dict[str, RoleWork] = Field(default_factory=dict)
    conflict: Conflict | None = None
    resolve: ResolveRequest | None = None

    @classmethod
    def of(cls, job: Job) -> JobWork:
        return cls.model_validate(job.work or {})

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
