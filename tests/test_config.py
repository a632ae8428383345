"""semo.toml: the example `semo init` writes, defaults, paths, the environment, and every error
an operator can make, each with a message that says where and what."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

import pytest

from semo.engine.cli import main
from semo.engine.config import (
    EXAMPLE_CONFIG,
    AgentConfig,
    ConfigError,
    EngineConfig,
    OfficeConfig,
    PoolConfig,
    SemoConfig,
    StoreSection,
    default_config_path,
    default_workspace_root,
    init_config,
    load_config,
)
from semo.engine.engine import Engine
from semo.engine.protocol.monitor import DEFAULT_PROMPT_PATTERN
from semo.engine.store import StoreConfig
from semo.engine.store.models import Agent
from semo.engine.store.sqlite import SqliteStore

OFFICE = '[office]\nname = "shop"\n'


def write(tmp_path: Path, text: str, name: str = "semo.toml") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def load_error(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    return str(caught.value)


# -- the example ------------------------------------------------------------------------------


def test_the_example_loads_with_the_defaults(tmp_path: Path) -> None:
    path = init_config(tmp_path / "semo.toml")
    assert path == tmp_path / "semo.toml"
    config = load_config(path)
    assert config.source == path
    assert config.warnings == []
    # the values written in the example are the defaults, so its comments tell the truth
    assert config.store == StoreSection()
    assert config.engine == EngineConfig()
    assert config.pool == PoolConfig()
    assert config.office.repository == tmp_path.resolve()
    assert config.office.workspace_root == default_workspace_root()
    assert [a.role for a in config.agents] == ["FE", "BE", "QA"]
    for agent in config.agents:
        defaults = AgentConfig(role=agent.role)
        assert agent.profile == "claude"
        assert agent.command == defaults.command == ["claude"]
        assert agent.prompt.strip() and agent.role in {"FE", "BE", "QA"}
        assert agent.name != agent.role  # the example names them
        assert (agent.cols, agent.rows, agent.env) == (defaults.cols, defaults.rows, {})
        assert agent.prompt_pattern == DEFAULT_PROMPT_PATTERN


def test_the_example_mentions_every_key_with_its_default() -> None:
    sections = {
        "office": OfficeConfig,
        "store": StoreSection,
        "engine": EngineConfig,
        "pool": PoolConfig,
    }
    for section, model in sections.items():
        assert f"[{section}]" in EXAMPLE_CONFIG
        for key in model.model_fields:
            assert re.search(rf"^(# )?{key} = ", EXAMPLE_CONFIG, re.M), f"[{section}] {key}"
    assert "[[agents]]" in EXAMPLE_CONFIG
    for key in AgentConfig.model_fields:
        assert re.search(rf"^#   {key}\b", EXAMPLE_CONFIG, re.M) or (
            key == "rows" and "#   cols, rows" in EXAMPLE_CONFIG
        ), f"[[agents]] {key}"
    assert f"'{DEFAULT_PROMPT_PATTERN}'" in EXAMPLE_CONFIG
    assert all(len(line) <= 100 for line in EXAMPLE_CONFIG.splitlines())


def test_a_minimal_file_takes_every_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    config = load_config(write(tmp_path, OFFICE))
    assert config.office.name == "shop"
    assert config.office.repository == tmp_path.resolve()
    assert config.office.workspace_root == tmp_path / "data" / "semo" / "workspace"
    assert config.agents == []  # then warm_roles need not name agents
    assert config.pool.warm_roles == ["FE", "BE", "QA"]
    assert config.pool.max_sessions == 6 and config.pool.idle_timeout == 600.0
    assert config.engine.log_format == "text" and config.engine.id == ""
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")  # the XDG spec says: ignore
    assert default_workspace_root() == Path.home() / ".local/share/semo/workspace"


def test_default_config_path_is_semo_toml_here() -> None:
    assert default_config_path() == Path("semo.toml")


# -- paths ------------------------------------------------------------------------------------


def test_relative_paths_are_relative_to_the_file_not_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    folder = tmp_path / "conf"
    path = write(
        folder,
        '[office]\nname = "shop"\nrepository = "../repo"\nworkspace_root = "ws"\n'
        '[store]\nsqlite_path = "state/semo.db"\n',
    )
    config = load_config(path)
    assert config.office.repository == (tmp_path / "repo").resolve()
    assert config.office.workspace_root == (folder / "ws").resolve()
    assert config.store.sqlite_path == (folder / "state" / "semo.db").resolve()
    # a relative path to the file itself works too
    config = load_config(Path("..") / "conf" / "semo.toml")
    assert config.office.repository == (tmp_path / "repo").resolve()


def test_home_is_expanded_and_absolute_paths_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    path = write(
        tmp_path,
        '[office]\nname = "shop"\nrepository = "~/src/shop"\nworkspace_root = "/srv/ws"\n',
    )
    config = load_config(path)
    assert config.office.repository == tmp_path / "home" / "src" / "shop"
    assert config.office.workspace_root == Path("/srv/ws")
    office = config.office.to_office()
    assert (office.name, office.repository) == ("shop", str(tmp_path / "home" / "src" / "shop"))
    assert office.workspace_root == "/srv/ws"


# -- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            OFFICE + "[pool]\nmax_sessions = 65\n",
            "semo.toml:4: [pool] max_sessions: Input should be less than or equal to 64",
            id="out-of-range",
        ),
        pytest.param(
            OFFICE + "[pool]\nmax_session = 6\n",
            "semo.toml:4: [pool] max_session: unknown key (did you mean max_sessions?",
            id="unknown-key",
        ),
        pytest.param(
            OFFICE + "[pol]\nmax_sessions = 6\n",
            "semo.toml:3: [pol]: unknown section (did you mean pool?",
            id="unknown-section",
        ),
        pytest.param(
            "verbose = true\n" + OFFICE,
            "semo.toml:1: verbose: unknown top-level key (known: office, store, engine, pool",
            id="unknown-top-level-key",
        ),
        pytest.param(
            OFFICE + '[[agents]]\nrole = "FE"\n\n[[agents]]\nrole = "BE"\ncolour = "red"\n',
            "semo.toml:8: [[agents]] #2 colour: unknown key (did you mean cols? known: role, name",
            id="unknown-agent-key",
        ),
        pytest.param(
            OFFICE + "[ship]\nremotes = 1\n",
            "semo.toml:4: [ship] remotes: unknown key (did you mean remote? known: remote, on_done",
            id="unknown-ship-key",
        ),
        pytest.param(
            OFFICE + '[ship]\ngithub_repo = "https://github.com/acme/shop"\n',
            "semo.toml:4: [ship] github_repo: 'https://github.com/acme/shop' is not \"owner/name\"",
            id="bad-github-repo",
        ),
        pytest.param(
            OFFICE + '[ship]\ngithub_api_url = "api.github.com"\n',
            "[ship] github_api_url: 'api.github.com' is not an http:// or https:// URL",
            id="bad-github-api-url",
        ),
        pytest.param(
            OFFICE + "[git]\nbase_branh = 1\n",
            "[git] base_branh: unknown key (did you mean base_branch? known: base_branch",
            id="unknown-git-key",
        ),
        pytest.param(
            OFFICE + "[budgets]\nmessage = 1\n",
            "semo.toml:4: [budgets] message: unknown key (did you mean messages? known: window",
            id="unknown-budgets-key",
        ),
        pytest.param(
            OFFICE + "[approvals]\nwait = 3\n",
            "semo.toml:4: [approvals] wait: unknown key (known: deny_after_minutes, rules)",
            id="unknown-approvals-key",
        ),
        pytest.param(
            OFFICE + '[[approvals.rules]]\ntool = "Bash"\ndecision = "allow"\npatern = "x"\n',
            "[approvals] rules[0].patern: unknown key (did you mean pattern? known: name, roles",
            id="unknown-approval-rule-key",
        ),
        pytest.param(
            OFFICE + '[store]\nbackend = "mysql"\n',
            "semo.toml:4: [store] backend: Input should be 'sqlite', 'postgres' or 'supabase'",
            id="bad-backend",
        ),
        pytest.param(
            '[office]\nrepository = "."\n',
            "semo.toml:1: [office] name: Field required",
            id="no-office-name",
        ),
        pytest.param(
            "[pool]\nmax_sessions = 3\n",
            'semo.toml: [office]: missing: every semo.toml has an [office] section with name = "',
            id="no-office",
        ),
        pytest.param(
            OFFICE + '[[agents]]\nname = "Frontend"\n',
            "semo.toml:3: [[agents]] #1 role: Field required",
            id="no-role",
        ),
        pytest.param(
            OFFICE + '[[agents]]\nrole = "front end"\n',
            "semo.toml:4: [[agents]] #1 role: 'front end' is not a role: a letter, then up to 31 "
            "letters, digits, _ or -",
            id="bad-role",
        ),
        pytest.param(
            OFFICE + '[[agents]]\nrole = "FE"\n[[agents]]\nrole = "BE"\n[[agents]]\nrole = "FE"\n',
            "semo.toml:8: [[agents]] #3 role: 'FE' is already the role of [[agents]] #1",
            id="duplicate-role",
        ),
        pytest.param(
            OFFICE + '[[agents]]\nrole = "FE"\n[[agents]]\nprompt = """\n[[agents]]\n"""\n'
            'role = "fe"\n',
            "semo.toml:9: [[agents]] #2 role: 'fe' is already the role of [[agents]] #1 "
            "('FE': roles must differ in more than case)",
            id="duplicate-role-by-case",
        ),
        pytest.param(
            OFFICE + '[[agents]]\nrole = "FE"\nenv = { NODE_ENV = "dev", SEMO_TOKEN = "x" }\n',
            "semo.toml:5: [[agents]] #1 env: SEMO_TOKEN: variables starting with SEMO_ or "
            "SUPABASE_ are not passed to agents (agents never get the engine's credentials)",
            id="semo-env",
        ),
        pytest.param(
            OFFICE + '[[agents]]\nrole = "FE"\n[agents.env]\nSUPABASE_SERVICE_ROLE_KEY = "k"\n',
            "[[agents]] #1 env: SUPABASE_SERVICE_ROLE_KEY: variables starting with SEMO_ or "
            "SUPABASE_ are not passed",
            id="supabase-env",
        ),
        pytest.param(
            OFFICE + '[[agents]]\nrole = "sh"\nprofile = "generic"\nprompt_pattern = "[$"\n',
            "semo.toml:6: [[agents]] #1 prompt_pattern: not a regular expression: unterminated "
            "character set at position 0",
            id="bad-regex",
        ),
        pytest.param(
            OFFICE + '[[agents]]\nrole = "FE"\nprompt_pattern = "> $"\n',
            'semo.toml:5: [[agents]] #1 prompt_pattern: applies to profile = "generic" only',
            id="pattern-for-claude",
        ),
        pytest.param(
            OFFICE + '[pool]\nwarm_roles = ["FE", "DB"]\n[[agents]]\nrole = "FE"\n',
            "semo.toml:4: [pool] warm_roles: 'DB' is not the role of any [[agents]] (roles: FE)",
            id="warm-role-not-an-agent",
        ),
        pytest.param(
            OFFICE + '[pool]\nmax_sessions = 1\nwarm_roles = ["FE", "BE"]\n',
            "semo.toml:5: [pool] warm_roles: 2 warm roles do not fit in max_sessions = 1",
            id="warm-roles-do-not-fit",
        ),
        pytest.param(
            OFFICE + '[[agents]]\nrole = "FE"\ncommand = "claude --verbose"\n',
            "semo.toml:5: [[agents]] #1 command: give the program and its arguments as a list, "
            'e.g. command = ["claude", "--verbose"]',
            id="command-as-string",
        ),
        pytest.param(
            OFFICE + '[[agents]]\nrole = "FE"\ncommand = []\n',
            "semo.toml:5: [[agents]] #1 command: List should have at least 1 item",
            id="empty-command",
        ),
        pytest.param(
            OFFICE + '[engine]\ncommand_timeout = 0\nlog_format = "xml"\n',
            "semo.toml:4: [engine] command_timeout: Input should be greater than 0\n"
            "semo.toml:5: [engine] log_format: Input should be 'text' or 'json'",
            id="two-problems",
        ),
        pytest.param(
            OFFICE + '[engine]\nid = "my engine"\n',
            "semo.toml:4: [engine] id: must be empty (= <hostname>-<pid>) or 1-128 letters",
            id="bad-engine-id",
        ),
        pytest.param(
            '[office]\nname = "shop"\nrepository = ""\n[store]\nsqlite_path = " "\n',
            "semo.toml:3: [office] repository: must not be empty (use "
            '"." for this file\'s folder)\n'
            "semo.toml:5: [store] sqlite_path: must not be empty "
            "(leave the key out for the default)",
            id="empty-paths",
        ),
        pytest.param(
            OFFICE + '[[agents]]\nrole = "FE"\ncols = 10\n',
            "semo.toml:5: [[agents]] #1 cols: Input should be greater than or equal to 20",
            id="tiny-terminal",
        ),
    ],
)
def test_errors_say_where_and_what(tmp_path: Path, text: str, expected: str) -> None:
    message = load_error(tmp_path, text)
    assert message.startswith(str(tmp_path))
    assert expected in message.replace(str(tmp_path) + os.sep, "")


def test_every_problem_is_listed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, OFFICE + "[pool]\nmax_sessions = 0\nidle_timeout = -1\n"))
    assert len(caught.value.problems) == 2
    assert str(caught.value) == "\n".join(caught.value.problems)
    assert isinstance(caught.value, ValueError)


def test_a_missing_file_suggests_semo_init(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match=re.escape(f"{path}: no such file")) as caught:
        load_config(path)
    assert f"semo init {path}" in str(caught.value)
    with pytest.raises(ConfigError, match="is a folder"):
        load_config(tmp_path)


def test_invalid_toml_gives_line_and_column(tmp_path: Path) -> None:
    message = load_error(tmp_path, OFFICE + "[pool]\nmax_sessions = \n")
    assert message.startswith(f"{tmp_path / 'semo.toml'}: invalid TOML: ")
    assert "(at line 4, column 16)" in message
    message = load_error(tmp_path, OFFICE + "[office]\n")  # a table defined twice
    assert "invalid TOML" in message and "line 3" in message


def test_non_utf8_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "semo.toml"
    path.write_bytes(b'[office]\nname = "caf\xe9"\n')
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path)


# -- the store and secrets --------------------------------------------------------------------


def test_secrets_in_the_file_give_warnings_not_errors(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            OFFICE + '[store]\nbackend = "supabase"\nsupabase_url = "https://p.supabase.co"\n'
            'supabase_key = "service-role-secret"\n'
            'database_url = "postgresql://semo:hunter2@db.example:5432/semo"\n',
        )
    )
    assert len(config.warnings) == 2
    database, key = config.warnings
    assert database.startswith(f"{tmp_path / 'semo.toml'}: [store] database_url holds a password")
    assert "SEMO_DATABASE_URL" in database
    assert "[store] supabase_key is a secret" in key and "SUPABASE_SERVICE_ROLE_KEY" in key
    assert "hunter2" not in repr(config) and "service-role-secret" not in repr(config)
    assert all("hunter2" not in w and "service-role-secret" not in w for w in config.warnings)


@pytest.mark.parametrize(
    ("dsn", "warned"),
    [
        ("postgresql://postgres@127.0.0.1:5432/semo", False),
        ("host=127.0.0.1 dbname=semo user=postgres", False),
        ("postgresql://semo:pw@db/semo", True),
        ("postgresql://semo@db/semo?password=pw", True),
        ("host=db user=semo password=pw", True),
    ],
)
def test_only_a_dsn_with_a_password_is_a_secret(tmp_path: Path, dsn: str, warned: bool) -> None:
    config = load_config(write(tmp_path, OFFICE + f"[store]\ndatabase_url = '{dsn}'\n"))
    assert bool(config.warnings) is warned


def test_the_store_comes_from_the_file_when_the_environment_is_silent(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            OFFICE + '[store]\nbackend = "postgres"\nsqlite_path = "x.db"\n'
            'database_url = "postgresql://postgres@127.0.0.1/semo"\n',
        )
    )
    store = config.store_config({})
    assert isinstance(store, StoreConfig)
    assert store.backend == "postgres"
    assert store.dsn() == "postgresql://postgres@127.0.0.1/semo"
    assert store.sqlite_path == (tmp_path / "x.db").resolve()
    # empty variables count as unset, like StoreConfig.from_env
    assert config.store_config({"SEMO_STORE": "", "SEMO_DATABASE_URL": ""}) == store
    # no [store] at all: the defaults
    assert load_config(write(tmp_path, OFFICE, "b.toml")).store_config({}) == StoreConfig()


def test_the_environment_wins_over_the_file(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            OFFICE + '[store]\nbackend = "postgres"\nsqlite_path = "x.db"\n'
            'database_url = "postgresql://file@db/semo"\n'
            'supabase_url = "https://file.supabase.co"\nsupabase_key = "file-key"\n',
        )
    )
    env = {
        "SEMO_STORE": "supabase",
        "SEMO_SQLITE_PATH": "/var/semo/env.db",
        "SEMO_DATABASE_URL": "postgresql://env@db/semo",
        "SUPABASE_URL": "https://env.supabase.co",
        "SUPABASE_SERVICE_ROLE_KEY": "env-key",
    }
    store = config.store_config(env)
    assert store.backend == "supabase"
    assert store.sqlite_path == Path("/var/semo/env.db")
    assert store.dsn() == "postgresql://env@db/semo"
    assert store.supabase_url == "https://env.supabase.co"
    assert store.supabase_key is not None and store.supabase_key.get_secret_value() == "env-key"
    # one variable at a time: the others still come from the file
    partial = config.store_config({"SUPABASE_SERVICE_ROLE_KEY": "env-key"})
    assert partial.backend == "postgres" and partial.supabase_url == "https://file.supabase.co"
    assert partial.supabase_key is not None
    assert partial.supabase_key.get_secret_value() == "env-key"
    assert partial.dsn() == "postgresql://file@db/semo"


def test_store_config_reads_os_environ_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = load_config(write(tmp_path, OFFICE))
    monkeypatch.setenv("SEMO_STORE", "sqlite")
    monkeypatch.setenv("SEMO_SQLITE_PATH", str(tmp_path / "env.db"))
    assert config.store_config().sqlite_path == tmp_path / "env.db"


# -- agents and the engine --------------------------------------------------------------------


def test_an_agent_becomes_a_store_row(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            OFFICE + '[pool]\nwarm_roles = ["BE"]\n'
            '[[agents]]\nrole = "BE"\nprompt = "You build the API."\n'
            'scope_patterns = ["api/**"]\ncore_skills = ["python"]\n'
            'command = ["claude", "--model", "sonnet"]\nenv = { NODE_ENV = "test" }\n'
            '[[agents]]\nrole = "sh"\nprofile = "generic"\ncommand = ["bash", "--norc"]\n'
            "prompt_pattern = '\\$ $'\ncols = 100\nrows = 30\n",
        )
    )
    be = config.agent("BE")
    assert be is not None and config.agent("QA") is None
    assert be.name == "BE"  # the name defaults to the role
    assert be.env == {"NODE_ENV": "test"}
    row = be.to_agent("office-1")
    assert isinstance(row, Agent)
    assert (row.office_id, row.role, row.name, row.prompt) == (
        "office-1",
        "BE",
        "BE",
        "You build the API.",
    )
    assert row.scope_patterns == ["api/**"] and row.core_skills == ["python"]
    assert row.command == ["claude", "--model", "sonnet"]
    sh = config.agent("sh")
    assert sh is not None
    assert (sh.profile, sh.prompt_pattern, sh.cols, sh.rows) == ("generic", r"\$ $", 100, 30)
    assert re.compile(sh.prompt_pattern).search("user@host:~$ ")


def test_engine_id_defaults_to_host_and_pid(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, OFFICE))
    assert config.engine_id() == f"{socket.gethostname()}-{os.getpid()}"
    config = load_config(write(tmp_path, OFFICE + '[engine]\nid = "engine-a.1"\n'))
    assert config.engine_id() == config.engine.engine_id() == "engine-a.1"


def test_models_can_be_built_in_code() -> None:
    config = SemoConfig(
        office=OfficeConfig(name="x"),
        pool=PoolConfig(warm_roles=["QA"]),
        agents=[AgentConfig(role="QA")],
    )
    assert config.source is None and config.warnings == []
    assert config.agents[0].name == "QA"
    assert config.office.repository == Path(".")  # no file: nothing to be relative to
    with pytest.raises(ValueError, match="'FE' is not the role of any"):
        SemoConfig.model_validate({"office": {"name": "x"}, "agents": [{"role": "QA"}]})


# -- semo init --------------------------------------------------------------------------------


def test_init_config_refuses_to_overwrite_unless_forced(tmp_path: Path) -> None:
    path = tmp_path / "semo.toml"
    path.write_text("# mine\n")
    with pytest.raises(ConfigError, match=r"already exists; not overwritten .*--force"):
        init_config(path)
    assert path.read_text() == "# mine\n"
    assert init_config(path, force=True) == path
    assert path.read_text() == EXAMPLE_CONFIG
    # a folder gets a semo.toml inside (here: the one that exists, so refused)
    with pytest.raises(ConfigError, match=re.escape(f"{path}: already exists")):
        init_config(tmp_path)
    folder = tmp_path / "a"
    folder.mkdir()
    assert init_config(folder) == folder / "semo.toml"
    # missing parents are made
    assert init_config(tmp_path / "b" / "c.toml") == tmp_path / "b" / "c.toml"
    load_config(tmp_path / "b" / "c.toml")


def test_semo_init_writes_refuses_and_forces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "office" / "semo.toml"
    assert main(["init", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"wrote {path}" in out
    assert f"semo engine --config {path}" in out
    assert path.read_text() == EXAMPLE_CONFIG
    load_config(path)

    path.write_text(OFFICE)
    assert main(["init", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"semo init: {path}: already exists" in captured.err and "--force" in captured.err
    assert path.read_text() == OFFICE

    assert main(["init", "--force", str(path)]) == 0
    assert path.read_text() == EXAMPLE_CONFIG


def test_semo_init_defaults_to_semo_toml_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["init"]) == 0
    assert (tmp_path / "semo.toml").read_text() == EXAMPLE_CONFIG
    assert "semo engine --config semo.toml" in capsys.readouterr().out
    # a trailing slash names a folder, even one that does not exist yet
    assert main(["init", "ops/"]) == 0
    assert (tmp_path / "ops" / "semo.toml").read_text() == EXAMPLE_CONFIG
    assert "semo engine --config ops/semo.toml" in capsys.readouterr().out


def test_stale_after_comes_from_the_engine_unless_the_agent_sets_it(tmp_path: Path) -> None:
    text = (
        OFFICE
        + "[engine]\nstale_after = 5.0\n[pool]\nwarm_roles = []\n"
        + '[[agents]]\nrole = "FE"\n[[agents]]\nrole = "BE"\nstale_after = 2.5\n'
    )
    engine = Engine(load_config(write(tmp_path, text)), store=SqliteStore(tmp_path / "s.db"))
    options = {
        role: engine._launch_options(Agent(office_id="o", name=role, role=role, command=["x"]))
        for role in ("FE", "BE", "QA")  # QA has no [[agents]] entry
    }
    assert {role: o.stale_after for role, o in options.items()} == {"FE": 5.0, "BE": 2.5, "QA": 5.0}
    with pytest.raises(ConfigError, match="stale_after"):
        load_config(write(tmp_path, OFFICE + "[engine]\nstale_after = 0\n"))
