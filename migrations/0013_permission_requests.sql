-- semo 0013: an agent's permission request is an inbox item (engine/approval_policy.py).
--
-- - user_questions.question_type may be 'permission': an agent's Claude Code asks to use a tool
--   (its PermissionRequest hook waits in the engine). question is a bounded, inert summary
--   (tool, command or file, size of the change); options are the three answers.
-- - The answer of a permission is one of 'allow', 'allow for this session', 'deny' or
--   'deny: <reason>' (the reason goes back to the agent). Operators answer it as any question
--   (the 0007 policy: pending -> answered); the check below refuses any other text, so a row
--   update from a web app cannot store an answer the engine would have to guess at.
--
-- Idempotent; applies to a plain Postgres and to a Supabase-shaped database. The SQLite backend
-- has the same changes as schema version 8 (engine/store/sqlite.py).

alter table user_questions drop constraint if exists user_questions_question_type_check;
alter table user_questions add constraint user_questions_question_type_check
    check (question_type in ('text', 'choice', 'confirm', 'permission'));

alter table user_questions drop constraint if exists user_questions_permission_answer_check;
alter table user_questions add constraint user_questions_permission_answer_check
    check (question_type <> 'permission' or answer is null
           or answer in ('allow', 'allow for this session', 'deny')
           or (substr(answer, 1, 6) = 'deny: ' and length(answer) > 6));

select semo_lock_down();
