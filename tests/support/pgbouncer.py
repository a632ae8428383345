"""A private PgBouncer in transaction mode in front of the test Postgres (the distribution's
package: scripts/lib/ensure.sh installs it), on a free loopback port, stopped afterwards.

    with pgbouncer(dsn) as pooled_dsn:   # the same database, through the pooler
        ...
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict, make_conninfo

BINARY = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def pgbouncer(dsn: str, *, max_client_conn: int = 1000, pool_size: int = 20) -> Iterator[str]:
    """PgBouncer (pool_mode = transaction, auth_type = trust) for the database of `dsn`;
    yields the DSN that reaches the database through it."""
    if not os.path.exists(BINARY):
        raise AssertionError("pgbouncer is not installed (scripts/test installs it)")
    params = conninfo_to_dict(dsn)
    port = _free_port()
    folder = Path(tempfile.mkdtemp(prefix="semo-pgb"))
    folder.chmod(0o755)
    user = params.get("user") or "postgres"
    (folder / "users.txt").write_text(f'"{user}" ""\n')
    (folder / "pgbouncer.ini").write_text(
        f"""[databases]
* = host={params.get("host", "127.0.0.1")} port={params.get("port", 5432)}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {folder}/users.txt
pool_mode = transaction
max_client_conn = {max_client_conn}
default_pool_size = {pool_size}
max_db_connections = {pool_size}
ignore_startup_parameters = extra_float_digits,options,application_name
logfile = {folder}/pgbouncer.log
pidfile = {folder}/pgbouncer.pid
"""
    )
    command = [BINARY]
    if os.geteuid() == 0:  # PgBouncer refuses to run as root: it runs as postgres
        account = pwd.getpwnam("postgres")
        os.chown(folder, account.pw_uid, account.pw_gid)
        command += ["-u", account.pw_name]
    process = subprocess.Popen(
        [*command, str(folder / "pgbouncer.ini")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    log = folder / "pgbouncer.log"
                    detail = log.read_text() if log.exists() else process.stderr.read().decode()  # type: ignore[union-attr]
                    raise AssertionError(f"pgbouncer did not start: {detail}") from None
                time.sleep(0.05)
        yield make_conninfo(dsn, host="127.0.0.1", port=str(port))
    finally:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(folder, ignore_errors=True)
