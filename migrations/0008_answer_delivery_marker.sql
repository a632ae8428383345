-- semo 0008: an answer's delivery is recorded, so the engine reads only undelivered answers.
--
-- - user_questions.answer_delivered_at: when the engine's agent confirmed it took the answer
--   (set by the engine, the service role, through the store's mark_answer_delivered). Null for
--   an answer not typed yet. The router's sweep reads only answered questions with it null
--   (a partial index), instead of every answered question of its sessions each pass; an engine
--   that restarts does not type an answer twice, and still types one it had not delivered.
-- - Members may not set it: the column is not in the UPDATE privilege 0007 grants to
--   authenticated (status, answer, answered_at), and the operators' policy admits only
--   pending -> answered.
--
-- Idempotent (IF NOT EXISTS everywhere); applies to a plain Postgres and to a Supabase-shaped
-- database. The SQLite backend has the same change as schema version 6 (engine/store/sqlite.py).

alter table user_questions add column if not exists answer_delivered_at timestamptz;

create index if not exists user_questions_undelivered_idx
    on user_questions (office_id, created_at)
    where status = 'answered' and answer_delivered_at is null;

select semo_lock_down();
