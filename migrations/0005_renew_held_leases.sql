-- semo 0005: an engine renews the leases of the commands it knows it holds, not every row that
-- names it. A claim whose response was lost (the database committed it, the engine never heard)
-- then expires with its lease and is handled by recover_expired, instead of being renewed for
-- as long as the engine has anything else in flight.
--
-- Applied once by `semo migrate` after 0004, in one transaction. The SQLite backend does the
-- same in engine/store/sqlite.py (no schema change there).

create function semo_renew_command_leases(
    p_engine_id text, p_lease_seconds double precision, p_command_ids text[]
) returns integer
language sql volatile as $$
    with renewed as (
        update agent_commands
           set lease_expires_at = now() + make_interval(secs => p_lease_seconds)
         where status = 'processing' and claimed_by = p_engine_id and id = any(p_command_ids)
        returning 1)
    select count(*)::integer from renewed;
$$;
