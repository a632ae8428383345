-- semo 0010: a job's status and the timeline entry that says so are written together. The
-- engine wrote the entry (done, failed, engine_died, retry, cancel_requested) after the status,
-- in a second statement: a reader could see a job done or failed without the step that says why,
-- and an engine dying between the two lost the step for good.
--
-- - semo_request_job_cancel_recorded: semo_request_job_cancel (0006) and its step, in one call:
--   `failed` ("cancelled: <reason>") for a pending job, `cancel_requested` (<reason>) for a
--   running one. (A dashboard's semo_cancel_job, 0007, writes its step in its own function.)
-- - semo_recover_job_recorded: semo_recover_job (0008) and the steps it takes, in one call:
--   `engine_died` (the reason; status failed), then `retry` (the retry reason; pending) or,
--   unless a cancel was asked for, `failed` ("<reason> (attempt N, no retry left)").
-- - semo_update_job: the supabase store's job update (a compare-and-set on updated_at) with an
--   optional timeline entry, so PostgREST writes both in one transaction. p_row is the whole
--   updated row and p_entry the entry (JSON objects of the jobs and job_events columns); the
--   row written, or nothing when updated_at changed meanwhile.
-- - semo_take_over_job: a job running on engine p_from_engine with p_attempts and no cancel asked
--   for becomes engine p_to_engine's (nothing else changes: its work stays open), with its
--   timeline entry; nothing otherwise. A new engine that resumes the dead one's conversation
--   takes its jobs over with it, and can no longer race another host's recovery of the same job.
-- - semo_job_entry / semo_job_step: the entry written, with the job's status and attempts.
--
-- Applied once by `semo migrate` after 0009, in one transaction. The SQLite backend does the same
-- in its own transactions (engine/store/sqlite.py): nothing changes in its schema.

create or replace function semo_job_step(
    p_job jobs, p_step text, p_status text, p_detail text
) returns void
language sql volatile as $$
    insert into job_events (job_id, office_id, step, status, attempts, session_id, agent_id,
                            detail)
    values (p_job.id, p_job.office_id, p_step, p_status, p_job.attempts, p_job.session_id,
            p_job.agent_id, coalesce(p_detail, ''));
$$;

create or replace function semo_job_entry(p_job jobs, p_entry jsonb) returns void
language plpgsql volatile as $$
declare
    v_entry job_events := jsonb_populate_record(null::job_events, p_entry);
begin
    insert into job_events (job_id, office_id, step, status, attempts, session_id, agent_id,
                            ref_id, detail, at)
    values (p_job.id, p_job.office_id, v_entry.step, p_job.status, p_job.attempts,
            coalesce(v_entry.session_id, p_job.session_id),
            coalesce(v_entry.agent_id, p_job.agent_id), v_entry.ref_id,
            coalesce(v_entry.detail, ''), coalesce(v_entry.at, now()));
end;
$$;

create or replace function semo_request_job_cancel_recorded(p_job_id text, p_reason text)
returns setof jobs
language plpgsql volatile as $$
declare
    v_job jobs;
begin
    select * into v_job from semo_request_job_cancel(p_job_id, p_reason);
    if v_job.id is null then
        return;
    end if;
    if v_job.status = 'failed' then
        perform semo_job_step(v_job, 'failed', v_job.status, v_job.failure_reason);
    else
        perform semo_job_step(v_job, 'cancel_requested', v_job.status, p_reason);
    end if;
    return next v_job;
end;
$$;

create or replace function semo_recover_job_recorded(
    p_job_id text, p_engine_id text, p_attempts integer, p_reason text, p_retry_reason text,
    p_unless_alive boolean default true
) returns setof jobs
language plpgsql volatile as $$
declare
    v_job jobs;
begin
    select * into v_job
      from semo_recover_job(p_job_id, p_engine_id, p_attempts, p_reason, p_retry_reason,
                            p_unless_alive);
    if v_job.id is null then
        return;
    end if;
    perform semo_job_step(v_job, 'engine_died', 'failed', p_reason);
    if v_job.status = 'pending' then
        perform semo_job_step(v_job, 'retry', v_job.status, p_retry_reason);
    elsif v_job.cancel_reason is null then
        perform semo_job_step(
            v_job, 'failed', v_job.status,
            p_reason || ' (attempt ' || v_job.attempts || ', no retry left)');
    end if;
    return next v_job;
end;
$$;

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
           cancel_reason = r.cancel_reason, updated_at = r.updated_at
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

create or replace function semo_take_over_job(
    p_job_id text, p_from_engine text, p_attempts integer, p_to_engine text,
    p_entry jsonb default null
) returns setof jobs
language plpgsql volatile as $$
declare
    v_job jobs;
begin
    update jobs set engine_id = p_to_engine, updated_at = now()
     where id = p_job_id and status = 'running' and engine_id = p_from_engine
       and attempts = p_attempts and cancel_reason is null
    returning * into v_job;
    if not found then
        return;
    end if;
    if p_entry is not null then
        perform semo_job_entry(v_job, p_entry);
    end if;
    return next v_job;
end;
$$;

select semo_lock_down();
