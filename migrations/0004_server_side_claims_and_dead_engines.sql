-- semo 0004: a claim, and the end of a dead engine's work, each in one statement on the server;
-- engines of an older semo keep their sessions for an hour after 0003, whether or not they held
-- anything then.
--
-- Applied once by `semo migrate` after 0003, in one transaction. The SQLite backend has the same
-- rules (engine/store/sqlite.py, schema version 4).
--
-- - semo_engine_id_alive: whether an engine id counts as alive now. An engine with a row in
--   `engines` is alive while that row is (semo_engine_alive); one with no row is alive until an
--   hour after migration 0003 was applied (semo_migrations.applied_at), so that an engine of a
--   semo from before heartbeats, idle when `semo migrate` ran, keeps the sessions it starts
--   afterwards until it is restarted with this semo; after that hour no row means dead.
-- - semo_claim_next: claims the next command an engine may take and, in the same transaction,
--   fails the commands of ended sessions and of sessions whose engine is not alive (with the
--   reason), instead of the client doing it in further requests (a network error between them
--   left a claimed row held by an engine that never ran it).
-- - semo_end_engine: ends what a dead engine left (its sessions, their pending questions, its
--   in-flight commands and running jobs) only while the engine is not alive, decided in the same
--   statement as the writes, so an engine that beats again (or starts) meanwhile keeps them; a
--   job finished meanwhile is not overwritten.
--
-- The reasons written here are worded as engine/store/_shared.py words them (session_ended,
-- engine_silence, when); the conformance tests compare them on every backend.

-- -- when engines of an older semo stop counting as alive ---------------------------------------

-- An hour after migration 0003 was applied (null: no record of it, e.g. migrations applied by
-- hand without `semo migrate`: no grace).
create function semo_heartbeat_grace_until() returns timestamptz
language plpgsql stable as $$
begin
    if to_regclass('semo_migrations') is null then
        return null;
    end if;
    return (select m.applied_at + interval '3600 seconds'
              from semo_migrations m
             where m.name = '0003_engine_heartbeats.sql');
end;
$$;

-- Whether engine p_engine_id of p_office_id counts as alive now (the one rule for an engine id:
-- its row is alive, or it has no row and the grace after 0003 is running).
create function semo_engine_id_alive(p_office_id text, p_engine_id text) returns boolean
language sql stable as $$
    select coalesce(nullif(p_engine_id, '') is not null
                    and coalesce((select semo_engine_alive(e.status, e.alive_until)
                                    from engines e
                                   where e.office_id = p_office_id
                                     and e.engine_id = p_engine_id),
                                 now() < semo_heartbeat_grace_until()),
                    false);
$$;

-- -- wording (as engine/store/_shared.py) --------------------------------------------------------

-- A timestamp as Python's datetime.isoformat() writes it in UTC ("?" for none).
create function semo_when(p_at timestamptz) returns text
language sql stable as $$
    select case
        when p_at is null then '?'
        when extract(microseconds from p_at)::bigint % 1000000 = 0
            then to_char(p_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS') || '+00:00'
        else to_char(p_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') || '+00:00'
    end;
$$;

-- What became of an engine that no longer counts as alive, from its row (status null: no row).
create function semo_engine_silence(
    p_status text, p_last_seen timestamptz, p_stopped_at timestamptz
) returns text
language sql stable as $$
    select case
        when p_status is null
            then 'never recorded a heartbeat (an engine of an older semo, or a row written by hand)'
        when p_status = 'stopped' then 'stopped at ' || semo_when(p_stopped_at)
        else 'stopped answering (last seen ' || semo_when(p_last_seen) || ')'
    end;
$$;

-- "session X has ended[: reason]"
create function semo_session_ended(p_session_id text, p_end_reason text) returns text
language sql immutable as $$
    select 'session ' || p_session_id || ' has ended'
           || coalesce(': ' || nullif(p_end_reason, ''), '');
$$;

-- -- the 0003 functions, with the rule for engines without a row ---------------------------------
--
-- (semo_claim_command and semo_session_state are what engines of the 0003 semo call; this semo
-- calls semo_claim_next.)

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
                             and s.engine_id <> p_engine_id
                             and semo_engine_id_alive(s.office_id, s.engine_id))
                order by p.created_at, p.seq
                limit 1
                  for update of p skip locked)
       and c.status = 'pending'
    returning c.*;
