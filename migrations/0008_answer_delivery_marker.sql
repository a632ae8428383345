-- semo 0008: an answer's delivery is recorded, so the engine reads only undelivered answers;
-- a dead engine's job is recovered in one transaction (semo_recover_job, below).
--
-- - user_questions.answer_delivered_at: when the engine's agent confirmed it took the answer
--   (set by the engine, the service role, through the store's mark_answer_delivered). Null for
--   an answer not typed yet. The router's sweep reads only answered questions with it null
--   (a partial index), instead of every answered question of its sessions each pass; an engine
--   that restarts does not type an answer twice, and still types one it had not delivered.
-- - Members may not set it: the column is not in the UPDATE privilege 0007 grants to
--   authenticated (status, answer, answered_at), and the operators' policy admits only
--   pending -> answered.
--
-- Idempotent (IF NOT EXISTS, CREATE OR REPLACE); applies to a plain Postgres and to a
-- Supabase-shaped database. The SQLite backend has the same changes as schema version 6
-- (engine/store/sqlite.py).

alter table user_questions add column if not exists answer_delivered_at timestamptz;

create index if not exists user_questions_undelivered_idx
    on user_questions (office_id, created_at)
    where status = 'answered' and answer_delivered_at is null;

-- -- a dead engine's job, recovered in one transaction ----------------------------------------
--
-- semo_recover_job: a job still running on dead engine p_engine_id (attempts unchanged) has its
-- open work cancelled with p_reason and, in the same transaction, goes back to pending with
-- p_retry_reason and a new run_job command (when p_retry_reason is given and no cancel was
-- requested) or fails with p_reason. The job as it is then; nothing when it is not in that state
-- (another engine recovered it first, it ended otherwise, or, with p_unless_alive, its engine is
-- alive). Called before semo_end_engine, so a recovering engine that dies half-way leaves the
-- job running on the dead engine, and the next engine's reconcile recovers it.

create or replace function semo_recover_job(
    p_job_id text, p_engine_id text, p_attempts integer, p_reason text, p_retry_reason text,
    p_unless_alive boolean default true
) returns setof jobs
language plpgsql volatile as $$
declare
    v_job jobs;
begin
    select * into v_job from jobs
     where id = p_job_id and status = 'running' and engine_id = p_engine_id
       and attempts = p_attempts
       for update;
    if not found then
        return;
    end if;
    if p_unless_alive and semo_engine_id_alive(v_job.office_id, p_engine_id) then
        return;
    end if;
    update agent_invocations set status = 'cancelled', error = p_reason, updated_at = now()
     where job_id = p_job_id and status in ('pending', 'running');
    update agent_results set status = 'cancelled', cancel_reason = p_reason
     where job_id = p_job_id and status = 'pending';
    if p_retry_reason is not null and v_job.cancel_reason is null then
        update jobs set status = 'pending', engine_id = null, failure_reason = p_retry_reason,
                        needs_human = false, updated_at = now()
         where id = p_job_id
        returning * into v_job;
        insert into agent_commands (office_id, command_type, payload)
        values (v_job.office_id, 'run_job', jsonb_build_object('job_id', p_job_id));
    else
        update jobs set status = 'failed', failure_reason = p_reason, needs_human = false,
                        updated_at = now()
         where id = p_job_id
        returning * into v_job;
    end if;
    return next v_job;
end;
$$;

select semo_lock_down();
