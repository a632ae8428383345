-- semo 0012: one office per name and one agent per (office, role), whatever starts at once.
--
-- Engines started together used to check, then insert: two engines could each find no office
-- named N and each create one (the office split), or each add an agent row for one role. This
-- migration first merges what an older semo may have made that way, losing nothing, then adds
-- the unique indexes the store's upserts rely on (`offices (name)`, `agents (office_id, role)`):
--
-- - Offices of one name: the oldest (created_at, then id) is kept. Every row of the others, in
--   every table with an `office_id` column (agents, sessions, commands, questions, invocations,
--   results, jobs, the jobs' timeline, engines, members, and any table a later migration adds),
--   is re-pointed to it. A row whose key would then clash with the kept office's own (an engine
--   id or a member listed in both) is dropped: the kept office's row says the same thing (a
--   heartbeat, a membership). Then the duplicate offices are deleted (nothing refers to them).
-- - Agents of one (office, role): the oldest is kept; every column naming an agent
--   (`agent_id`, `*_agent_id`) and the `agent_id` of command payloads are re-pointed to it, so
--   jobs, questions, sessions, invocations and results keep their agent; then the duplicates
--   are deleted.
--
-- The tables are locked for the merge (in this migration's transaction) so that no engine of
-- an older semo inserts a duplicate between the merge and the index.

lock table offices, agents in share row exclusive mode;

create temporary table semo_office_merge on commit drop as
select o.id as old_id,
       (select k.id from offices k where k.name = o.name order by k.created_at, k.id limit 1)
           as keep_id
  from offices o;
delete from semo_office_merge where old_id = keep_id;

do $$
declare
    t record;
    v_pk text[];
    v_other text;
begin
    if not exists (select 1 from semo_office_merge) then
        return;
    end if;
    for t in
        select c.table_name
          from information_schema.columns c
          join information_schema.tables tb
            on tb.table_schema = c.table_schema and tb.table_name = c.table_name
         where c.table_schema = current_schema() and c.column_name = 'office_id'
           and tb.table_type = 'BASE TABLE'
    loop
        -- the table's primary key beyond office_id: a re-pointed row must not clash with it
        select array_agg(a.attname::text order by a.attname) into v_pk
          from pg_index i
          join pg_attribute a on a.attrelid = i.indrelid and a.attnum = any (i.indkey)
         where i.indrelid = format('%I', t.table_name)::regclass and i.indisprimary;
        if v_pk is not null and 'office_id' = any (v_pk) and array_length(v_pk, 1) > 1 then
            select string_agg(format('k.%1$I = d.%1$I', x), ' and ') into v_other
              from unnest(v_pk) as x where x <> 'office_id';
            execute format(
                'delete from %1$I d using semo_office_merge m, %1$I k'
                ' where d.office_id = m.old_id and k.office_id = m.keep_id and %2$s',
                t.table_name, v_other);
        end if;
        execute format(
            'update %I set office_id = m.keep_id from semo_office_merge m'
            ' where office_id = m.old_id', t.table_name);
    end loop;
    delete from offices where id in (select old_id from semo_office_merge);
end;
$$;

create temporary table semo_agent_merge on commit drop as
select a.id as old_id,
       (select k.id from agents k where k.office_id = a.office_id and k.role = a.role
         order by k.created_at, k.id limit 1) as keep_id
  from agents a;
delete from semo_agent_merge where old_id = keep_id;

do $$
declare
    t record;
begin
    if not exists (select 1 from semo_agent_merge) then
        return;
    end if;
    for t in
        select c.table_name, c.column_name
          from information_schema.columns c
          join information_schema.tables tb
            on tb.table_schema = c.table_schema and tb.table_name = c.table_name
         where c.table_schema = current_schema() and tb.table_type = 'BASE TABLE'
           and (c.column_name = 'agent_id' or c.column_name like '%\_agent\_id')
           and c.data_type = 'text'
    loop
        execute format(
            'update %1$I set %2$I = m.keep_id from semo_agent_merge m where %2$I = m.old_id',
            t.table_name, t.column_name);
    end loop;
    update agent_commands c set payload = jsonb_set(c.payload, '{agent_id}', to_jsonb(m.keep_id))
      from semo_agent_merge m where c.payload ->> 'agent_id' = m.old_id;
    delete from agents where id in (select old_id from semo_agent_merge);
end;
$$;

create unique index if not exists offices_name_key on offices (name);
create unique index if not exists agents_office_role_key on agents (office_id, role);

-- -- wake-ups without LISTEN -------------------------------------------------------------------
--
-- Behind a transaction-mode pooler (PgBouncer, Supabase's port 6543) a session cannot LISTEN:
-- an engine configured so (`[store] pooler = "transaction"`) polls `semo_change_seq` instead,
-- a sequence every change that notifies also advances (sequences take no row lock: writers never
-- wait on each other). The trigger function runs as its owner so that members' inserts (RLS)
-- may advance it too.

create sequence if not exists semo_change_seq;

create or replace function semo_notify_change() returns trigger
language plpgsql security definer set search_path from current as $$
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
    perform nextval('semo_change_seq');
    perform pg_notify('semo_changes', json_build_object(
        'office_id', office, 'table', tg_table_name, 'op', lower(tg_op), 'id', row_id)::text);
    return null;
end;
$$;

select semo_lock_down();
