-- `semo supabase doctor` (engine/doctor/): what a project's catalog says about semo, read by the
-- service role over RPC (PostgREST exposes no catalog), and a row source for measuring the
-- project's "Max rows" setting. Both read only; EXECUTE for the service role alone.
--
-- semo_doctor_facts(): one JSON object: the roles present, the supabase_realtime publication's
-- tables, every table of the schema (row-level security, replica identity, policy names, the
-- privileges PUBLIC/anon/authenticated hold), every semo_* function (who may execute it), the
-- policies on realtime.messages, and the default privileges that would open future objects.
-- semo_rows(n): n rows (at most 100,000); PostgREST cuts the answer at "Max rows".

create or replace function semo_rows(p_count integer) returns table (n integer)
language sql stable as $$
    select generate_series(1, least(greatest(coalesce(p_count, 0), 0), 100000))
$$;

create or replace function semo_doctor_facts() returns jsonb
language sql stable as $$
with watched(grantee) as (values ('public'), ('anon'), ('authenticated')),
tabs as (
    select c.oid, c.relname, c.relrowsecurity, c.relreplident, c.relowner, c.relacl
      from pg_class c
     where c.relnamespace = current_schema()::regnamespace and c.relkind in ('r', 'p')
),
funcs as (
    select p.oid, p.oid::regprocedure::text as name, p.proowner, p.proacl
      from pg_proc p
     where p.pronamespace = current_schema()::regnamespace and p.proname like 'semo\_%'
)
select jsonb_build_object(
    'schema', current_schema(),
    'roles', (select coalesce(jsonb_agg(rolname::text order by rolname), '[]'::jsonb)
                from pg_roles where rolname in ('anon', 'authenticated', 'service_role')),
    'publication', (
        select jsonb_build_object(
            'all_tables', p.puballtables,
            'tables', (select coalesce(jsonb_agg(pt.tablename::text order by pt.tablename),
                                       '[]'::jsonb)
                         from pg_publication_tables pt
                        where pt.pubname = p.pubname and pt.schemaname = current_schema()))
          from pg_publication p where p.pubname = 'supabase_realtime'),
    'tables', (
        select coalesce(jsonb_object_agg(t.relname, jsonb_build_object(
            'rls', t.relrowsecurity,
            'replica_identity', t.relreplident::text,
            'policies', (select coalesce(jsonb_agg(pol.polname::text order by pol.polname),
                                         '[]'::jsonb)
                           from pg_policy pol where pol.polrelid = t.oid),
            'grants', (
                select coalesce(jsonb_object_agg(g.grantee, g.privileges), '{}'::jsonb)
                  from (select case when a.grantee = 0 then 'public'
                                    else pg_get_userbyid(a.grantee)::text end as grantee,
                               jsonb_agg(distinct a.privilege_type) as privileges
                          from aclexplode(coalesce(t.relacl, acldefault('r', t.relowner))) a
                         group by 1) g
                 where g.grantee in (select grantee from watched)))), '{}'::jsonb)
          from tabs t),
    'functions', (
        select coalesce(jsonb_object_agg(f.name, (
            select coalesce(jsonb_agg(distinct case when a.grantee = 0 then 'public'
                                                    else pg_get_userbyid(a.grantee)::text end),
                            '[]'::jsonb)
              from aclexplode(coalesce(f.proacl, acldefault('f', f.proowner))) a
             where a.privilege_type = 'EXECUTE'
               and (a.grantee = 0 or pg_get_userbyid(a.grantee) in ('anon', 'authenticated'))
        )), '{}'::jsonb)
          from funcs f),
    'realtime_messages', (
        select case when to_regclass('realtime.messages') is null then null else (
            select coalesce(jsonb_agg(jsonb_build_object(
                       'name', pol.polname::text,
                       'command', pol.polcmd::text,
                       'roles', (select coalesce(jsonb_agg(case when r = 0 then 'public'
                                                   else pg_get_userbyid(r)::text end),
                                                 '[]'::jsonb)
                                   from unnest(pol.polroles) r),
                       'using', pg_get_expr(pol.polqual, pol.polrelid))
                       order by pol.polname), '[]'::jsonb)
              from pg_policy pol where pol.polrelid = to_regclass('realtime.messages'))
        end),
    'default_privileges', (
        select coalesce(jsonb_agg(jsonb_build_object(
                   'owner', pg_get_userbyid(d.defaclrole)::text,
                   'schema', case when d.defaclnamespace = 0 then null
                                  else d.defaclnamespace::regnamespace::text end,
                   'objects', d.defaclobjtype::text,
                   'grantee', case when a.grantee = 0 then 'public'
                                   else pg_get_userbyid(a.grantee)::text end,
                   'privilege', a.privilege_type)), '[]'::jsonb)
          from pg_default_acl d, aclexplode(d.defaclacl) a
         where d.defaclnamespace in (0, current_schema()::regnamespace)
           and (a.grantee = 0 or pg_get_userbyid(a.grantee) in ('anon', 'authenticated')))
)
$$;

select semo_lock_down();
