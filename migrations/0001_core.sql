-- semo core schema for Postgres / Supabase.
--
-- Applied once by `semo migrate` (engine/store/migrate.py), inside one transaction, recorded in
-- semo_migrations. Plain Postgres (>= 13) accepts all of it: the Supabase-only parts (the
-- supabase_realtime publication, the request.jwt.claims setting) are guarded.
--
-- Ids are text (uuid strings by default) so every backend accepts the same ids as the pydantic
-- models. JSON fields are jsonb, times timestamptz. Command timestamps and leases use the
-- database clock, so engines on several machines agree on when a lease ran out.

-- -- tables ------------------------------------------------------------------------------------

create table offices (
    id              text primary key default gen_random_uuid()::text,
    name            text not null check (length(name) between 1 and 200),
    repository      text,
    workspace_root  text,
    created_at      timestamptz not null default now()
);

create table agents (
    id              text primary key default gen_random_uuid()::text,
    office_id       text not null references offices (id) on delete cascade,
    name            text not null check (length(name) between 1 and 100),
    role            text not null,
    prompt          text not null default '',
    scope_patterns  jsonb not null default '[]'::jsonb,
    core_skills     jsonb not null default '[]'::jsonb,
    command         jsonb not null default '["claude"]'::jsonb,
    created_at      timestamptz not null default now()
);

create table agent_sessions (
    session_id        text primary key default gen_random_uuid()::text,
    office_id         text not null references offices (id) on delete cascade,
    agent_id          text not null,
    worktree_id       text,
    status            text not null default 'creating' check (status in
                          ('creating', 'ready', 'executing', 'waiting_input', 'error', 'terminated')),
    engine_id         text,
    pid               integer,
    created_at        timestamptz not null default now(),
    last_activity_at  timestamptz not null default now(),
    ended_at          timestamptz,
    end_reason        text
);

create table agent_commands (
    id                text primary key default gen_random_uuid()::text,
    -- insertion order: breaks created_at ties so claims and listings are deterministic
    seq               bigint generated always as identity,
    office_id         text not null references offices (id) on delete cascade,
    session_id        text,
    command_type      text not null check (command_type in
                          ('create_session', 'send_prompt', 'send_text', 'send_keys',
                           'get_output', 'cancel', 'terminate', 'run_job')),
    payload           jsonb not null default '{}'::jsonb
                          check (jsonb_typeof(payload) = 'object'),
    status            text not null default 'pending'
                          check (status in ('pending', 'processing', 'completed', 'failed')),
    claimed_by        text,
    lease_expires_at  timestamptz,
    attempts          integer not null default 0,
    created_at        timestamptz not null default now(),
    updated_at        timestamptz not null default now()
);

create table agent_command_results (
    id          text primary key default gen_random_uuid()::text,
    -- exactly one result per command
    command_id  text not null unique references agent_commands (id) on delete cascade,
    success     boolean not null,
    result      jsonb,
    error       text,
    created_at  timestamptz not null default now()
);

create table user_questions (
    id             text primary key default gen_random_uuid()::text,
    office_id      text not null references offices (id) on delete cascade,
    agent_id       text not null,
    session_id     text,
    question_type  text not null default 'text'
                       check (question_type in ('text', 'choice', 'confirm')),
    question       text not null check (length(question) > 0),
    options        jsonb not null default '[]'::jsonb,
    status         text not null default 'pending'
                       check (status in ('pending', 'answered', 'cancelled')),
    answer         text,
    created_at     timestamptz not null default now(),
    answered_at    timestamptz
);

create table agent_invocations (
    id                 text primary key default gen_random_uuid()::text,
    office_id          text not null references offices (id) on delete cascade,
    caller_agent_id    text not null,
    caller_session_id  text,
    target_agent_id    text not null,
    task               text not null,
    context            jsonb,
    status             text not null default 'pending'
                           check (status in ('pending', 'running', 'delivered', 'failed')),
    error              text,
    created_at         timestamptz not null default now(),
    updated_at         timestamptz not null default now()
);

create table agent_results (
    id                  text primary key default gen_random_uuid()::text,
    office_id           text not null references offices (id) on delete cascade,
    invocation_id       text,
    sender_agent_id     text not null,
    recipient_agent_id  text not null,
    summary             text not null default '',
    payload             jsonb,
    status              text not null default 'pending' check (status in ('pending', 'delivered')),
    created_at          timestamptz not null default now(),
    delivered_at        timestamptz
);

