"""`semo.toml`: the configuration of one office (its repository, store, engine, pool, agents).

    config = load_config(Path("semo.toml"))      # ConfigError with a sentence to act on
    for warning in config.warnings:              # e.g. a secret written in the file
        log.warning(warning)
    store = open_store(config.store_config())    # the environment wins over the file
    agent = config.agents[0].to_agent(office.id) # a store row

Every key is optional except ``[office] name`` and each agent's ``role``; unknown keys are an
error that names the key and its section. Relative paths are relative to the file's folder and
``~`` is expanded. Secrets belong in the environment (SEMO_DATABASE_URL, SUPABASE_URL,
SUPABASE_SERVICE_ROLE_KEY); a secret written in the file is allowed but gives a warning.
`init_config` writes a commented example (:data:`EXAMPLE_CONFIG`). The reference is
docs/CONFIG.md.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import socket
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from semo.engine.api.settings import ApiSection, token_secrets
from semo.engine.approval_policy import ApprovalsSection
from semo.engine.fsutil import atomic_write
from semo.engine.jobwork.settings import GitSection
from semo.engine.notify.settings import KeyProblem as _KeyProblem
from semo.engine.notify.settings import NotifySink, console_default
from semo.engine.protocol.monitor import DEFAULT_PROMPT_PATTERN, DEFAULT_STALE_AFTER
from semo.engine.ship.settings import ShipSection
from semo.engine.store import StoreConfig
from semo.engine.store.models import Agent, Office

__all__ = [
    "CONFIG_FILENAME",
    "EXAMPLE_CONFIG",
    "AgentConfig",
    "ConfigError",
    "EngineConfig",
    "OfficeConfig",
    "PoolConfig",
    "SemoConfig",
    "StoreSection",
    "default_config_path",
    "default_workspace_root",
    "engine_id",
    "init_config",
    "load_config",
    "parse_config",
]

CONFIG_FILENAME = "semo.toml"
#: The same rule as semo.engine.store.models.Agent.role and the protocol's ROLE.
ROLE_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
ENGINE_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")
#: seconds without a heartbeat after which an engine is taken for dead ([engine] failover_seconds)
DEFAULT_FAILOVER_SECONDS = 12.0
#: Environment variable names an agent may never be given (the engine's credentials).
FORBIDDEN_ENV_PREFIXES = ("SEMO_", "SUPABASE_")


class ConfigError(ValueError):
    """The configuration cannot be used; the message says where and what, one problem a line."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems if problems is not None else [message]


def default_workspace_root() -> Path:
    """`$XDG_DATA_HOME/semo/workspace`, else `~/.local/share/semo/workspace`."""
    data = os.environ.get("XDG_DATA_HOME", "")
    base = Path(data) if data and Path(data).is_absolute() else Path.home() / ".local/share"
    return base / "semo" / "workspace"


def default_config_path() -> Path:
    """`./semo.toml`."""
    return Path(CONFIG_FILENAME)


def engine_id(configured: str = "") -> str:
    """The configured engine id, or `<hostname>-<pid>` of this process."""
    return configured or f"{socket.gethostname()}-{os.getpid()}"


