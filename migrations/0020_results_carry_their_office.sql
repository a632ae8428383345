-- agent_command_results carry their command's office (`office_id`, set by the database on
-- insert whatever the inserter sent), so that a Realtime binding on results can be filtered to
-- one office (`office_id=eq.{id}`): without it every result went to every engine's channel of
-- every office. Existing rows are filled in. Applied twice, it changes nothing.

alter table agent_command_results add column if not exists office_id text;

create or replace function semo_result_office() returns trigger
language plpgsql as $$
begin
    select c.office_id into new.office_id from agent_commands c where c.id = new.command_id;
    return new;
end;
$$;

drop trigger if exists semo_result_office on agent_command_results;
create trigger semo_result_office before insert or update of office_id, command_id
    on agent_command_results for each row execute function semo_result_office();

update agent_command_results r set office_id = c.office_id
  from agent_commands c
 where c.id = r.command_id and r.office_id is distinct from c.office_id;

create index if not exists agent_command_results_office_id on agent_command_results (office_id);

select semo_lock_down();
