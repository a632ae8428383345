"""What migrations/ set up on a Supabase project: semo's tables, policies, privileges."""

from __future__ import annotations

#: every table of semo (as `semo_lock_down` lists them)
SEMO_TABLES = (
    "offices",
    "agents",
    "agent_sessions",
    "agent_commands",
    "agent_command_results",
    "user_questions",
    "agent_invocations",
    "agent_results",
    "jobs",
    "engines",
    "job_events",
    "office_members",
    "semo_migrations",
)
#: the tables whose changes Realtime sends (a missing one fails every channel binding it)
PUBLISHED = ("agent_commands", "agent_command_results", "user_questions", "agent_sessions")
#: tables whose UPDATE/DELETE events carry the old row (replica identity full)
FULL_IDENTITY = ("agent_commands", "user_questions")
#: the policies each table has (migration 0007); no other policy should widen them
POLICIES: dict[str, frozenset[str]] = {
    table: frozenset({"semo_members_read"}) for table in SEMO_TABLES if table != "semo_migrations"
} | {
    "agent_commands": frozenset({"semo_members_read", "semo_operators_insert"}),
    "user_questions": frozenset({"semo_members_read", "semo_operators_answer"}),
    "semo_migrations": frozenset(),
}
#: the policy on realtime.messages that admits members to their office's private channel
CHANNEL_POLICY = "semo_members_receive"
#: table privileges signed-in users hold (column grants for operators come on top)
AUTHENTICATED_TABLE = frozenset({"SELECT"})
#: the semo functions signed-in users may execute; every other one is the service role's
AUTHENTICATED_FUNCTIONS = frozenset(
    {"semo_user_id", "semo_member_role", "semo_topic_office", "semo_create_job", "semo_cancel_job"}
)
#: Supabase's roles
ROLES = ("anon", "authenticated", "service_role")
