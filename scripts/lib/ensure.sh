# Idempotent installers shared by scripts/test and scripts/demo. Each step is a no-op when its
# tool is already present, so a warm machine pays only for the checks.

CLAUDE_CODE_VERSION="2.1.328"
PYTHON="${PYTHON:-python3}"

_sudo() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        echo "error: need root (or sudo) to run: $*" >&2; return 1; fi
}

_apt_updated=0
apt_install() {
    if ! command -v apt-get >/dev/null; then
        echo "error: $* missing and apt-get is not available; install them by hand" >&2
        return 1
    fi
    if [ "$_apt_updated" -eq 0 ]; then
        echo "==> apt-get update"
        _sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        _apt_updated=1
    fi
    echo "==> apt-get install $*"
    _sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

ensure_venv() {
    if [ -x .venv/bin/python ] && ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
        echo "==> .venv is incomplete (an interrupted creation?): creating it again"
        rm -rf .venv
    fi
    if [ ! -x .venv/bin/python ]; then
        echo "==> creating .venv"
        "$PYTHON" -m venv .venv
    fi
    local stamp=.venv/.semo-installed
    if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
        echo "==> installing semo[dev] into .venv"
        .venv/bin/python -m pip install -q --upgrade pip
        .venv/bin/python -m pip install -q -e '.[dev]'
        touch "$stamp"
    fi
}

ensure_system_tools() {
    local missing=()
    command -v tmux >/dev/null || missing+=(tmux)
    command -v vim >/dev/null || missing+=(vim)
    command -v less >/dev/null || missing+=(less)
    command -v top >/dev/null || missing+=(procps)
    command -v git >/dev/null || missing+=(git)
    command -v npm >/dev/null || missing+=(nodejs npm)
    command -v pg_isready >/dev/null || missing+=(postgresql-client)
    # PgBouncer in transaction mode: tests/support/pgbouncer.py starts a private one
    command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
    if [ "${#missing[@]}" -gt 0 ]; then apt_install "${missing[@]}"; fi
}

ensure_claude_cli() {
    if command -v claude >/dev/null && claude --version 2>/dev/null | grep -q "^${CLAUDE_CODE_VERSION} "; then
        return 0
    fi
    echo "==> installing @anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}"
    if [ "$(id -u)" -eq 0 ] || [ -w "$(npm prefix -g)/lib" ]; then
        npm install -g --silent "@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}" >/dev/null
    else
        npm install -g --silent --prefix "$PWD/.tools/npm" \
            "@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}" >/dev/null
        export PATH="$PWD/.tools/npm/bin:$PATH"
    fi
    claude --version
}

_pg_answers() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }

ensure_postgres() {
    if ! _pg_answers; then
        if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
            apt_install postgresql
        fi
        local ver
        ver=$(ls /etc/postgresql | sort -V | tail -n 1)
        echo "==> starting PostgreSQL $ver"
        _sudo pg_ctlcluster --skip-systemctl-redirect "$ver" main start || true
        for _ in $(seq 1 50); do _pg_answers && break; sleep 0.2; done
        if ! _pg_answers; then echo "error: PostgreSQL does not answer on 127.0.0.1:5432" >&2; return 1; fi
    fi
    # the server binaries (initdb, pg_ctl): tests/supabase/test_plain_cluster.py starts a
    # throwaway cluster without Supabase's roles, even when 5432 is answered from elsewhere
    if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null; then
        apt_install postgresql
    fi
    local ver
    ver=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)
    if [ -n "$ver" ] && [ ! -e "/usr/lib/postgresql/$ver/lib/wal2json.so" ]; then
        apt_install "postgresql-$ver-wal2json"
    fi
}

# The suite's independent client: @supabase/supabase-js (and ws, for Node without a global
# WebSocket), pinned by tests/js/package-lock.json, installed into tests/js/node_modules.
ensure_js_client() {
    local dir=tests/js
    local stamp="$dir/node_modules/.semo-installed"
    if ! command -v npm >/dev/null; then apt_install nodejs npm; fi
    if [ ! -f "$stamp" ] || [ "$dir/package-lock.json" -nt "$stamp" ]; then
        echo "==> installing $dir's npm packages (@supabase/supabase-js)"
        (cd "$dir" && npm ci --no-audit --no-fund --silent)
        touch "$stamp"
    fi
}
