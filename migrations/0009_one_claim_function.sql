-- semo 0009: one claim body. semo_claim_next (0004) and semo_claim_next_except (0008) held the
-- same 45-line claim, the second only skipping command types; two copies of a rule drift apart.
--
-- - semo_claim_next_except (0008) is the claim: it is left as it is.
-- - semo_claim_next takes the types to skip too (p_skip_types, none by default) and is a thin
--   wrapper over it. Calls with three arguments (an engine of semo 0008 or older still running
--   during the upgrade, the JS clients) reach the same function; the stores call
--   semo_claim_next with the types to skip.
--
-- Applied once by `semo migrate` after 0008, in one transaction: a claim running meanwhile
-- finishes first (the drop waits for it), the next one finds the wrapper. Idempotent (IF EXISTS,
-- CREATE OR REPLACE), like the migrations before it. The SQLite backend claims in one
-- transaction of its own (engine/store/sqlite.py): nothing changes there.

drop function if exists semo_claim_next(text, text, double precision);

create or replace function semo_claim_next(
    p_office_id text, p_engine_id text, p_lease_seconds double precision,
    p_skip_types text[] default '{}'
) returns setof agent_commands
language sql volatile as $$
    select * from semo_claim_next_except(p_office_id, p_engine_id, p_lease_seconds, p_skip_types);
$$;

select semo_lock_down();
