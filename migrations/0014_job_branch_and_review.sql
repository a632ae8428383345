-- semo 0014: a job's work is one reviewable unit (issue 23, docs/JOBS.md "Shipping a job's work").
--
-- - jobs.branch: the job's branch (semo/job/<id>), where the work of every role is combined.
-- - jobs.base_branch / jobs.base_commit: the office's base branch, and its commit when the job
--   started (the job branch and every role's branch start there; a retry keeps them).
-- - jobs.work: JSON, what the job's agents worked in: {"roles": {ROLE: {"branch", "worktree"}},
--   "conflict": {"roles", "files", "detail"} when combining failed, "resolve": {"role",
--   "prompt"} when the operator handed the conflict to an agent} (engine/jobwork/record.py).
-- - status 'needs_review' (jobs and job_events): the job ended, but its roles' work conflicts;
--   the operator resolves it (by hand or through an agent) and the job proceeds.
-- - semo_update_job (0010) writes the new columns too.
--
-- Applied once by `semo migrate` after 0013, in one transaction. The SQLite backend makes the
-- same change (engine/store/sqlite.py, schema version 7).

alter table jobs add column if not exists branch text;
alter table jobs add column if not exists base_branch text;
alter table jobs add column if not exists base_commit text;
alter table jobs add column if not exists work jsonb;

alter table jobs drop constraint if exists jobs_status_check;
alter table jobs add constraint jobs_status_check
    check (status in ('pending', 'running', 'done', 'failed', 'needs_review'));
alter table job_events drop constraint if exists job_events_status_check;
alter table job_events add constraint job_events_status_check
    check (status in ('pending', 'running', 'done', 'failed', 'needs_review'));

create or replace function semo_update_job(
    p_job_id text, p_updated_at timestamptz, p_row jsonb, p_entry jsonb default null
) returns setof jobs
language plpgsql volatile as $$
declare
    v_job jobs;
begin
    update jobs j
       set agent_id = r.agent_id, task = r.task, context = r.context, status = r.status,
           session_id = r.session_id, engine_id = r.engine_id, attempts = r.attempts,
           failure_reason = r.failure_reason, needs_human = r.needs_human,
           cancel_reason = r.cancel_reason, branch = r.branch, base_branch = r.base_branch,
           base_commit = r.base_commit, work = r.work, updated_at = r.updated_at
      from jsonb_populate_record(null::jobs, p_row) r
     where j.id = p_job_id and j.updated_at = p_updated_at
    returning j.* into v_job;
    if not found then
        return;
    end if;
    if p_entry is not null then
        perform semo_job_entry(v_job, p_entry);
    end if;
    return next v_job;
end;
$$;
