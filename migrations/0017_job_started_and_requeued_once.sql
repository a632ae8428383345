-- semo 0017: a job is started once and requeued once, whatever engines race (issue 29).
--
-- Several engines on one office used to check, then act: an engine's job runner read the job,
-- saw it pending and then marked it running, and the engines ending a dead one each listed the
-- office's live run_job commands, then inserted one for a pending job that had none. Two engines
-- could both requeue a job (two run_job commands) and both run it.
--
-- - semo_start_job(p_job_id, p_engine_id, p_entry): a pending job becomes running on engine
--   p_engine_id (failure_reason and needs_human cleared), with its timeline entry p_entry (as
--   semo_job_entry, 0010) when given; nothing when it is not pending (another engine started
--   it, it was cancelled, it ended). A compare-and-set on the job's status: of the engines that
--   hold a run_job command for one job, one runs it.
-- - semo_requeue_job(p_job_id, p_command_id, p_reason): a pending job with no pending or
--   processing run_job command gets one (id p_command_id) and a `requeued` step (p_reason,
--   naming the command), with the job's row locked meanwhile, so that engines requeueing one
--   job at once insert one command; nothing otherwise (or for an unknown job). Nothing for an
--   empty p_job_id: the stores call both so to check that they exist.
--
-- Idempotent (CREATE OR REPLACE). The SQLite backend does the same in its own transactions
-- (engine/store/sqlite.py): nothing changes in its schema.

create or replace function semo_start_job(
    p_job_id text, p_engine_id text, p_entry jsonb default null
) returns setof jobs
language plpgsql volatile as $$
declare
    v_job jobs;
begin
    update jobs
       set status = 'running', engine_id = p_engine_id, failure_reason = null,
           needs_human = false, updated_at = now()
     where id = p_job_id and status = 'pending'
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

create or replace function semo_requeue_job(p_job_id text, p_command_id text, p_reason text)
returns setof agent_commands
language plpgsql volatile as $$
declare
    v_job jobs;
    v_command agent_commands;
begin
    -- the row lock serializes requeuers of one job; the check below then sees what the one
    -- before inserted (each statement reads what was committed when it starts)
    select * into v_job from jobs where id = p_job_id and status = 'pending' for update;
    if not found then
        return;
    end if;
    if exists (select 1 from agent_commands c
                where c.office_id = v_job.office_id and c.command_type = 'run_job'
                  and c.status in ('pending', 'processing')
                  and c.payload ->> 'job_id' = p_job_id) then
        return;
    end if;
    insert into agent_commands (id, office_id, command_type, payload)
    values (p_command_id, v_job.office_id, 'run_job', jsonb_build_object('job_id', p_job_id))
    returning * into v_command;
    perform semo_job_entry(v_job, jsonb_build_object(
        'step', 'requeued', 'ref_id', p_command_id, 'detail', coalesce(p_reason, '')));
    return next v_command;
end;
$$;

select semo_lock_down();