def _resolve_path(value: Path, info: ValidationInfo) -> Path:
    """`~` expanded; relative paths joined to the config file's folder when it is known."""
    value = value.expanduser()
    base = (info.context or {}).get("base_dir")
    if not value.is_absolute() and base is not None:
        value = (Path(base) / value).resolve()
    return value


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OfficeConfig(_Section):
    name: str = Field(min_length=1, max_length=200)
    repository: Path = Field(default=Path("."), validate_default=True)
    workspace_root: Path = Field(default_factory=default_workspace_root)

    @field_validator("name")
    @classmethod
    def _name_not_blank(cls, name: str) -> str:
        if not name.strip():
            raise ValueError("must not be blank")
        return name

    @field_validator("repository", "workspace_root", mode="before")
    @classmethod
    def _not_empty(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            raise ValueError('must not be empty (use "." for this file\'s folder)')
        return value

    @field_validator("repository", "workspace_root")
    @classmethod
    def _paths(cls, value: Path, info: ValidationInfo) -> Path:
        return _resolve_path(value, info)

    def to_office(self) -> Office:
        """A new office row with this name, repository and workspace root."""
        return Office(
            name=self.name, repository=str(self.repository), workspace_root=str(self.workspace_root)
        )


class StoreSection(_Section):
    """`[store]`. Secrets are better left to the environment (see SemoConfig.store_config)."""

    backend: Literal["sqlite", "postgres", "supabase"] = "sqlite"
    sqlite_path: Path | None = None
    database_url: SecretStr | None = None
    supabase_url: str | None = None
    supabase_key: SecretStr | None = None
    #: postgres: the most connections the engine opens at once (given back when idle)
    pool_size: int = Field(default=4, ge=1, le=100)
    #: postgres: "transaction" behind a transaction-mode pooler (PgBouncer, Supabase's 6543)
    pooler: Literal["session", "transaction"] = "session"
    #: postgres: "poll" (one idle connection) or "listen" (LISTEN on a second one)
    wakeups: Literal["poll", "listen"] = "poll"
    #: supabase: the most Realtime broadcasts this engine sends a second (None: no cap)
    realtime_broadcasts_per_second: float | None = Field(default=None, gt=0)

    @field_validator("sqlite_path", mode="before")
    @classmethod
    def _not_empty(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            raise ValueError("must not be empty (leave the key out for the default)")
        return value

    @field_validator("sqlite_path")
    @classmethod
    def _sqlite_path(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        return None if value is None else _resolve_path(value, info)


class EngineConfig(_Section):
    #: "" means `<hostname>-<pid>`, computed when the engine starts (see engine_id()).
    id: str = ""
    log_format: Literal["text", "json"] = "text"
    command_timeout: float = Field(default=30.0, gt=0, le=86_400)
    #: Seconds a claim stays this engine's without renewal (renewed every lease_seconds / 3).
    lease_seconds: float = Field(default=30.0, gt=0, le=3600)
    #: Seconds without a heartbeat after which the other engines take this one for dead and
    #: take over its work (a beat every failover_seconds / 4; semo/engine/heartbeat.py). None: 12 s,
    #: or 3 x lease_seconds when that is shorter (`failover()`).
    failover_seconds: float | None = Field(default=None, gt=0, le=3600)
    shutdown_grace: float = Field(default=10.0, ge=0, le=3600)
    #: Seconds a busy agent may print nothing before it is reported `stale` (never "done").
    stale_after: float = Field(default=DEFAULT_STALE_AFTER, gt=0, le=86_400)
    #: Jobs (run_job commands) this engine runs at once: a budget of their own, beside the
    #: other commands' (semo/engine/routing/dispatcher.py).
    max_jobs: int = 8

    @field_validator("max_jobs", mode="before")
    @classmethod
    def _max_jobs(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 256:
            raise ValueError(
                f"must be a whole number from 1 to 256 (the jobs this engine runs at once), "
                f"not {value!r}"
            )
        return value

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if value and not ENGINE_ID_PATTERN.match(value):
            raise ValueError(
                "must be empty (= <hostname>-<pid>) or 1-128 letters, digits and . _ : @ - "
                "starting with a letter or digit"
            )
        return value

    def failover(self) -> float:
        """`failover_seconds`, or by default 12 s (3 x lease_seconds when that is shorter)."""
        if self.failover_seconds is not None:
            return self.failover_seconds
        return min(DEFAULT_FAILOVER_SECONDS, 3 * self.lease_seconds)

    def engine_id(self) -> str:
        """`id`, or `<hostname>-<pid>` of this process when `id` is empty."""
        return engine_id(self.id)


class PoolConfig(_Section):
    max_sessions: int = Field(default=6, ge=1, le=64)
    warm_roles: list[str] = Field(default_factory=lambda: ["FE", "BE", "QA"])
    idle_timeout: float = Field(default=600.0, gt=0)
    restart_failures: int = Field(default=3, ge=1, le=1000)
    restart_window: float = Field(default=60.0, gt=0)
    restart_cooldown: float = Field(default=30.0, gt=0)

    @field_validator("warm_roles")
    @classmethod
    def _warm_roles(cls, roles: list[str]) -> list[str]:
        seen: set[str] = set()
        for role in roles:
            if role in seen:
                raise ValueError(f"{role!r} is listed twice")
            seen.add(role)
        return roles

    @model_validator(mode="after")
    def _warm_fit(self) -> PoolConfig:
        if len(self.warm_roles) > self.max_sessions:
            raise _KeyProblem(
                ("warm_roles",),
                f"{len(self.warm_roles)} warm roles do not fit in max_sessions = "
                f"{self.max_sessions}",
            )
        return self


class BudgetsConfig(_Section):
    """[budgets]: what one agent may make semo store and queue per `window` seconds, whatever
    its turns (semo/engine/routing/budgets.py; docs/CONFIG.md, docs/SECURITY.md)."""

    window: float = Field(default=60.0, ge=1, le=86_400)
    messages: int = Field(default=120, ge=1, le=1_000_000)
    questions: int = Field(default=20, ge=1, le=1_000_000)
    invocations: int = Field(default=30, ge=1, le=1_000_000)
    results: int = Field(default=30, ge=1, le=1_000_000)
    bytes: int = Field(default=4 << 20, ge=1 << 16, le=1 << 40)
    queued_prompts: int = Field(default=16, ge=1, le=100_000)


#: semo.toml's agent profiles (semo.engine.agents.registry's names)
AgentProfileName = Literal["claude", "generic"]
#: the profiles read from the screen alone, whose prompt_pattern says when they are ready
SCREEN_PROFILES: tuple[str, ...] = ("generic",)


class AgentConfig(_Section):
    """One `[[agents]]` table: a persona of the office."""

    role: str
    name: str = Field(default="", max_length=100)  # "" -> the role (filled in on validation)
    #: the agent CLI's adapter: one of semo.engine.agents.registry's names (config is a foundation
    #: and cannot import the registry; tests/test_agent_adapters.py holds the two the same)
    profile: AgentProfileName = "claude"
    command: list[str] = Field(default_factory=lambda: ["claude"], min_length=1)
    prompt: str = ""
    scope_patterns: list[str] = Field(default_factory=list)
    core_skills: list[str] = Field(default_factory=list)
    prompt_pattern: str = DEFAULT_PROMPT_PATTERN
    env: dict[str, str] = Field(default_factory=dict)
    cols: int = Field(default=120, ge=20, le=1000)
    rows: int = Field(default=40, ge=5, le=500)
    stale_after: float | None = Field(default=None, gt=0, le=86_400)  # None: [engine]'s
    #: whether the program reads what is typed as a prompt for a model: semo's feedback on a
    #: refused protocol message is typed only then (None: claude yes, generic no; a shell would
    #: run it as a command)
    reads_prompts: bool | None = None
    #: Claude Code's permission mode for this agent, written to its worktree's settings
    #: (``permissions.defaultMode``); None: Claude Code's own default (or the user's settings)
    permission_mode: (
        Literal["default", "acceptEdits", "plan", "auto", "dontAsk", "bypassPermissions"] | None
    ) = None

    @model_validator(mode="before")
    @classmethod
    def _name_defaults_to_role(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("name") and isinstance(data.get("role"), str):
            data = {**data, "name": data["role"]}
        return data

    @field_validator("role")
    @classmethod
    def _role(cls, role: str) -> str:
        if not ROLE_PATTERN.match(role):
            raise ValueError(
                f"{role!r} is not a role: a letter, then up to 31 letters, digits, _ or -"
            )
        return role

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        if not name.strip():
            raise ValueError("must not be blank")
        return name

    @field_validator("command", mode="before")
    @classmethod
    def _command_is_argv(cls, command: Any) -> Any:
        if isinstance(command, str):
            example = json.dumps(shlex.split(command) if command.strip() else ["claude"])
            raise ValueError(
                f"give the program and its arguments as a list, e.g. command = {example}"
            )
        return command

    @field_validator("command")
    @classmethod
    def _command(cls, command: list[str]) -> list[str]:
        if not command[0].strip():
            raise ValueError("the program (the first item) must not be empty")
        if any("\0" in arg for arg in command):
            raise ValueError("arguments must not contain NUL characters")
        return command

    @field_validator("prompt_pattern")
    @classmethod
    def _pattern_compiles(cls, pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as error:
            raise ValueError(f"not a regular expression: {error}") from None
        return pattern

    @field_validator("env")
    @classmethod
    def _env(cls, env: dict[str, str]) -> dict[str, str]:
        for key, value in env.items():
            if key.upper().startswith(FORBIDDEN_ENV_PREFIXES):
                raise ValueError(
                    f"{key}: variables starting with SEMO_ or SUPABASE_ are not passed to agents "
                    "(agents never get the engine's credentials)"
                )
            if not key or "=" in key or "\0" in key:
                raise ValueError(f"{key!r} is not an environment variable name")
            if "\0" in value:
                raise ValueError(f"{key}: the value must not contain NUL characters")
            if re.fullmatch(r"\$\{(SEMO_|SUPABASE_)\w*\}", value, re.IGNORECASE):
                raise ValueError(f"{key}: {value} is an engine secret; never passed to agents")
        return env

    @model_validator(mode="after")
    def _pattern_is_for_generic(self) -> AgentConfig:
        screen_only = self.profile in SCREEN_PROFILES
        if "prompt_pattern" in self.model_fields_set and not screen_only:
            raise _KeyProblem(
                ("prompt_pattern",),
                'applies to profile = "generic" only (Claude Code agents are read through hooks)',
            )
        return self

    def to_agent(self, office_id: str) -> Agent:
        """A new agent row of the office (a fresh id; keep an existing row's id yourself)."""
        return Agent(
            office_id=office_id,
            name=self.name,
            role=self.role,
            prompt=self.prompt,
            scope_patterns=list(self.scope_patterns),
            core_skills=list(self.core_skills),
            command=list(self.command),
        )


class ConsoleSection(_Section):
    """`[console]`: the operator console's keys."""

    # the chord that a focused pane does not pass to its agent (tmux's prefix): Textual key
    # names, e.g. "ctrl+]" or "ctrl+b"
    prefix: str = Field(default="ctrl+]", pattern=r"^ctrl\+[a-z\]\\^_@]$")
    # the session list's order: "attention" (sessions that need the operator first: asking,
    # last job failed, in error, stale; then by role) or "role"
    sort: Literal["attention", "role"] = "attention"


class SemoConfig(_Section):
    """The whole `semo.toml`."""

    office: OfficeConfig
    store: StoreSection = Field(default_factory=StoreSection)
    engine: EngineConfig = Field(default_factory=EngineConfig)
    pool: PoolConfig = Field(default_factory=PoolConfig)
    budgets: BudgetsConfig = Field(default_factory=BudgetsConfig)
    api: ApiSection = Field(default_factory=ApiSection)
    console: ConsoleSection = Field(default_factory=ConsoleSection)
    ship: ShipSection = Field(default_factory=ShipSection)
    git: GitSection = Field(default_factory=GitSection)
    approvals: ApprovalsSection = Field(default_factory=ApprovalsSection)
    agents: list[AgentConfig] = Field(default_factory=list)
    #: `[[notify]]` tables (docs/NOTIFY.md); none: the attached consoles only
    notify: list[NotifySink] = Field(default_factory=list)

    _source: Path | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _cross_checks(self) -> SemoConfig:
        first: dict[str, int] = {}
        for index, agent in enumerate(self.agents):
            key = agent.role.casefold()
            if key in first:
                other = self.agents[first[key]].role
                case = (
                    ""
                    if other == agent.role
                    else f" ({other!r}: roles must differ in more than case)"
                )
                raise _KeyProblem(
                    ("agents", index, "role"),
                    f"{agent.role!r} is already the role of [[agents]] #{first[key] + 1}{case}",
                )
            first[key] = index
        if self.agents:
            roles = [agent.role for agent in self.agents]
            for role in self.pool.warm_roles:
                if role not in roles:
                    raise _KeyProblem(
                        ("pool", "warm_roles"),
                        f"{role!r} is not the role of any [[agents]] (roles: {', '.join(roles)})",
                    )
        return self

    @property
    def source(self) -> Path | None:
        """The file this was loaded from (None when built in code)."""
        return self._source

    @property
    def warnings(self) -> list[str]:
        """Things that work but should change (secrets written in the file); for the log."""
        where = f"{self._source}: " if self._source else ""
        found: list[str] = []
        store = self.store
        if store.database_url is not None and _has_password(store.database_url.get_secret_value()):
            found.append(
                f"{where}[store] database_url holds a password; set SEMO_DATABASE_URL in the "
                "environment instead and remove it from the file"
            )
        if store.supabase_key is not None and store.supabase_key.get_secret_value():
            found.append(
                f"{where}[store] supabase_key is a secret; set SUPABASE_SERVICE_ROLE_KEY in the "
                "environment instead and remove it from the file"
            )
        if self.api.token is not None or self.api.tokens:
            found.append(
                f"{where}[api] token / tokens are secrets; set SEMO_API_TOKEN (this office) or "
                "SEMO_API_TOKENS in the environment instead and remove them from the file"
            )
        if self.ship.github_token is not None:
            found.append(
                f"{where}[ship] github_token is a secret; set GITHUB_TOKEN in the environment "
                "instead and remove it from the file"
            )
        for index, sink in enumerate(self.notify):
            if sink.secret_in_file():
                found.append(
                    f"{where}[[notify]] #{index + 1} password is a secret; write "
                    'password = "${VARIABLE}" and set VARIABLE in the environment instead'
                )
        return found

    def notify_sinks(self) -> list[NotifySink]:
        """The `[[notify]]` sinks; without any, the attached consoles (default events)."""
        return list(self.notify) or console_default()

    def agent(self, role: str) -> AgentConfig | None:
        """The agent with this role, if any."""
        return next((a for a in self.agents if a.role == role), None)

    def engine_id(self) -> str:
        """`[engine] id`, or `<hostname>-<pid>` of this process."""
        return self.engine.engine_id()

    def store_config(self, env: Mapping[str, str] | None = None) -> StoreConfig:
        """The store to open: each setting from its environment variable when that is set and
        not empty, else from `[store]`, else the default. SEMO_STORE, SEMO_SQLITE_PATH,
        SEMO_DATABASE_URL, SUPABASE_URL, SUPABASE_SERVICE_ROLE_KEY (env=None: os.environ).
        A bad SEMO_STORE raises engine.store.StoreError."""
        env = os.environ if env is None else env
        from_env = StoreConfig.from_env(env)
        store = self.store
        return StoreConfig(
            backend=from_env.backend if env.get("SEMO_STORE") else store.backend,
            sqlite_path=from_env.sqlite_path or store.sqlite_path,
            database_url=from_env.database_url or store.database_url,
            supabase_url=from_env.supabase_url or store.supabase_url,
            supabase_key=from_env.supabase_key or store.supabase_key,
            pool_size=from_env.pool_size if env.get("SEMO_PG_POOL_SIZE") else store.pool_size,
            pooler=from_env.pooler if env.get("SEMO_PG_POOLER") else store.pooler,
            wakeups=from_env.wakeups if env.get("SEMO_PG_WAKEUPS") else store.wakeups,
            realtime_broadcasts_per_second=store.realtime_broadcasts_per_second,
        )


def config_secrets(config: SemoConfig) -> list[str]:
    """Every secret the engine knows, so no log line ever shows one."""
    store = config.store_config()
    secrets = [store.supabase_key.get_secret_value()] if store.supabase_key else []
    if store.database_url is not None:
        # only the DSN's password is a secret: logs show the rest (host, user, database)
        from psycopg.conninfo import conninfo_to_dict

        dsn = store.database_url.get_secret_value()
        try:
            password = conninfo_to_dict(dsn).get("password")
        except Exception:
            secrets.append(dsn)  # unparsable: hide all of it rather than guess
        else:
            if password:
                secrets.append(str(password))
    github = config.ship.token()
    return secrets + token_secrets(config.api) + ([github] if github else [])


def _has_password(dsn: str) -> bool:
    """A libpq URL with `user:password@` or `?password=`, or a key=value string with password=."""
    if re.search(r"(^|[\s?&])password\s*=\s*\S", dsn):
        return True
    if "://" in dsn:
        try:
            return bool(urlsplit(dsn).password)
        except ValueError:
            return True  # unparsable: err on the side of warning
    return False


# -- loading ----------------------------------------------------------------------------------

#: the sections written as arrays of tables ([[agents]], [[notify]])
_ARRAYS = ("agents", "notify")


def load_config(path: Path) -> SemoConfig:
    """Read and validate a semo.toml. Raises ConfigError (missing file, bad TOML, bad values)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: no such file; write an example with `semo init {path}` and edit it"
        ) from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder, not a semo.toml file") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 text (byte {error.start})") from None
    return parse_config(text, path)


def parse_config(text: str, path: Path) -> SemoConfig:
    """Validate the TOML `text` as if read from `path` (relative paths are based on its folder)."""
    path = Path(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: invalid TOML: {error}") from None
    base_dir = path.expanduser().absolute().parent
    try:
        config = SemoConfig.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as error:
        found = [_describe(path, text, e) for e in error.errors()]
        problems = [message for _, message in sorted(found, key=lambda f: f[0] or 1 << 30)]
        raise ConfigError("\n".join(problems), problems) from None
    config._source = path
    return config


def _describe(path: Path, text: str, error: Any) -> tuple[int | None, str]:
    """(line or None, "path:line: [section] key: message") for one pydantic error."""
    loc: tuple[str | int, ...] = tuple(error["loc"])
    message: str = error["msg"]
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, _KeyProblem):
        loc, message = loc + cause.loc, str(cause)
    elif message.startswith("Value error, "):
        message = message.removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = _unknown_key(loc, is_table=isinstance(error.get("input"), dict))
    elif error["type"] == "missing" and loc == ("office",):
        message = 'missing: every semo.toml has an [office] section with name = "..."'
    line = _find_line(text, loc)
    where = f"{path}:{line}" if line else f"{path}"
    name = _key_name(loc)
    if (
        error["type"] == "extra_forbidden"
        and len(loc) == 1
        and not isinstance(error.get("input"), dict)
    ):
        name = str(loc[0])  # a top-level `key = value`, not a section
    return line, f"{where}: {name}: {message}"


def _unknown_key(loc: tuple[str | int, ...], *, is_table: bool) -> str:
    if len(loc) == 1:
        model: type[BaseModel] = SemoConfig
        kind = "section" if is_table else "top-level key"
    else:
        model = _model_at(loc)
        kind = "key"
    known = list(model.model_fields)
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return f"unknown {kind} ({hint}known: {', '.join(known)})"


def _model_at(loc: tuple[str | int, ...]) -> type[BaseModel]:
    """The model whose key `loc[-1]` is: SemoConfig's fields followed down `loc` (list items
    and optional values unwrapped), so every section, `[[approvals.rules]]` too, names its own
    keys."""
    model: type[BaseModel] = SemoConfig
    for part in loc[:-1]:
        if isinstance(part, int):  # an item of [[agents]], [[notify]], [[approvals.rules]]
            continue
        field = model.model_fields.get(part)
        inner = _model_in(field.annotation) if field is not None else None
        if inner is None:
            break
        model = inner
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model in `X`, `list[X]` or `X | None`, or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _key_name(loc: tuple[str | int, ...]) -> str:
    """("pool", "max_sessions") -> "[pool] max_sessions"; ("agents", 1, "env") ->
    "[[agents]] #2 env"."""
    if not loc:
        return "(top level)"
    head, rest = loc[0], list(loc[1:])
    if head in _ARRAYS:
        section = f"[[{head}]]"
        if rest and isinstance(rest[0], int):
            section += f" #{rest[0] + 1}"
            del rest[0]
    else:
        section = f"[{head}]"
    key = ""
    for part in rest:
        key += f"[{part}]" if isinstance(part, int) else (f".{part}" if key else str(part))
    return f"{section} {key}" if key else section


_HEADER = re.compile(r"^\s*\[\s*([A-Za-z0-9_.-]+)\s*\]\s*(#.*)?$")
_ARRAY_HEADER = re.compile(r"^\s*\[\[\s*([A-Za-z0-9_.-]+)\s*\]\]\s*(#.*)?$")


def _find_line(text: str, loc: tuple[str | int, ...]) -> int | None:
    """Best effort: the 1-based line of the key at `loc` (or of its section), else None."""
    if not loc:
        return None
    if loc[0] in _ARRAYS and len(loc) > 1 and isinstance(loc[1], int):
        section: tuple[str | int, ...] = (loc[0], loc[1])
    else:
        section = (loc[0],)
    key = next((part for part in loc[len(section) :] if isinstance(part, str)), None)

    def in_section(table: tuple[str | int, ...]) -> bool:
        return table == section or (
            len(section) == 1 and section[0] in _ARRAYS and table[:1] == section
        )

    table: tuple[str | int, ...] = ()
    counts: dict[str, int] = {}
    header_line: int | None = None
    in_string = False
    for number, line in enumerate(text.splitlines(), start=1):
        odd_quotes = (line.count('"""') + line.count("'''")) % 2 == 1
        if in_string:
            in_string = not odd_quotes
            continue
        if (match := _ARRAY_HEADER.match(line)) is not None:
            name = match.group(1)
            table = (name, counts.get(name, 0))
            counts[name] = counts.get(name, 0) + 1
        elif (match := _HEADER.match(line)) is not None:
            table = (match.group(1),)
        else:
            if key is not None and table == section and _is_key_line(line, key):
                return number
            if table == () and len(section) == 1 and _is_key_line(line, str(section[0])):
                return number  # `pool = {...}` or `agents = [...]` at the top level
            in_string = odd_quotes
            continue
        if header_line is None and in_section(table):
            header_line = number
    return header_line


def _is_key_line(line: str, key: str) -> bool:
    return re.match(rf"""^\s*(["']?){re.escape(key)}\1\s*=""", line) is not None


# -- semo init --------------------------------------------------------------------------------


def init_config(path: Path, *, force: bool = False) -> Path:
    """Write :data:`EXAMPLE_CONFIG` to `path` (or `path/semo.toml` when `path` is a folder) and
    return where it went. An existing file is kept unless `force` (ConfigError)."""
    path = Path(path).expanduser()
    if path.is_dir():
        path = path / CONFIG_FILENAME
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if force:  # 0600 either way: the file may come to hold secrets (SECURITY.md)
            atomic_write(path, EXAMPLE_CONFIG, mode=0o600)
        else:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(EXAMPLE_CONFIG)
    except FileExistsError:
        raise ConfigError(
            f"{path}: already exists; not overwritten (use --force to replace it)"
        ) from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot write: {error.strerror or error}") from None
    return path


EXAMPLE_CONFIG = r'''# semo.toml: the configuration of one semo office, written by `semo init`.
#
# Every key is shown with its default; a key left out (or commented out with #) takes the
# default. Relative paths are relative to this file's folder; ~ is expanded. Unknown keys are an
# error. The reference is docs/CONFIG.md. Run the office with: semo engine --config semo.toml
#
# Secrets belong in the environment, not in this file: SEMO_DATABASE_URL (postgres),
# SUPABASE_URL and SUPABASE_SERVICE_ROLE_KEY (supabase). The environment wins over the file.

[office]
# The office's name in the store and the console (required, 1-200 characters).
name = "my-office"
# The git repository the agents' worktrees are made from. Default: "." (this file's folder).
repository = "."
# Where the worktrees go: {workspace_root}/agent/{role}/{task_id}.
# Default: $XDG_DATA_HOME/semo/workspace, else ~/.local/share/semo/workspace.
# workspace_root = "~/.local/share/semo/workspace"

[store]
# Where offices, sessions, commands and questions are kept: "sqlite" (embedded, one machine),
# "postgres" (several engines; needs SEMO_DATABASE_URL) or "supabase" (needs SUPABASE_URL and
# SUPABASE_SERVICE_ROLE_KEY). SEMO_STORE overrides it. Default: "sqlite".
backend = "sqlite"
# sqlite: the database file. SEMO_SQLITE_PATH overrides it.
# Default: $XDG_STATE_HOME/semo/semo.db, else ~/.local/state/semo/semo.db.
# sqlite_path = "~/.local/state/semo/semo.db"
# postgres: the connection string. Default: none. SEMO_DATABASE_URL overrides it; a password
# written here gives a warning.
# database_url = "postgresql://postgres@127.0.0.1:5432/semo"
# supabase: the project URL (SUPABASE_URL overrides it) and the service-role key (keep it in
# SUPABASE_SERVICE_ROLE_KEY: a key written here gives a warning). Default: none.
# supabase_url = "https://PROJECT.supabase.co"
# supabase_key = "..."
# postgres: the most connections this engine opens at once (1-100). An idle engine holds
# one; a burst opens more and gives them back after 2 s unused. SEMO_PG_POOL_SIZE overrides
# it. Default: 4.
pool_size = 4
# postgres: "transaction" when database_url is a transaction-mode pooler (PgBouncer,
# Supabase's port 6543): no prepared statements or session settings, and new rows are
# polled for instead of LISTENed to. SEMO_PG_POOLER overrides it. Default: "session".
pooler = "session"
# postgres: how the engine hears of new rows: "poll" (a cheap read every 0.2 s on its one
# idle connection) or "listen" (LISTEN/NOTIFY, at once, on a second connection it holds;
# not through a transaction-mode pooler). SEMO_PG_WAKEUPS overrides it. Default: "poll".
wakeups = "poll"
# supabase: the most Realtime broadcasts (engine events) this engine sends a second, its
# share of the plan's message budget (Free 100/s, Pro 500/s; each delivery counts:
# docs/SUPABASE.md). What goes over is dropped, not queued. Default: no cap.
# realtime_broadcasts_per_second = 10

[engine]
# This engine's name in command claims and leases. Default: "" = <hostname>-<pid>.
id = ""
# Log lines as "text" (for people) or "json" (one object a line, for collectors).
# Default: "text".
log_format = "text"
# Seconds a command may take before it fails as timed out (> 0). Default: 30.0.
command_timeout = 30.0
# Seconds a claimed command stays this engine's without renewal; the engine renews its
# leases well before that, and another engine takes over a command whose lease expired.
# Default: 30.0.
lease_seconds = 30.0
# Seconds without a heartbeat (> 0) after which the other engines of the office take
# this one for dead and take over its work: its sessions ended, its running jobs retried.
# It records that it is alive every failover_seconds / 4; an engine of the same machine
# whose process has exited is taken over at once. Default: 12.0 (3 x lease_seconds when
# that is shorter).
# failover_seconds = 12.0
# Seconds agents get to exit on shutdown before they are killed. Default: 10.0.
shutdown_grace = 10.0
# Seconds a busy agent may print nothing before it is reported "stale" (a warning in the
# console and the logs, never taken as "done"). [[agents]] stale_after overrides it.
# Default: 30.0.
stale_after = 30.0
# Jobs (run_job commands) this engine runs at once, 1-256: a budget of their own, so jobs
# waiting for a session never hold the slots of the commands that free one. Default: 8.
max_jobs = 8

[pool]
# At most this many agent sessions run at once in this office (1-64). Default: 6.
max_sessions = 6
# Roles that get a session as soon as the office starts (warm); other roles start on demand
# (cold). Each must be the role of an [[agents]] entry. Default: ["FE", "BE", "QA"].
warm_roles = ["FE", "BE", "QA"]
# Seconds an idle cold session lives before it is stopped. Default: 600.0.
idle_timeout = 600.0
# A crashed session is restarted; this many crashes within restart_window seconds stop the
# restarts (the circuit breaker opens) for restart_cooldown seconds, then one restart is
# tried. Defaults: 3, 60.0, 30.0.
restart_failures = 3
restart_window = 60.0
restart_cooldown = 30.0

[budgets]
# What one agent may make semo store and queue per `window` seconds, over all its turns and
# sessions (docs/SECURITY.md). Past a budget its message is refused and not stored: an event
# on the bus and in the console, a log line, and one note per window typed into the agent if
# it reads prompts. Defaults below.
window = 60.0
# Protocol messages read from its screen or hooks (malformed ones too).
messages = 120
# Questions (ASK_USER), invocations (INVOKE) and results (DELIVER_RESULT) stored.
questions = 20
invocations = 30
results = 30
# Bytes of text stored for it (questions, tasks and contexts, summaries and payloads).
bytes = 4194304
# semo's own prompts (results, feedback) waiting to be typed into one session: more feedback
# is dropped, more results wait in the store.
queued_prompts = 16

[api]
# The Sessions REST API (docs/API.md). HOST:PORT that `semo engine` serves it on (also
# `semo engine --http HOST:PORT`, or `semo api` alone). Default: "" = not served.
listen = ""
# Tokens: SEMO_API_TOKEN is this office's token, SEMO_API_TOKENS a JSON object
# {"office name or id": "token"} for more offices of the store. Keep them in the environment:
# a token written here gives a warning. At least 16 characters. Defaults: none.
# token = "..."
# tokens = { other-office = "..." }
# Seconds a write waits for its command's result at least; it always waits past the command's
# own limit ([engine] command_timeout, or a prompt's timeout) + 5 s. Default: 30.0.
wait_timeout = 30.0
# Larger request bodies get 413. Default: 1048576 (1 MiB).
max_body_bytes = 1048576

[git]
# Each job gets a branch semo/job/<id> from the base branch as it is when the job starts
# (docs/JOBS.md "Shipping a job's work"). Default: "" = the repository's checked-out branch.
base_branch = ""
# The git identity of the agents' commits (and of semo's commits of their leftovers);
# {role}, {role_lower} and {name} are the agent's. Defaults below.
author_name = "semo {role}"
author_email = "{role_lower}@agents.semo.invalid"

[ship]
# Shipping a job's work (docs/JOBS.md): `semo job ship ID --push/--pr/--merge`.
# The remote a push goes to: a remote's name, or a URL or path. Default: "origin".
remote = "origin"
# Steps the engine runs by itself when a job is done: any of "push", "pr" (pushes first),
# "merge" (into the job's base branch, locally). Default: [] (none: ship by hand).
on_done = []
# How a pull request is opened: "gh" (the GitHub CLI, logged in), "api" (GitHub's REST API
# with a token), or "auto": gh when it is installed and logged in, else the API.
pr_tool = "auto"
# GitHub's REST API; for GitHub Enterprise "https://HOST/api/v3". Default: api.github.com.
github_api_url = "https://api.github.com"
# The repository pull requests go to, "owner/name". Default: "" = from the remote's URL.
github_repo = ""
# The API's token: keep it in GITHUB_TOKEN (or GH_TOKEN) in the engine's environment; one
# written here gives a warning. Default: none.
# github_token = "..."

# Notifications: one [[notify]] table per sink, any number (docs/NOTIFY.md). Without any,
# attached consoles show desktop notifications (OSC 9 / OSC 777) and ring. Events: question,
# permission, job_done, job_failed, job_review, agent_error, agent_stale, engine_died,
# breaker_open. Default events: all but agent_stale. `semo notify test` tries every sink.
# Secrets as ${VARIABLE}: read from the engine's environment, never written here.
#
# [[notify]]
# sink = "console"               # every attached console: desktop notification and bell
#
# [[notify]]
# sink = "webhook"               # a JSON POST; format = "slack" sends {"text": ...} only
# url = "${SLACK_WEBHOOK_URL}"
# format = "slack"
# events = ["question", "permission", "job_failed", "job_review", "engine_died"]
# delay = 60.0                   # seconds a question waits before this sink hears of it
# max_messages = 5               # per window seconds; the rest become one summary
# window = 60.0
# timeout = 10.0                 # per attempt; retries (3) with backoff (2 s, doubled)
#
# [[notify]]
# sink = "ntfy"                  # a topic URL (ntfy.sh or your own server)
# url = "https://ntfy.sh/my-semo-topic"
#
# [[notify]]
# sink = "email"                 # SMTP with STARTTLS (tls = true: implicit TLS) and login
# host = "smtp.example.com"
# port = 587
# username = "semo@example.com"
# password = "${SMTP_PASSWORD}"
# from_addr = "semo@example.com"
# to = ["me@example.com"]
#
# [[notify]]
# sink = "command"               # gets the notification as JSON on stdin
# command = ["notify-send-json"]

[approvals]
# An agent's Claude Code asks before it runs a tool its permission mode does not allow; semo
# brings the request to the inbox (console F4, `semo questions`, the REST API, Supabase):
# allow once, allow for the rest of the session (the same tool and input), or deny with a
# reason the agent reads. Minutes a request waits for a person before it is denied; without
# it the request waits until someone answers. When semo cannot answer (no engine) Claude
# Code's own dialog asks. Default: none (wait).
# deny_after_minutes = 30
#
# Rules decide requests without asking anyone, first match wins: tool (a glob on Claude
# Code's tool name: Bash, Read, Edit, Write, ...), pattern (a glob on the command, or the file
# for file tools; an allowed Bash command never holds ; & | ` < > $( unless the pattern
# does), within_worktree (only paths inside the agent's own worktree), roles (default: all),
# decision "allow" or "deny", reason (sent to the agent with a denial), name (on the job's
# timeline). Default: none.
# [[approvals.rules]]
# name = "git status"
# tool = "Bash"
# pattern = "git status*"
# decision = "allow"
#
# [[approvals.rules]]
# name = "reads in the worktree"
# tool = "Read"
# within_worktree = true
# decision = "allow"
#
# [[approvals.rules]]
# name = "no pushes"
# roles = ["FE", "BE"]
# tool = "Bash"
# pattern = "git push*"
# decision = "deny"
# reason = "Pushing is the operator's job: commit and say so."

# One [[agents]] table per persona. Keys:
#   role            required; a letter, then up to 31 letters, digits, _ or -; unique
#   name            shown in the console. Default: the role
#   profile         "claude" (Claude Code CLI, read through its hooks) or "generic" (any
#                   program, read from the screen). Default: "claude"
#   command         the program and its arguments. Default: ["claude"]
#   prompt          the persona, written into the worktree's .claude/CLAUDE.md together with
#                   the protocol the agents speak. Default: ""
#   scope_patterns  the files this agent works on (glob patterns). Default: []
#   core_skills     what it is good at, shown to the other agents. Default: []
#   prompt_pattern  generic profile only: a regular expression that matches the cursor row
#                   when the program waits for input (`$ `, `> `, `❯`, bash's `bash-5.2# `,
#                   `user@host:~/dir$ `). Default:
#                   '(^|\s)([\w.]+-\d+(\.\d+)*|[\w.-]+@[\w.-]+:\S*)?[❯$#>%]$'
#   env             extra environment variables: NAME = "value", or NAME = "${VAR}" for the
#                   engine's own VAR. Credentials (PG*, AWS_*, GITHUB_TOKEN, *_TOKEN, ...) are
#                   not inherited: name them here to pass them. SEMO_* and SUPABASE_* are
#                   refused (agents never get the engine's credentials). Default: {}
#   cols, rows      the terminal size. Defaults: 120, 40
#   stale_after     seconds of silence while busy before "stale". Default: [engine]'s
#   reads_prompts   whether the program reads typed text as a prompt for a model: semo's
#                   feedback on a refused protocol message is typed only then (a shell would
#                   run it). Default: true for claude, false for generic
#   permission_mode Claude Code's permission mode, written to the worktree's settings:
#                   "default" (asks before commands and edits: the inbox), "acceptEdits",
#                   "plan", "auto", "dontAsk" or "bypassPermissions". Default: none (Claude
#                   Code's own default, auto in 2.1.328, or your settings')

[[agents]]
role = "FE"
name = "Frontend"
profile = "claude"
command = ["claude"]
prompt = """
You are the frontend engineer of this team. You build the user interface: components, pages,
styles and their tests. Keep the UI accessible and consistent with what is already there.
When you need an API that does not exist yet, ask the BE agent for it instead of faking it.
"""
scope_patterns = ["web/**", "ui/**", "*.css"]
core_skills = ["typescript", "react", "css", "accessibility"]
env = {}
cols = 120
rows = 40

[[agents]]
role = "BE"
name = "Backend"
profile = "claude"
command = ["claude"]
prompt = """
You are the backend engineer of this team. You build the server side: APIs, data models,
migrations and their tests. Keep interfaces small and documented, and tell the FE agent
exactly what changed when an API changes.
"""
scope_patterns = ["api/**", "server/**", "migrations/**"]
core_skills = ["python", "sql", "http apis"]
env = {}
cols = 120
rows = 40

[[agents]]
role = "QA"
name = "Quality"
profile = "claude"
command = ["claude"]
prompt = """
You are the QA engineer of this team. You write and run tests that show whether a change
works: unit, integration and end-to-end. Report failures with the exact steps to reproduce
them to the agent that owns the code; do not fix their code yourself.
"""
scope_patterns = ["tests/**", "e2e/**"]
core_skills = ["pytest", "playwright", "test design"]
env = {}
cols = 120
rows = 40
'''