$$;

create or replace function semo_session_state(p_session_id text)
returns table (
    status text, end_reason text, engine_id text, engine_status text,
    engine_last_seen timestamptz, engine_stopped_at timestamptz, engine_alive boolean
)
language sql stable as $$
    select s.status, s.end_reason, s.engine_id, e.status, e.last_seen, e.stopped_at,
           semo_engine_id_alive(s.office_id, s.engine_id)
      from agent_sessions s
      left join engines e on e.office_id = s.office_id and e.engine_id = s.engine_id
     where s.session_id = p_session_id;
$$;

-- -- claims ---------------------------------------------------------------------------------------
--
-- The oldest pending command of the office that p_engine_id may take, now 'processing' and
-- leased to it (none: an empty result). It may take a command without a session, or whose
-- session is unknown, has no engine, is its own, has ended, or whose engine is not alive; a live
-- session of another engine that is alive keeps its commands for that engine. A command of an
-- ended session, or of a session whose engine is not alive, is failed here with its one result
-- saying why ("...; the command was not run"), and the next one is claimed instead. The claim
-- and the look at the command's session are one statement (one snapshot), so they agree. SKIP
-- LOCKED: engines claiming at once each get a different row, nobody waits. The client checks
-- the claimed row's payload against its model (and fails it, "rejected: ...", if it does not
-- fit: a row inserted around semo's validation).

create function semo_claim_next(
    p_office_id text, p_engine_id text, p_lease_seconds double precision
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

-- -- what a dead engine left ----------------------------------------------------------------------
--
-- Ends what engine p_engine_id of p_office_id left: its live sessions become terminated with
-- p_session_reason (their pending questions cancelled, "session X has ended: <reason>"), its
-- in-flight commands fail with p_command_error (one result each), its running jobs (and running
-- jobs without an engine whose session it ran) fail with p_job_reason. With p_unless_alive, only
-- while the engine is not alive (semo_engine_id_alive), decided in this one statement with the
-- writes: an engine that has beaten (or started) since the caller looked keeps everything.
-- Each row is changed only in the state it was looked for in (a job done meanwhile stays done).
-- Returns whether the engine counted as dead, and how many of each were changed.

create function semo_end_engine(
    p_office_id text, p_engine_id text, p_session_reason text, p_command_error text,
    p_job_reason text, p_unless_alive boolean default true
) returns table (
    dead boolean, sessions_ended integer, questions_cancelled integer, commands_failed integer,
    jobs_failed integer
)
language sql volatile as $$
    with verdict as (
        select not (p_unless_alive and semo_engine_id_alive(p_office_id, p_engine_id)) as dead),
    ended as (
        update agent_sessions s
           set status = 'terminated', end_reason = p_session_reason, last_activity_at = now(),
               ended_at = coalesce(s.ended_at, now())
         where s.office_id = p_office_id and s.engine_id = p_engine_id
           and s.status <> 'terminated'
           and (select v.dead from verdict v)
        returning s.session_id),
    cancelled as (
        update user_questions q
           set status = 'cancelled',
               cancel_reason = semo_session_ended(q.session_id, p_session_reason),
               cancelled_at = now()
          from ended e
         where q.session_id = e.session_id and q.status = 'pending'
        returning 1),
    failed as (
        update agent_commands c
           set status = 'failed', lease_expires_at = null, updated_at = now()
         where c.office_id = p_office_id and c.status = 'processing'
           and c.claimed_by = p_engine_id
           and (select v.dead from verdict v)
        returning c.id),
    results as (
        insert into agent_command_results (command_id, success, result, error)
        select f.id, false, null, p_command_error from failed f
        on conflict (command_id) do nothing
        returning 1),
    failed_jobs as (
        update jobs j
           set status = 'failed', failure_reason = p_job_reason, needs_human = false,
               updated_at = now()
         where j.office_id = p_office_id and j.status = 'running'
           and (j.engine_id = p_engine_id
                or (j.engine_id is null
                    and exists (select 1 from agent_sessions s
                                 where s.session_id = j.session_id
                                   and s.engine_id = p_engine_id)))
           and (select v.dead from verdict v)
        returning 1)
    select (select v.dead from verdict v),
           (select count(*)::integer from ended),
           (select count(*)::integer from cancelled),
           (select count(*)::integer from failed),
           (select count(*)::integer from failed_jobs);
$$;
