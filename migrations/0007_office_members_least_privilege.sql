-- semo 0007: office members (Supabase Auth users), least privilege, private Realtime.
--
-- - office_members(office_id, user_id, role): a Supabase Auth user (auth.users) is an
--   'operator' or a 'viewer' of an office. Who asks is auth.uid() (the JWT's sub), read by
--   semo_user_id(). The office_id claim of earlier migrations no longer grants anything.
-- - What a signed-in user (role authenticated) may do, by policy AND by privilege:
--     members (operators and viewers) read their offices' rows;
--     operators insert commands (pending, unclaimed), answer their offices' pending questions
--     (UPDATE status/answer), create jobs (semo_create_job) and cancel them (semo_cancel_job).
--   Nobody else sees anything. Engine work (claims, completion, results, heartbeats,
--   sessions, ending engines, deleting offices, every other semo_* function) is the service
--   role's alone (and the tables' owner's: the postgres backend's direct connection).
-- - anon: no privilege on any semo table or function (semo_migrations included, now with RLS).
-- - Realtime Authorization: members of an office may join its private channel `office:{id}`
--   (a policy on realtime.messages); nobody may send on it but the service role.
--
-- Applies to a plain Postgres too: the Supabase parts (roles anon/authenticated/service_role,
-- auth.users, auth.uid(), realtime.messages) are guarded. Idempotent: applying it again changes
-- nothing. Later migrations that create semo_* functions end with `select semo_lock_down();`
-- (Supabase's default privileges grant EXECUTE on new functions to anon and authenticated).

create table if not exists semo_migrations (
    name        text primary key,
    checksum    text not null,
    applied_at  timestamptz not null default now()
);
alter table semo_migrations enable row level security;

-- -- members -----------------------------------------------------------------------------------

create table if not exists office_members (
    office_id   text not null references offices (id) on delete cascade,
    user_id     uuid not null,
    role        text not null check (role in ('operator', 'viewer')),
    created_at  timestamptz not null default now(),
    primary key (office_id, user_id)
);
create index if not exists office_members_user_idx on office_members (user_id);
alter table office_members enable row level security;

do $$
begin
    if to_regclass('auth.users') is not null
       and not exists (select 1 from pg_constraint where conname = 'office_members_user_id_fkey')
    then
        alter table office_members add constraint office_members_user_id_fkey
            foreign key (user_id) references auth.users (id) on delete cascade;
    end if;
end;
$$;

-- Who asks: auth.uid() on Supabase; elsewhere the same reading of the JWT's sub. Null for
-- anon, the service role's key and a direct connection (no sub), and for a sub that is not a
-- uuid.
do $$
begin
    if to_regprocedure('auth.uid()') is not null then
        create or replace function semo_user_id() returns uuid
        language sql stable as 'select auth.uid()';
    else
        create or replace function semo_user_id() returns uuid
        language sql stable as $f$
            select case when s ~* '^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$' then s::uuid end
              from (select coalesce(
                        nullif(current_setting('request.jwt.claim.sub', true), ''),
                        nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub')
                        as s) as claim;
        $f$;
    end if;
end;
$$;

-- The asking user's role in the office, or null. SECURITY DEFINER: it reads office_members
-- past its RLS, for this user only.
create or replace function semo_member_role(p_office_id text) returns text
language sql stable security definer set search_path from current as $$
    select m.role from office_members m
     where m.office_id = p_office_id and m.user_id = semo_user_id();
$$;

-- The office of a Realtime topic `office:{id}`, or null.
create or replace function semo_topic_office(p_topic text) returns text
language sql immutable as $$
    select case when p_topic like 'office:%' then substr(p_topic, 8) end;
$$;

-- -- managing members (the service role: `semo office members`) -------------------------------

-- A user by id or by email (case-insensitive), as a uuid; PT404 when auth.users has no such
-- user (without Supabase Auth, an id is taken as it is and an email cannot be looked up).
create or replace function semo_find_user(p_user text) returns uuid
language plpgsql stable security definer set search_path from current as $$
declare
    v_id uuid;
    v_text text := btrim(coalesce(p_user, ''));
begin
    if v_text ~* '^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$' then
        v_id := v_text::uuid;
        if to_regclass('auth.users') is null then
            return v_id;
        end if;
        execute 'select id from auth.users where id = $1' into v_id using v_id;
    elsif to_regclass('auth.users') is null then
        raise exception 'no user %: emails are looked up in auth.users (Supabase Auth), '
                        'which this database does not have; give the user id', v_text
            using errcode = 'PT404';
    else
        execute 'select id from auth.users where lower(email) = lower($1)' into v_id
            using v_text;
    end if;
    if v_id is null then
        raise exception 'no user % in auth.users', v_text using errcode = 'PT404';
    end if;
    return v_id;
end;
$$;

-- The office's members, with their email when auth.users has it.
create or replace function semo_list_members(p_office_id text)
returns table (office_id text, user_id uuid, role text, email text, created_at timestamptz)
language plpgsql stable security definer set search_path from current as $$
#variable_conflict use_column
begin
    if to_regclass('auth.users') is not null then
        return query execute
            'select m.office_id, m.user_id, m.role, u.email::text, m.created_at'
            '  from office_members m left join auth.users u on u.id = m.user_id'
            ' where m.office_id = $1 order by m.created_at, m.user_id'
            using p_office_id;
    else
        return query
            select m.office_id, m.user_id, m.role, null::text, m.created_at
              from office_members m where m.office_id = p_office_id
             order by m.created_at, m.user_id;
    end if;
end;
$$;

-- Make p_user (id or email) a member of the office with p_role, or change their role.
create or replace function semo_add_member(p_office_id text, p_user text, p_role text)
returns table (office_id text, user_id uuid, role text, email text, created_at timestamptz)
language plpgsql volatile security definer set search_path from current as $$
#variable_conflict use_column
declare
    v_id uuid;
begin
    if p_role is null or p_role not in ('operator', 'viewer') then
        raise exception 'role must be operator or viewer, not %', coalesce(p_role, 'null')
            using errcode = '22023';
    end if;
    if not exists (select 1 from offices o where o.id = p_office_id) then
        raise exception 'office % not found', p_office_id using errcode = 'PT404';
    end if;
    v_id := semo_find_user(p_user);
    insert into office_members as m (office_id, user_id, role)
    values (p_office_id, v_id, p_role)
    on conflict on constraint office_members_pkey do update set role = excluded.role;
    return query select * from semo_list_members(p_office_id) l where l.user_id = v_id;
end;
$$;

-- Remove p_user (id or email) from the office; how many memberships went (0 or 1).
create or replace function semo_remove_member(p_office_id text, p_user text) returns integer
language plpgsql volatile security definer set search_path from current as $$
declare
    v_count integer;
begin
    delete from office_members m
     where m.office_id = p_office_id and m.user_id = semo_find_user(p_user);
    get diagnostics v_count = row_count;
    return v_count;
end;
$$;

-- -- what operators do through functions -------------------------------------------------------

-- A pending job for the office's agent of role p_role (exact, else case-insensitive) and the
-- run_job command that runs it, with its 'created' step: what `semo job run` does.
create or replace function semo_create_job(
    p_office_id text, p_role text, p_task text, p_context jsonb default null
) returns setof jobs
language plpgsql volatile security definer set search_path from current as $$
declare
    v_agent text;
    v_job jobs;
begin
    if semo_member_role(p_office_id) is distinct from 'operator' then
        raise exception 'only an operator of office % can create its jobs', p_office_id
            using errcode = '42501';
    end if;
    if p_task is null or length(btrim(p_task)) = 0 then
        raise exception 'the task is empty' using errcode = '22023';
    end if;
    select id into v_agent from agents
     where office_id = p_office_id and role = p_role order by created_at, id limit 1;
    if v_agent is null then
        select id into v_agent from agents
         where office_id = p_office_id and lower(role) = lower(p_role)
         order by created_at, id limit 1;
    end if;
    if v_agent is null then
        raise exception 'no agent with role % in office %', p_role, p_office_id
            using errcode = 'PT404';
    end if;
    insert into jobs (office_id, agent_id, task, context)
    values (p_office_id, v_agent, p_task, p_context)
    returning * into v_job;
    insert into agent_commands (office_id, command_type, payload)
    values (p_office_id, 'run_job', jsonb_build_object('job_id', v_job.id));
    insert into job_events (job_id, office_id, step, status, attempts, agent_id, detail)
    values (v_job.id, p_office_id, 'created', v_job.status, v_job.attempts, v_agent,
            left(p_task, 200));
    return next v_job;
end;
$$;

-- An operator cancels a job of their office: a pending one fails at once, a running one gets
-- cancel_reason (its engine ends it); a step on its timeline. Nothing when it has ended or is
-- being cancelled already (no row returned).
create or replace function semo_cancel_job(p_job_id text, p_reason text default null)
returns setof jobs
language plpgsql volatile security definer set search_path from current as $$
declare
    v_office text;
    v_reason text := coalesce(nullif(btrim(p_reason), ''), 'cancelled by an operator');
    v_job jobs;
begin
    select office_id into v_office from jobs where id = p_job_id;
    if v_office is null or semo_member_role(v_office) is distinct from 'operator' then
        raise exception 'only an operator of its office can cancel job %', p_job_id
            using errcode = '42501';
    end if;
    select * into v_job from semo_request_job_cancel(p_job_id, v_reason);
    if v_job.id is null then
        return;
    end if;
    insert into job_events (job_id, office_id, step, status, attempts, agent_id, detail)
    values (v_job.id, v_office,
            case when v_job.status = 'failed' then 'failed' else 'cancel_requested' end,
            v_job.status, v_job.attempts, v_job.agent_id,
            case when v_job.status = 'failed' then v_job.failure_reason else v_reason end);
    return next v_job;
end;
$$;

-- An answer written by UPDATE (a dashboard) gets its time.
create or replace function semo_stamp_answer() returns trigger
language plpgsql as $$
begin
    if new.status = 'answered' and old.status is distinct from 'answered'
       and new.answered_at is null then
        new.answered_at := now();
    end if;
    return new;
end;
$$;

drop trigger if exists semo_user_questions_stamp_answer on user_questions;
create trigger semo_user_questions_stamp_answer
    before update on user_questions
    for each row execute function semo_stamp_answer();

-- -- policies ----------------------------------------------------------------------------------
--
-- The office_id-claim policies of 0001/0003/0006 go; each table gets what members may do.

do $$
declare
    t text;
begin
    foreach t in array array['offices', 'agents', 'agent_sessions', 'agent_commands',
                             'agent_command_results', 'user_questions', 'agent_invocations',
                             'agent_results', 'jobs', 'engines', 'job_events', 'office_members']
    loop
        execute format('drop policy if exists semo_office_isolation on %I', t);
        execute format('drop policy if exists semo_members_read on %I', t);
    end loop;
    foreach t in array array['agents', 'agent_sessions', 'agent_commands', 'user_questions',
                             'agent_invocations', 'agent_results', 'jobs', 'engines',
                             'job_events']
    loop
        execute format('create policy semo_members_read on %I for select '
                       'using (semo_member_role(office_id) is not null)', t);
    end loop;
end;
$$;

create policy semo_members_read on offices for select
    using (semo_member_role(id) is not null);

create policy semo_members_read on agent_command_results for select
    using (exists (select 1 from agent_commands c
                    where c.id = command_id and semo_member_role(c.office_id) is not null));

-- a user sees their own memberships and the members of their offices
create policy semo_members_read on office_members for select
    using (user_id = semo_user_id() or semo_member_role(office_id) is not null);

drop policy if exists semo_operators_insert on agent_commands;
create policy semo_operators_insert on agent_commands for insert
    with check (semo_member_role(office_id) = 'operator'
                and status = 'pending' and claimed_by is null and lease_expires_at is null
                and attempts = 0);

drop policy if exists semo_operators_answer on user_questions;
create policy semo_operators_answer on user_questions for update
    using (semo_member_role(office_id) = 'operator' and status = 'pending')
    with check (semo_member_role(office_id) = 'operator' and status = 'answered'
                and answer is not null);

-- -- privileges --------------------------------------------------------------------------------

-- Every semo_* function: EXECUTE for the service role only (and the owner); then what the
-- policies and operators need. Call again after creating semo_* functions.
create or replace function semo_lock_down() returns void
language plpgsql volatile as $$
declare
    f regprocedure;
    r text;
    t text;
    semo_tables text[] := array['offices', 'agents', 'agent_sessions', 'agent_commands',
                                'agent_command_results', 'user_questions', 'agent_invocations',
                                'agent_results', 'jobs', 'engines', 'job_events',
                                'office_members', 'semo_migrations'];
begin
    for f in
        select p.oid::regprocedure from pg_proc p
         where p.pronamespace = current_schema()::regnamespace and p.proname like 'semo\_%'
    loop
        execute format('revoke execute on function %s from public', f);
        foreach r in array array['anon', 'authenticated'] loop
            if exists (select 1 from pg_roles where rolname = r) then
                execute format('revoke execute on function %s from %I', f, r);
            end if;
        end loop;
        if exists (select 1 from pg_roles where rolname = 'service_role') then
            execute format('grant execute on function %s to service_role', f);
        end if;
    end loop;
    foreach t in array semo_tables loop
        if to_regclass(t) is null then
            continue;
        end if;
        execute format('revoke all on table %I from public', t);
        foreach r in array array['anon', 'authenticated'] loop
            if exists (select 1 from pg_roles where rolname = r) then
                execute format('revoke all on table %I from %I', t, r);
            end if;
        end loop;
        if exists (select 1 from pg_roles where rolname = 'service_role') then
            execute format('grant all on table %I to service_role', t);
        end if;
    end loop;
    if exists (select 1 from pg_roles where rolname = 'authenticated') then
        foreach t in array semo_tables loop
            if t <> 'semo_migrations' and to_regclass(t) is not null then
                execute format('grant select on table %I to authenticated', t);
            end if;
        end loop;
        grant insert (id, office_id, session_id, command_type, payload)
            on agent_commands to authenticated;
        grant update (status, answer, answered_at) on user_questions to authenticated;
        grant execute on function semo_user_id() to authenticated;
        grant execute on function semo_member_role(text) to authenticated;
        grant execute on function semo_topic_office(text) to authenticated;
        grant execute on function semo_create_job(text, text, text, jsonb) to authenticated;
        grant execute on function semo_cancel_job(text, text) to authenticated;
    end if;
end;
$$;

select semo_lock_down();

-- -- Realtime Authorization --------------------------------------------------------------------
--
-- Private channels: a user may join `office:{id}` (receive its broadcasts and presence) when
-- they are a member of that office. No policy lets anyone but the service role send on it.

do $$
begin
    if to_regclass('realtime.messages') is not null then
        execute 'drop policy if exists semo_members_receive on realtime.messages';
        execute $p$
            create policy semo_members_receive on realtime.messages
                for select to authenticated
                using (semo_member_role(semo_topic_office(realtime.topic())) is not null)
        $p$;
    end if;
end;
$$;
