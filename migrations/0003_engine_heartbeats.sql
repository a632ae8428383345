-- semo 0003: engines record heartbeats; a session whose engine stopped answering is nobody's.
--
-- Applied once by `semo migrate` after 0002, in one transaction. The SQLite backend has the same
-- schema (engine/store/sqlite.py, schema version 3).
--
-- Every running engine writes its row in `engines` on start and every lease_seconds / 3, with
-- the time after which it counts as dead (alive_until = now() + 3 x lease_seconds), and marks
-- it stopped on a clean stop. Times come from the database clock, so engines on several hosts
-- agree on who is alive. A command for a live session whose engine is not alive (heartbeat run
-- out, stopped, or no row at all) may be claimed by any engine, which fails it with a reason;
-- engines periodically end such engines' sessions, fail their running jobs and cancel their
-- sessions' questions (engine/reconcile.py).

-- -- engines -------------------------------------------------------------------------------------

create table engines (
    office_id    text not null references offices (id) on delete cascade,
    engine_id    text not null check (length(engine_id) > 0),
    status       text not null default 'running' check (status in ('running', 'stopped')),
    started_at   timestamptz not null default now(),
    last_seen    timestamptz not null default now(),
    -- the engine counts as dead from then on unless it beats again
    alive_until  timestamptz not null,
    stopped_at   timestamptz,
    primary key (office_id, engine_id)
);

alter table engines enable row level security;
create policy semo_office_isolation on engines
    using (office_id = semo_claims_office_id()) with check (office_id = semo_claims_office_id());

-- Whether an engine row counts as alive now (the one definition, used by every function below).
create function semo_engine_alive(p_status text, p_alive_until timestamptz) returns boolean
language sql stable as $$
    select p_status = 'running' and p_alive_until > now();
$$;

-- An engine row as the functions return it: the columns, and whether it is alive now.
create type semo_engine_state as (
    office_id    text,
    engine_id    text,
    status       text,
    started_at   timestamptz,
    last_seen    timestamptz,
    alive_until  timestamptz,
    stopped_at   timestamptz,
    alive        boolean
);

-- p_engine_id of p_office_id is alive: last_seen now, alive until now + p_dead_after seconds.
-- p_starting: a new run (started_at now). Unknown office: foreign-key violation (23503).
create function semo_record_heartbeat(
    p_office_id text, p_engine_id text, p_dead_after double precision,
    p_starting boolean default false
) returns setof semo_engine_state
language sql volatile as $$
    with beat as (
        insert into engines as e (office_id, engine_id, status, started_at, last_seen,
                                  alive_until, stopped_at)
        values (p_office_id, p_engine_id, 'running', now(), now(),
                now() + make_interval(secs => p_dead_after), null)
        on conflict (office_id, engine_id) do update
           set status = 'running',
               last_seen = now(),
               alive_until = excluded.alive_until,
               started_at = case when p_starting then now() else e.started_at end,
               stopped_at = null
        returning e.*)
    select b.office_id, b.engine_id, b.status, b.started_at, b.last_seen, b.alive_until,
           b.stopped_at, semo_engine_alive(b.status, b.alive_until)
      from beat b;
$$;

-- A clean stop: the engine no longer counts as alive. No row: an empty result (NotFound).
create function semo_mark_engine_stopped(p_office_id text, p_engine_id text)
returns setof semo_engine_state
language sql volatile as $$
    with stopped as (
        update engines e
           set status = 'stopped', stopped_at = now(), last_seen = now()
         where e.office_id = p_office_id and e.engine_id = p_engine_id
        returning e.*)
    select s.office_id, s.engine_id, s.status, s.started_at, s.last_seen, s.alive_until,
           s.stopped_at, semo_engine_alive(s.status, s.alive_until)
      from stopped s;
$$;

-- The office's engines, oldest start first, with whether each is alive now.
create function semo_list_engines(p_office_id text) returns setof semo_engine_state
language sql stable as $$
    select e.office_id, e.engine_id, e.status, e.started_at, e.last_seen, e.alive_until,
           e.stopped_at, semo_engine_alive(e.status, e.alive_until)
      from engines e
     where e.office_id = p_office_id
     order by e.started_at, e.engine_id;
$$;

-- Delete the rows of engines dead (stopped, or silent past alive_until) for p_dead_for seconds.
create function semo_forget_engines(p_office_id text, p_dead_for double precision)
returns integer
language sql volatile as $$
    with gone as (
        delete from engines e
         where e.office_id = p_office_id
           and not semo_engine_alive(e.status, e.alive_until)
           and (case when e.status = 'stopped' then e.stopped_at else e.alive_until end)
               < now() - make_interval(secs => p_dead_for)
        returning 1)
    select count(*)::integer from gone;
$$;

-- What a claim needs to know about a command's session: its status and end reason, its engine,
-- and that engine's heartbeat (NULLs when it has no row) and whether it is alive now.
create function semo_session_state(p_session_id text)
returns table (
    status text, end_reason text, engine_id text, engine_status text,
    engine_last_seen timestamptz, engine_stopped_at timestamptz, engine_alive boolean
)
language sql stable as $$
    select s.status, s.end_reason, s.engine_id, e.status, e.last_seen, e.stopped_at,
           coalesce(semo_engine_alive(e.status, e.alive_until), false)
      from agent_sessions s
      left join engines e on e.office_id = s.office_id and e.engine_id = s.engine_id
     where s.session_id = p_session_id;
$$;

-- -- claims: a live session of another engine is that engine's only while the engine is alive ---
--
-- As in 0002, plus: a session whose engine is not alive (its heartbeat ran out, it stopped, or
-- it has no row in engines) is nobody's, so any engine claims its commands (and fails them,
-- saying the engine stopped answering; see semo_session_state).

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
                            join engines e
                              on e.office_id = s.office_id and e.engine_id = s.engine_id
                           where s.session_id = p.session_id
                             and s.status <> 'terminated'
                             and s.engine_id <> p_engine_id
                             and semo_engine_alive(e.status, e.alive_until))
                order by p.created_at, p.seq
                limit 1
                  for update of p skip locked)
       and c.status = 'pending'
    returning c.*;
$$;

-- -- engines from before heartbeats ----------------------------------------------------------------
--
-- An engine that holds a live session, a claim or a running job now but has never beaten (it
-- ran an older semo) gets a row alive for an hour: one still running has that long to be
-- restarted with this semo, and one that had died is found an hour from now.

insert into engines (office_id, engine_id, status, started_at, last_seen, alive_until)
select legacy.office_id, legacy.engine_id, 'running', now(), now(), now() + interval '3600 seconds'
  from (select office_id, engine_id from agent_sessions
         where status <> 'terminated' and engine_id is not null
        union
        select office_id, engine_id from jobs where status = 'running' and engine_id is not null
        union
        select office_id, claimed_by from agent_commands
         where status = 'processing' and claimed_by is not null) legacy
 where legacy.engine_id <> ''
on conflict do nothing;