create table jobs (
    id              text primary key default gen_random_uuid()::text,
    office_id       text not null references offices (id) on delete cascade,
    agent_id        text not null,
    task            text not null,
    context         jsonb,
    status          text not null default 'pending'
                        check (status in ('pending', 'running', 'done', 'failed')),
    session_id      text,
    attempts        integer not null default 0,
    failure_reason  text,
    needs_human     boolean not null default false,
    created_at      timestamptz not null default now(),
    updated_at      timestamptz not null default now()
);

-- -- indexes -----------------------------------------------------------------------------------

create index agents_office_id_idx on agents (office_id);
create index agent_sessions_office_id_idx on agent_sessions (office_id, status);
create index agent_commands_office_id_idx on agent_commands (office_id, created_at desc);
create index agent_commands_status_idx on agent_commands (status);
-- claims: the oldest pending command of an office
create index agent_commands_claim_idx on agent_commands (office_id, status, created_at, seq);
-- lease renewal and recovery
create index agent_commands_leases_idx on agent_commands (claimed_by, lease_expires_at)
    where status = 'processing';
-- (agent_command_results.command_id is indexed by its unique constraint)
create index user_questions_office_id_idx on user_questions (office_id, status, created_at);
create index agent_invocations_office_id_idx on agent_invocations (office_id, created_at);
create index agent_invocations_status_idx on agent_invocations (status);
create index agent_results_office_id_idx on agent_results (office_id, status, created_at);
create index agent_results_invocation_id_idx on agent_results (invocation_id);
create index jobs_office_id_idx on jobs (office_id, status, created_at);

-- -- command functions (also called through PostgREST RPC by the supabase backend) -------------
--
-- Errors carry SQLSTATE PT404 / PT409: PostgREST answers those with HTTP 404 / 409, and the
-- postgres backend turns them into NotFound / StoreConflict.

-- The oldest pending command of the office, now 'processing' and leased to p_engine_id.
-- SKIP LOCKED: engines claiming at once each get a different row, nobody waits.
create function semo_claim_command(
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
                order by p.created_at, p.seq
                limit 1
                  for update skip locked)
       and c.status = 'pending'
    returning c.*;
$$;

-- Extend every lease p_engine_id holds; returns how many.
create function semo_renew_leases(p_engine_id text, p_lease_seconds double precision)
returns integer
language sql volatile as $$
    with renewed as (
        update agent_commands
           set lease_expires_at = now() + make_interval(secs => p_lease_seconds)
         where status = 'processing' and claimed_by = p_engine_id
        returning 1)
    select count(*)::integer from renewed;
$$;

-- Finish a command the engine holds: one result row, command completed / failed.
create function semo_complete_command(
    p_command_id text, p_engine_id text, p_success boolean, p_result jsonb, p_error text
) returns setof agent_command_results
language plpgsql volatile as $$
declare
    c agent_commands;
begin
    select * into c from agent_commands where id = p_command_id for update;
    if not found then
        raise exception 'command % not found', p_command_id using errcode = 'PT404';
    end if;
    if c.status in ('completed', 'failed') then
        raise exception 'command % is already %', p_command_id, c.status using errcode = 'PT409';
    end if;
    if c.status <> 'processing' or c.claimed_by is distinct from p_engine_id then
        raise exception 'engine % does not hold command % (it is %, claimed by %)',
            p_engine_id, p_command_id, c.status, coalesce(c.claimed_by, 'nobody')
            using errcode = 'PT409';
    end if;
    update agent_commands
       set status = case when p_success then 'completed' else 'failed' end,
           lease_expires_at = null,
           updated_at = now()
     where id = p_command_id;
    return query
        insert into agent_command_results (command_id, success, result, error)
        values (p_command_id, p_success, p_result, p_error)
        returning *;
end;
$$;

-- Claims whose lease ran out (their engine died or hung): commands of a type in p_safe_types go
-- back to pending (until they have been tried p_max_attempts times); the others are failed with
-- a reason and a result row. Returns the commands in their new state. SKIP LOCKED: two engines
-- recovering at once handle each command once.
create function semo_recover_expired(p_safe_types text[], p_max_attempts integer default 5)
returns setof agent_commands
language plpgsql volatile as $$
declare
    c agent_commands;
    reason text;
