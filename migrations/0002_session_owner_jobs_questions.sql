-- semo 0002: commands for a session go to the engine that runs it; jobs record their engine;
-- questions can be cancelled with a reason.
--
-- Applied once by `semo migrate` after 0001_core.sql, in one transaction. The SQLite backend
-- has the same schema (engine/store/sqlite.py, schema version 2).

-- -- jobs: the engine running a job, so that reconcile can fail the running jobs of a dead one --

alter table jobs add column engine_id text;

create index jobs_running_engine_idx on jobs (office_id, engine_id) where status = 'running';

-- -- questions: cancelled (e.g. their session ended) with a reason -----------------------------

alter table user_questions
    add column cancel_reason text,
    add column cancelled_at  timestamptz;

-- ending a session cancels its pending questions
create index user_questions_session_idx on user_questions (session_id) where status = 'pending';

-- -- claims: a command for a live session of another engine is not ours -------------------------
--
-- The oldest pending command of the office that p_engine_id may run, now 'processing' and
-- leased to it. A command with a session_id may be claimed only by the engine that runs that
-- session (agent_sessions.engine_id) while the session is live; a command without a session, or
-- whose session is unknown, has no engine, or has ended, may be claimed by any engine of the
-- office (the client fails one whose session has ended at once, with a result saying so).
-- SKIP LOCKED: engines claiming at once each get a different row, nobody waits.

create or replace function semo_claim_command(
    p_office_id text, p_engine_id text, p_lease_seconds double precision
) returns setof agent_commands
language sql volatile as $$
    update agent_commands c
       set status = 'processing',
           claimed_by = p_engine_id,
           lease_expires_at = now() + make_interval(secs => p_lease_seconds),
           attempts = c.attempts + 1,
           updated_at = now()
     where c.id = (
               select p.id from agent_commands p
                where p.office_id = p_office_id and p.status = 'pending'
                  and not exists (
                          select 1 from agent_sessions s
                           where s.session_id = p.session_id
                             and s.status <> 'terminated'
                             and s.engine_id is not null
                             and s.engine_id <> p_engine_id)
                order by p.created_at, p.seq
                limit 1
                  for update of p skip locked)
       and c.status = 'pending'
    returning c.*;
$$;
