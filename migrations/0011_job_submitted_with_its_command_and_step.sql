-- semo 0011: a job is created with its run_job command and its `created` step in one
-- transaction (semo_submit_job). They were three statements (`semo job create`, the REST API, the
-- console): a reader could see a pending job without its step, and a failure after the first
-- left a job no engine would ever run (the CLI then cancelled it, when it still could).
--
-- semo_submit_job(p_job, p_command_id, p_entry): inserts p_job (a JSON object of the jobs
-- columns), the run_job command p_command_id for it (its times from the database's clock, like
-- every command), and the timeline entry p_entry naming the command (semo_job_entry, 0010);
-- returns the command. Nothing for a null p_job (the store calls it so to check that the
-- function exists). A dashboard's semo_create_job (0007) does the same for members.
--
-- Idempotent (CREATE OR REPLACE). The SQLite backend does the same in one transaction
-- (engine/store/sqlite.py): nothing changes in its schema.

create or replace function semo_submit_job(p_job jsonb, p_command_id text, p_entry jsonb)
returns setof agent_commands
language plpgsql volatile as $$
declare
    v_job jobs;
    v_command agent_commands;
begin
    if p_job is null then
        return;
    end if;
    insert into jobs select * from jsonb_populate_record(null::jobs, p_job)
    returning * into v_job;
    insert into agent_commands (id, office_id, command_type, payload)
    values (p_command_id, v_job.office_id, 'run_job', jsonb_build_object('job_id', v_job.id))
    returning * into v_command;
    perform semo_job_entry(v_job, p_entry || jsonb_build_object('ref_id', p_command_id));
    return next v_command;
end;
$$;

select semo_lock_down();