begin
    for c in
        select * from agent_commands
         where status = 'processing' and lease_expires_at < now()
         order by created_at, seq
           for update skip locked
    loop
        if c.command_type = any (p_safe_types) and c.attempts < p_max_attempts then
            return query
                update agent_commands
                   set status = 'pending', claimed_by = null, lease_expires_at = null,
                       updated_at = now()
                 where id = c.id
                returning *;
        else
            if c.command_type = any (p_safe_types) then
                reason := format('engine %s stopped renewing its lease on this %s command '
                                 '(expired %s); given up after %s attempts',
                                 c.claimed_by, c.command_type, c.lease_expires_at, c.attempts);
            else
                reason := format('engine %s stopped renewing its lease on this %s command '
                                 '(expired %s); %s is not safe to repeat, so it was not run again',
                                 c.claimed_by, c.command_type, c.lease_expires_at,
                                 c.command_type);
            end if;
            insert into agent_command_results (command_id, success, result, error)
            values (c.id, false, null, reason)
            on conflict (command_id) do nothing;
            return query
                update agent_commands
                   set status = 'failed', lease_expires_at = null, updated_at = now()
                 where id = c.id
                returning *;
        end if;
    end loop;
end;
$$;

-- -- wake-ups: LISTEN semo_changes ---------------------------------------------------------------
--
-- One channel for every office; the payload is JSON {"office_id", "table", "op", "id"}.
-- Sent on a new command, a command back to pending, a new result and a question update.

create function semo_notify_change() returns trigger
language plpgsql as $$
declare
    office text;
    row_id text;
begin
    if tg_table_name = 'agent_command_results' then
        select office_id into office from agent_commands where id = new.command_id;
        row_id := new.command_id;
    else
        office := new.office_id;
        row_id := new.id;
    end if;
    perform pg_notify('semo_changes', json_build_object(
        'office_id', office, 'table', tg_table_name, 'op', lower(tg_op), 'id', row_id)::text);
    return null;
end;
$$;

create trigger semo_agent_commands_insert_notify
    after insert on agent_commands
    for each row execute function semo_notify_change();

create trigger semo_agent_commands_requeue_notify
    after update of status on agent_commands
    for each row when (new.status = 'pending' and old.status is distinct from 'pending')
    execute function semo_notify_change();

create trigger semo_agent_command_results_insert_notify
    after insert on agent_command_results
    for each row execute function semo_notify_change();

create trigger semo_user_questions_update_notify
    after update on user_questions
    for each row when (old.status is distinct from new.status
                       or old.answer is distinct from new.answer)
    execute function semo_notify_change();

-- -- Supabase Realtime -----------------------------------------------------------------------------

-- postgres_changes sends old rows only with replica identity full
alter table agent_commands replica identity full;
alter table user_questions replica identity full;

do $$
declare
    t text;
begin
    if exists (select 1 from pg_publication where pubname = 'supabase_realtime' and not puballtables)
    then
        foreach t in array array['agent_commands', 'agent_command_results', 'user_questions',
                                 'agent_sessions']
        loop
            if not exists (select 1 from pg_publication_tables
                            where pubname = 'supabase_realtime'
                              and schemaname = current_schema() and tablename = t) then
                execute format('alter publication supabase_realtime add table %I', t);
            end if;
        end loop;
    end if;
end;
$$;

-- -- row-level security: an office sees only its rows ----------------------------------------------
--
-- The office comes from the JWT claim office_id (PostgREST sets request.jwt.claims). The table
-- owner (postgres, the engine's direct connection) and Supabase's service_role bypass RLS.

create function semo_claims_office_id() returns text
language sql stable as $$
    select nullif(current_setting('request.jwt.claims', true), '')::json ->> 'office_id';
$$;

alter table offices enable row level security;
create policy semo_office_isolation on offices
    using (id = semo_claims_office_id()) with check (id = semo_claims_office_id());

do $$
declare
    t text;
begin
    foreach t in array array['agents', 'agent_sessions', 'agent_commands', 'user_questions',
                             'agent_invocations', 'agent_results', 'jobs']
    loop
        execute format('alter table %I enable row level security', t);
        execute format('create policy semo_office_isolation on %I '
                       'using (office_id = semo_claims_office_id()) '
                       'with check (office_id = semo_claims_office_id())', t);
    end loop;
end;
$$;

alter table agent_command_results enable row level security;
create policy semo_office_isolation on agent_command_results
    using (exists (select 1 from agent_commands c
                    where c.id = command_id and c.office_id = semo_claims_office_id()))
    with check (exists (select 1 from agent_commands c
                         where c.id = command_id and c.office_id = semo_claims_office_id()));
