-- The private-channel policy `semo_members_receive` on realtime.messages (see 0007) once that
-- table exists. On a hosted project the Realtime service creates realtime.messages itself, which
-- can be after `semo migrate` first ran; 0007 then skipped the policy for good. Now
-- semo_ensure_channel_policy() creates it when the table is there and it is missing, and says
-- why not otherwise; `semo migrate` calls it on every run (so it is created at the first run
-- after the table appears) and prints what it answers when that is not 'present'/'created'.
-- `semo supabase doctor` reports the policy missing.

create or replace function semo_ensure_channel_policy() returns text
language plpgsql volatile as $$
begin
    if to_regclass('realtime.messages') is null then
        return 'missing: realtime.messages does not exist yet (Realtime creates it when it'
            || ' starts); run `semo migrate` again once it does, or members cannot join'
            || ' their office''s private channel';
    end if;
    if exists (select 1 from pg_policy
                where polrelid = 'realtime.messages'::regclass
                  and polname = 'semo_members_receive') then
        return 'present';
    end if;
    begin
        execute $p$
            create policy semo_members_receive on realtime.messages
                for select to authenticated
                using (semo_member_role(semo_topic_office(realtime.topic())) is not null)
        $p$;
    exception when insufficient_privilege then
        return 'refused: ' || sqlerrm || ' (create the policy as the owner of'
            || ' realtime.messages: see migrations/0019)';
    end;
    return 'created';
end;
$$;

do $$
declare
    v_status text := semo_ensure_channel_policy();
begin
    if v_status not in ('present', 'created') then
        raise warning 'semo: no private-channel policy: %', v_status;
    end if;
end;
$$;

select semo_lock_down();
