-- semo 0008: an answer's delivery is recorded, so the engine reads only undelivered answers;
-- a dead engine's job is recovered in one transaction (semo_recover_job); claims can skip
-- command types (semo_claim_next_except). New functions are the service role's alone.
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


-- -- claims that skip command types -------------------------------------------------------------
--
-- semo_claim_next_except: semo_claim_next (0004), skipping pending commands whose type is one of
-- p_skip_types. An engine whose run_job budget is full claims with p_skip_types = {run_job}, so
-- the commands behind waiting jobs (cancel, terminate: they free sessions) still run.

create or replace function semo_claim_next_except(
    p_office_id text, p_engine_id text, p_lease_seconds double precision, p_skip_types text[]
) returns setof agent_commands
language plpgsql volatile as $$
declare
    v_id text;
    v_problem text;
begin
    loop
        with target as (
            select p.id from agent_commands p
             where p.office_id = p_office_id and p.status = 'pending'
               and p.command_type <> all (coalesce(p_skip_types, '{}'))
               and not exists (
                       select 1 from agent_sessions s
                        where s.session_id = p.session_id
                          and s.status <> 'terminated'
                          and s.engine_id <> p_engine_id
                          and semo_engine_id_alive(s.office_id, s.engine_id))
             order by p.created_at, p.seq
             limit 1
               for update of p skip locked),
        claimed as (
            update agent_commands c
               set status = 'processing',
                   claimed_by = p_engine_id,
                   lease_expires_at = now() + make_interval(secs => p_lease_seconds),
                   attempts = c.attempts + 1,
                   updated_at = now()
              from target t
             where c.id = t.id and c.status = 'pending'
            returning c.id, c.session_id)
        select k.id,
               case
                   when s.session_id is null then null
                   when s.status = 'terminated'
                       then semo_session_ended(s.session_id, s.end_reason)
                            || '; the command was not run'
                   when coalesce(s.engine_id, '') in ('', p_engine_id) then null
                   when semo_engine_id_alive(s.office_id, s.engine_id) then null
                   else 'session ' || s.session_id || '''s engine ' || s.engine_id || ' '
                        || semo_engine_silence(e.status, e.last_seen, e.stopped_at)
                        || '; the command was not run'
               end
          into v_id, v_problem
          from claimed k
          left join agent_sessions s on s.session_id = k.session_id
          left join engines e on e.office_id = s.office_id and e.engine_id = s.engine_id;
        if v_id is null then
            return;
        end if;
        if v_problem is null then
            return query select * from agent_commands where id = v_id;
            return;
        end if;
        perform semo_complete_command(v_id, p_engine_id, false, null, v_problem);
    end loop;
end;
$$;

select semo_lock_down();
