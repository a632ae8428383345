-- semo 0016: a `ship_job` command ships a job's work (engine/ship/command.py, docs/JOBS.md).
--
-- - agent_commands.command_type may be 'ship_job': payload {"job_id", "push", "pr", "merge"}
--   (at least one step; the engine validates it with ShipJobPayload and answers a bad one with
--   a failed result saying what is wrong). Like every command, only an office's operators may
--   insert it (the 0007 policy semo_operators_insert); viewers cannot.
--
-- Idempotent; applies to a plain Postgres and to a Supabase-shaped database. The SQLite backend
-- has the same change as schema version 10 (engine/store/sqlite.py).

alter table agent_commands drop constraint if exists agent_commands_command_type_check;
alter table agent_commands add constraint agent_commands_command_type_check
    check (command_type in ('create_session', 'send_prompt', 'send_text', 'send_keys',
                            'get_output', 'cancel', 'terminate', 'run_job', 'ship_job'));

select semo_lock_down();
