"""The migrations on a PostgreSQL that has nothing of Supabase: a throwaway cluster (initdb and
pg_ctl from the installed server binaries, on its own socket, trust auth) whose pg_roles has no
anon, authenticated or service_role and which has no auth or realtime schema.

Roles are cluster-wide and the suite's main cluster has Supabase's (the emulator creates them),
so only a cluster of its own shows that 0007's guards hold where those roles do not exist.
Checked there: every migration applies; `semo migrate` again does nothing, and 0007's SQL run
twice more by hand fails nowhere and changes no policy, privilege or RLS flag; an office's rows
stay private to a plain role (PUBLIC has no privilege on any semo table or function); and an
upgrade from 0006 with rows in every table keeps them.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import psycopg.errors
import pytest
from psycopg import sql

from semo.engine.store.migrate import migrate, migration_files

SUPABASE_ROLES = ("anon", "authenticated", "service_role")


def _server_bin() -> Path:
    """The newest installed server's bin folder (postgresql-NN, which scripts/test installs)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    if initdb is None:
        pytest.fail("no initdb: the PostgreSQL server binaries are missing (scripts/test)")
    return Path(initdb).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server_user(argv: list[str]) -> list[str]:
    """initdb and postgres refuse to run as root: run them as the postgres user then."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return argv


def _run(argv: list[str]) -> None:
    done = subprocess.run(_as_server_user(argv), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr or done.stdout}")


@pytest.fixture(scope="module")
def plain_cluster() -> Iterator[str]:
    """A DSN for the `postgres` database of a fresh cluster of its own; stopped afterwards."""
    bindir = _server_bin()
    # not under pytest's temp folder: as root that is private to root, and the server runs
    # as the postgres user
    root = Path(tempfile.mkdtemp(prefix="semo_plain_cluster_"))
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sockets, "postgres")
    port = _free_port()
    _run([str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-N"])
    options = f"-c listen_addresses='' -k {sockets} -p {port} -c fsync=off"
    log = str(root / "log")
    _run([str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-w", "-l", log, "start"])
    try:
        yield f"host={sockets} port={port} user=postgres dbname=postgres"
    finally:
        subprocess.run(
            _as_server_user([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
            check=False,
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)


def _new_database(admin_dsn: str) -> str:
    name = f"semo_plain_{uuid.uuid4().hex}"
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    return psycopg.conninfo.make_conninfo(admin_dsn, dbname=name)


def _scalar(dsn: str, query: str, params: object = None) -> object:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(query, params).fetchone()  # type: ignore[arg-type]
        assert row is not None
        return row[0]


def test_the_cluster_has_nothing_of_supabase(plain_cluster: str) -> None:
    roles = _scalar(
        plain_cluster,
        "select count(*) from pg_roles where rolname = any(%s)",
        (list(SUPABASE_ROLES),),
    )
    assert roles == 0
    dsn = _new_database(plain_cluster)
    schemas = _scalar(
        dsn, "select count(*) from pg_namespace where nspname in ('auth', 'realtime')"
    )
    assert schemas == 0
    assert _scalar(dsn, "select count(*) from pg_publication") == 0


def test_every_migration_applies_and_applies_again(plain_cluster: str) -> None:
    dsn = _new_database(plain_cluster)
    files = migration_files()
    assert any(p.name.startswith("0007") for p in files)
    applied = asyncio.run(migrate(dsn))
    assert applied == [p.name for p in files]
    assert asyncio.run(migrate(dsn)) == []  # recorded: nothing to do

    def snapshot() -> tuple[object, ...]:
        return (
            _scalar(
                dsn,
                "select string_agg(tablename || ':' || policyname || ':' || cmd || ':'"
                " || coalesce(qual, '') || ':' || coalesce(with_check, ''), '|'"
                " order by tablename, policyname) from pg_policies",
            ),
            _scalar(
                dsn,
                "select string_agg(p.oid::regprocedure::text || ':'"
                " || coalesce(p.proacl::text, ''), '|' order by p.oid::regprocedure::text)"
                " from pg_proc p"
                " where p.pronamespace = 'public'::regnamespace",
            ),
            _scalar(
                dsn,
                "select string_agg(c.relname || ':' || c.relrowsecurity || ':'"
                " || coalesce(c.relacl::text, ''), '|' order by c.relname) from pg_class c"
                " where c.relnamespace = 'public'::regnamespace and c.relkind = 'r'",
            ),
        )

    before = snapshot()
    # 0007 on say they may be run again by hand (0001-0006 are not: semo_migrations records
    # them); run twice more, they change nothing
    with psycopg.connect(dsn, autocommit=True) as conn:
        for path in [p for p in files if p.name >= "0007"] * 2:
            try:
                conn.execute(path.read_bytes())
            except psycopg.Error as error:
                pytest.fail(f"{path.name} applied a second time failed: {error}")
    assert snapshot() == before
    # still no Supabase role, and 0007 created none
    assert (
        _scalar(
            dsn,
            "select count(*) from pg_roles where rolname = any(%s)",
            (list(SUPABASE_ROLES),),
        )
        == 0
    )
    # every table has RLS, semo_migrations and office_members included; no FK to auth.users
    assert (
        _scalar(
            dsn,
            "select count(*) from pg_class where relnamespace = 'public'::regnamespace"
            " and relkind = 'r' and not relrowsecurity",
        )
        == 0
    )
    assert (
        _scalar(
            dsn,
            "select count(*) from pg_constraint where conname = 'office_members_user_id_fkey'",
        )
        == 0
    )


def test_a_plain_role_sees_nothing_and_runs_no_semo_function(plain_cluster: str) -> None:
    dsn = _new_database(plain_cluster)
    asyncio.run(migrate(dsn))
    office = str(uuid.uuid4())
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("insert into offices (id, name) values (%s, 'A')", (office,))
        conn.execute(
            "do $$ begin if not exists (select 1 from pg_roles where rolname = 'plain')"
            " then create role plain; end if; end $$"
        )
        conn.execute("grant usage on schema public to plain")
    with psycopg.connect(dsn) as conn:
        open_tables = conn.execute(
            "select c.relname from pg_class c where c.relnamespace = 'public'::regnamespace"
            " and c.relkind = 'r' and has_table_privilege('plain', c.oid,"
            " 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')"
        ).fetchall()
        assert open_tables == []
        open_functions = conn.execute(
            "select p.proname from pg_proc p where p.pronamespace = 'public'::regnamespace"
            " and p.proname like 'semo\\_%' and has_function_privilege('plain', p.oid, 'EXECUTE')"
        ).fetchall()
        assert open_functions == []
    with psycopg.connect(dsn) as conn:
        conn.execute("set role plain")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("select * from offices")
    with psycopg.connect(dsn) as conn:
        conn.execute("set role plain")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("select * from semo_claim_next(%s, 'evil', 30)", (office,))
    # without auth.uid(), who asks is the JWT's sub as PostgREST would set it
    with psycopg.connect(dsn) as conn:
        user = str(uuid.uuid4())
        conn.execute("select set_config('request.jwt.claims', %s, true)", (f'{{"sub": "{user}"}}',))
        assert str(conn.execute("select semo_user_id()").fetchone()[0]) == user  # type: ignore[index]
        conn.execute("select set_config('request.jwt.claims', '{\"sub\": \"x\"}', true)")
        assert conn.execute("select semo_user_id()").fetchone()[0] is None  # type: ignore[index]


def test_an_upgrade_from_0006_keeps_the_rows(plain_cluster: str, tmp_path: Path) -> None:
    dsn = _new_database(plain_cluster)
    upto_0006 = tmp_path / "upto_0006"
    upto_0006.mkdir()
    for path in migration_files():
        if path.name < "0007":
            (upto_0006 / path.name).write_bytes(path.read_bytes())
    assert len(asyncio.run(migrate(dsn, folder=upto_0006))) == 6
    office, agent, question, job = (str(uuid.uuid4()) for _ in range(4))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("insert into offices (id, name) values (%s, 'A')", (office,))
        conn.execute(
            "insert into agents (id, office_id, name, role) values (%s, %s, 'be', 'BE')",
            (agent, office),
        )
        conn.execute(
            "insert into user_questions (id, office_id, agent_id, question)"
            " values (%s, %s, %s, 'q')",
            (question, office, agent),
        )
        conn.execute(
            "insert into jobs (id, office_id, agent_id, task) values (%s, %s, %s, 't')",
            (job, office, agent),
        )
        conn.execute(
            "insert into agent_commands (office_id, command_type, payload)"
            " values (%s, 'run_job', '{}')",
            (office,),
        )
        before_policies = conn.execute(
            "select count(*) from pg_policies where policyname = 'semo_office_isolation'"
        ).fetchone()
        assert before_policies is not None and before_policies[0] > 0
    applied = asyncio.run(migrate(dsn))
    assert [name[:4] for name in applied] == [
        p.name[:4] for p in migration_files() if p.name >= "0007"
    ]
    with psycopg.connect(dsn) as conn:
        counts = conn.execute(
            "select (select count(*) from offices), (select count(*) from agents),"
            " (select count(*) from user_questions), (select count(*) from jobs),"
            " (select count(*) from agent_commands), (select count(*) from office_members)"
        ).fetchone()
        assert counts == (1, 1, 1, 1, 1, 0)
        # the office_id-claim policies are gone: a claim no longer grants anything
        left = conn.execute(
            "select count(*) from pg_policies where policyname = 'semo_office_isolation'"
        ).fetchone()
        assert left == (0,)
