"""The PostgREST subset under `/rest/v1`, written from PostgREST's public API documentation.

Tables and functions are whatever the exposed schemas hold (introspected, see `schema.py`).

- `GET|HEAD /<table>`: `select=` (`*`, columns, `alias:col`, `col::cast`, `col->key`/`->>key`),
  filters `col=[not.]op.value` with eq neq gt gte lt lte like ilike match imatch in is isdistinct
  cs cd ov fts plfts phfts wfts (and the `(any)`/`(all)` modifiers), `or=(...)`/`and=(...)` trees
  (nested, negatable), `order=col.asc|desc[.nullsfirst|.nullslast],...`, `limit`, `offset`,
  `Prefer: count=exact|planned|estimated` (Content-Range total).
- `POST /<table>`: one object or an array (`columns=` honoured, missing keys become NULL unless
  `Prefer: missing=default`), upsert with `Prefer: resolution=merge-duplicates|ignore-duplicates`
  and `on_conflict=`; `PATCH` and `DELETE` with filters. `Prefer: return=representation|minimal|
  headers-only` (minimal is the default, as in PostgREST).
- `Accept: application/vnd.pgrst.object+json` (`.single()`): exactly one row or 406 PGRST116;
  a write that would not return exactly one row is rolled back.
- `POST|GET /rpc/<fn>`: named JSON arguments (converted with `json_to_record`, as PostgREST does)
  or one unnamed json/jsonb parameter; scalar, composite, set-returning and void functions;
  filters/order/limit apply to set-returning results. GET runs in a READ ONLY transaction.
- Errors: `{"code","message","details","hint"}` with PostgREST's SQLSTATE → HTTP status table
  (23505/23503 → 409, 42P01/42883 → 404, 42501 → 401 for anon else 403, P0001 → 400,
  a custom `PTnnn` SQLSTATE → HTTP nnn, ...),
  PGRST100 (bad query, 400), PGRST102 (bad body, 400), PGRST106 (schema, 406),
  PGRST116 (406), PGRST202 (no such function, 404), PGRST204 (no such column, 400),
  PGRST205 (no such table, 404).

Not emulated: embedded resources (`select=rel(*)`), aggregates, CSV/GeoJSON, `Range` headers,
`limit` on PATCH/DELETE, `Prefer: tx=rollback`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import psycopg
from psycopg import sql

from .http import Request, Response
from .schema import Function, SchemaCache, Table

OBJECT_MEDIA = "application/vnd.pgrst.object+json"
RESERVED = {"select", "order", "limit", "offset", "columns", "on_conflict"}
LOGIC_KEYS = {"or", "and", "not.or", "not.and"}
COMPARE = {
    "eq": "=",
    "neq": "<>",
    "gt": ">",
    "gte": ">=",
    "lt": "<",
    "lte": "<=",
    "like": "LIKE",
    "ilike": "ILIKE",
    "match": "~",
    "imatch": "~*",
    "isdistinct": "IS DISTINCT FROM",
    "cs": "@>",
    "cd": "<@",
    "ov": "&&",
    "sl": "<<",
    "sr": ">>",
    "nxr": "&<",
    "nxl": "&>",
    "adj": "-|-",
}
FTS = {
    "fts": "to_tsquery",
    "plfts": "plainto_tsquery",
    "phfts": "phraseto_tsquery",
    "wfts": "websearch_to_tsquery",
}
OPERATOR_RE = re.compile(r"^(?P<op>[a-z]+)(?:\((?P<arg>[^)]*)\))?$")
CAST_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_ ]*(\[\])?$")


class RestError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.hint = hint

    def response(self) -> Response:
        return Response.json(
            self.status,
            {
                "code": self.code,
                "details": self.details,
                "hint": self.hint,
                "message": self.message,
            },
        )


def bad_query(message: str, details: str | None = None) -> RestError:
    return RestError(400, "PGRST100", message, details)


def status_for_sqlstate(code: str | None, anonymous: bool) -> int:
    """PostgREST's table "PostgreSQL error code(s) → HTTP status"."""
    if not code:
        return 500
    if re.fullmatch(r"PT\d{3}", code):  # RAISE ... USING ERRCODE = 'PT404' picks the status
        return int(code[2:])
    exact = {
        "23503": 409,
        "23505": 409,
        "25006": 405,
        "53400": 500,
        "P0001": 400,
        "42883": 404,
        "42P01": 404,
        "42P17": 500,
    }
    if code in exact:
        return exact[code]
    if code == "42501":
        return 401 if anonymous else 403
    prefixes = {
        "08": 503, "09": 500, "0L": 403, "0P": 403, "25": 500, "28": 403, "2D": 500,
        "38": 500, "39": 500, "3B": 500, "40": 500, "53": 503, "54": 500, "55": 500,
        "57": 500, "58": 500, "F0": 500, "HV": 500, "P0": 500, "XX": 500,
    }  # fmt: skip
    return prefixes.get(code[:2], 400)


def from_database_error(error: psycopg.Error, anonymous: bool) -> RestError:
    diag = error.diag
    code = error.sqlstate
    message = diag.message_primary or str(error).strip()
    return RestError(
        status_for_sqlstate(code, anonymous),
        code or "XX000",
        message,
        diag.message_detail,
        diag.message_hint,
    )


# -- parsing ----------------------------------------------------------------------------------


def split_top(text: str, sep: str = ",") -> list[str]:
    """Split on `sep` outside parentheses, braces and double quotes."""
    parts, current, depth, quoted, escaped = [], [], 0, False, False
    for char in text:
        if escaped:
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif not quoted and char in "({":
            depth += 1
        elif not quoted and char in ")}":
            depth -= 1
        elif char == sep and depth == 0 and not quoted:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return parts


def unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


@dataclass(frozen=True)
class ColumnRef:
    name: str
    path: tuple[tuple[str, str | int], ...] = ()

    def output_name(self) -> str:
        if self.path:
            key = self.path[-1][1]
            return str(key)
        return self.name

    def sql(self, alias: str = "_t") -> sql.Composable:
        expr: sql.Composable = sql.SQL("{}.{}").format(
            sql.Identifier(alias), sql.Identifier(self.name)
        )
        for arrow, key in self.path:
            expr = sql.SQL("({} {} {})").format(expr, sql.SQL(arrow), sql.Literal(key))
        return expr


def parse_column(text: str) -> ColumnRef:
    text = text.strip()
    pieces = re.split(r"(->>|->)", text)
    name = unquote(pieces[0])
    if not name:
        raise bad_query(f'"failed to parse column {text!r}"')
    path: list[tuple[str, str | int]] = []
    for arrow, key in zip(pieces[1::2], pieces[2::2], strict=True):
        key = unquote(key.strip("'"))
        path.append((arrow, int(key) if re.fullmatch(r"-?\d+", key) else key))
    return ColumnRef(name, tuple(path))


@dataclass(frozen=True)
class Condition:
    column: ColumnRef
    operator: str
    modifier: str | None
    value: str
    negate: bool


@dataclass(frozen=True)
class Logic:
    kind: str  # "and" | "or"
    children: tuple[Condition | Logic, ...]
    negate: bool


def parse_condition(column: str, expression: str, in_tree: bool = False) -> Condition:
    negate = False
    if expression.startswith("not."):
        negate, expression = True, expression[4:]
    operator, dot, value = expression.partition(".")
    match = OPERATOR_RE.match(operator)
    if not dot or match is None:
        raise bad_query(
            f'"failed to parse filter ({expression})" (line 1, column {len(operator) + 1})',
            "unexpected end of input expecting operator",
        )
    op, modifier = match.group("op"), match.group("arg")
    if op not in COMPARE and op not in FTS and op not in ("in", "is"):
        raise bad_query(f'"failed to parse filter ({expression})"', f"unknown operator {op!r}")
    if in_tree and op not in ("in",):
        value = unquote(value)
    return Condition(parse_column(column), op, modifier, value, negate)


def parse_logic(key: str, value: str) -> Logic:
    negate = key.startswith("not.")
    kind = key.removeprefix("not.")
    value = value.strip()
    if not (value.startswith("(") and value.endswith(")")):
        raise bad_query(f'"failed to parse logic tree ({value})"')
    children: list[Condition | Logic] = []
    for item in split_top(value[1:-1]):
        item = item.strip()
        nested = re.match(r"^(not\.)?(and|or)(\(.*\))$", item, re.S)
        if nested:
            children.append(
                parse_logic(f"{nested.group(1) or ''}{nested.group(2)}", nested.group(3))
            )
            continue
        column, expression = _split_column(item)
        children.append(parse_condition(column, expression, in_tree=True))
    return Logic(kind, tuple(children), negate)


def _split_column(item: str) -> tuple[str, str]:
    """`col->>key.eq.value` -> (`col->>key`, `eq.value`); column names may be double-quoted."""
    quoted = False
    for index, char in enumerate(item):
        if char == '"':
            quoted = not quoted
        elif char == "." and not quoted:
            # a dot right after an arrow key belongs to the operator part anyway
            return item[:index], item[index + 1 :]
    raise bad_query(f'"failed to parse logic tree ({item})"')


def parse_list(value: str) -> list[str]:
    value = value.strip()
    if not (value.startswith("(") and value.endswith(")")):
        raise bad_query(f'"failed to parse filter (in.{value})"', 'expecting "("')
    inner = value[1:-1]
    if not inner.strip():
        return []
    return [unquote(item) for item in split_top(inner)]


@dataclass(frozen=True)
class SelectItem:
    star: bool = False
    column: ColumnRef | None = None
    alias: str | None = None
    cast: str | None = None

    def key(self) -> str:
        assert self.column is not None
        return self.alias or self.column.output_name()


def parse_select(text: str | None) -> list[SelectItem]:
    if text is None or not text.strip():
        return [SelectItem(star=True)]
    items = []
    for raw in split_top(text):
        raw = raw.strip()
        if raw == "*":
            items.append(SelectItem(star=True))
            continue
        if "(" in raw:
            raise bad_query(
                f'"failed to parse select parameter ({text})"',
                "the emulator does not support embedded resources or aggregates",
            )
        alias = None
        parts = re.split(r"(?<!:):(?!:)", raw, maxsplit=1)
        if len(parts) == 2:
            alias, raw = unquote(parts[0]), parts[1]
        cast = None
        if "::" in raw:
            raw, cast = raw.split("::", 1)
            if not CAST_RE.match(cast):
                raise bad_query(
                    f'"failed to parse select parameter ({text})"', f"bad cast {cast!r}"
                )
        items.append(SelectItem(column=parse_column(raw), alias=alias, cast=cast))
    return items


@dataclass(frozen=True)
class OrderItem:
    column: ColumnRef
    desc: bool
    nulls: str | None


def parse_order(text: str) -> list[OrderItem]:
    items = []
    for raw in split_top(text):
        tokens = raw.strip().split(".")
        nulls = desc = None
        if tokens and tokens[-1] in ("nullsfirst", "nullslast"):
            nulls = tokens.pop()
        if tokens and tokens[-1] in ("asc", "desc"):
            desc = tokens.pop() == "desc"
        column = ".".join(tokens)
        if not column:
            raise bad_query(f'"failed to parse order ({text})"')
        items.append(OrderItem(parse_column(column), bool(desc), nulls))
    return items


@dataclass
class Query:
    select: list[SelectItem]
    filters: list[Condition | Logic]
    order: list[OrderItem]
    limit: int | None
    offset: int | None
    columns: list[str] | None
    on_conflict: list[str] | None
    extra: list[tuple[str, str]]  # parameters that are neither reserved nor filters (RPC GET args)


def parse_query(query: str, filter_names: set[str] | None = None) -> Query:
    """`filter_names`: for RPC GET, parameters named like function arguments are arguments."""
    params = parse_qsl(query, keep_blank_values=True)
    result = Query([SelectItem(star=True)], [], [], None, None, None, None, [])
    for key, value in params:
        if key == "select":
            result.select = parse_select(value)
        elif key == "order":
            result.order = parse_order(value)
        elif key in ("limit", "offset"):
            try:
                number = int(value)
            except ValueError:
                raise bad_query(f'"failed to parse {key} parameter ({value})"') from None
            setattr(result, key, number)
        elif key == "columns":
            result.columns = [unquote(c) for c in split_top(value) if c.strip()]
        elif key == "on_conflict":
            result.on_conflict = [unquote(c) for c in split_top(value) if c.strip()]
        elif key in LOGIC_KEYS:
            result.filters.append(parse_logic(key, value))
        elif filter_names is not None and key in filter_names:
            result.extra.append((key, value))
        elif "." in key.replace("->>", "").replace("->", "") and not key.startswith('"'):
            raise bad_query(
                f'"failed to parse filter ({key})"',
                "the emulator does not support filters on embedded resources",
            )
        else:
            result.filters.append(parse_condition(key, value))
    return result


# -- SQL building -----------------------------------------------------------------------------


class SqlBuilder:
    def __init__(self, table: Table | None) -> None:
        self.table = table
        self.params: list[Any] = []

    def column(self, ref: ColumnRef) -> sql.Composable:
        if self.table is not None and ref.name not in self.table.columns:
            raise RestError(
                400,
                "42703",
                f"column {self.table.name}.{ref.name} does not exist",
                hint=None,
            )
        return ref.sql()

    def param(self, value: Any) -> sql.Composable:
        self.params.append(value)
        return sql.Placeholder()

    def condition(self, node: Condition | Logic) -> sql.Composable:
        if isinstance(node, Logic):
            joiner = sql.SQL(" AND " if node.kind == "and" else " OR ")
            inner = (
                joiner.join(self.condition(child) for child in node.children)
                if node.children
                else sql.SQL("TRUE")
            )
            expr = sql.SQL("({})").format(inner)
        else:
            expr = self._condition(node)
        return sql.SQL("NOT {}").format(expr) if node.negate else expr

    def _condition(self, node: Condition) -> sql.Composable:
        lhs = self.column(node.column)
        op, value = node.operator, node.value
        if op == "is":
            keyword = {
                "null": "NULL",
                "not_null": "NOT NULL",
                "true": "TRUE",
                "false": "FALSE",
                "unknown": "UNKNOWN",
            }.get(value.lower())
            if keyword is None:
                raise bad_query(
                    f'"failed to parse filter (is.{value})"',
                    "unexpected value, expecting null, not_null, true, false or unknown",
                )
            return sql.SQL("({} IS {})").format(lhs, sql.SQL(keyword))
        if op == "in":
            items = parse_list(value)
            if not items:
                return sql.SQL("FALSE")
            values = sql.SQL(", ").join(self.param(item) for item in items)
            return sql.SQL("({} IN ({}))").format(lhs, values)
        if op in FTS:
            config = node.modifier
            if config:
                return sql.SQL("({} @@ {}({}::regconfig, {}))").format(
                    lhs, sql.SQL(FTS[op]), self.param(config), self.param(value)
                )
            return sql.SQL("({} @@ {}({}))").format(lhs, sql.SQL(FTS[op]), self.param(value))
        symbol = sql.SQL(COMPARE[op])
        if op in ("like", "ilike"):
            value = value.replace("*", "%")
        if node.modifier in ("any", "all"):
            if op in ("like", "ilike"):
                value = value.replace("*", "%")
            return sql.SQL("({} {} {}({}))").format(
                lhs, symbol, sql.SQL(node.modifier.upper()), self.param(value)
            )
        if node.modifier:
            raise bad_query(f'"failed to parse filter ({op}({node.modifier}))"')
        return sql.SQL("({} {} {})").format(lhs, symbol, self.param(value))

    def where(self, filters: list[Condition | Logic]) -> sql.Composable:
        if not filters:
            return sql.SQL("TRUE")
        return sql.SQL(" AND ").join(self.condition(f) for f in filters)

    def order(self, items: list[OrderItem]) -> sql.Composable:
        if not items:
            return sql.SQL("")
        parts = []
        for item in items:
            part = sql.SQL("{} {}").format(
                self.column(item.column), sql.SQL("DESC" if item.desc else "ASC")
            )
            if item.nulls:
                part = sql.SQL("{} {}").format(
                    part, sql.SQL("NULLS FIRST" if item.nulls == "nullsfirst" else "NULLS LAST")
                )
            parts.append(part)
        return sql.SQL(" ORDER BY {}").format(sql.SQL(", ").join(parts))

    def projection(self, items: list[SelectItem]) -> sql.Composable:
        if all(item.star for item in items):
            return sql.SQL("row_to_json(_t)")
        pairs: list[sql.Composable] = []
        for item in items:
            if item.star:
                if self.table is None:
                    raise bad_query("the emulator cannot mix * with columns on a function result")
                for name in self.table.columns:
                    pairs += [sql.Literal(name), ColumnRef(name).sql()]
                continue
            assert item.column is not None
            expr = self.column(item.column)
            if item.cast:
                expr = sql.SQL("CAST({} AS {})").format(expr, sql.SQL(item.cast))
            pairs += [sql.Literal(item.key()), expr]
        return sql.SQL("json_build_object({})").format(sql.SQL(", ").join(pairs))


# -- request handling -------------------------------------------------------------------------


@dataclass
class Auth:
    role: str
    claims: dict[str, Any]

    @property
    def anonymous(self) -> bool:
        return self.role == "anon"


def preferences(request: Request) -> dict[str, str]:
    prefs: dict[str, str] = {}
    for header in request.header_all("prefer"):
        for part in header.split(","):
            key, _, value = part.strip().partition("=")
            if key:
                prefs[key] = value
    return prefs


def wants_object(request: Request) -> bool:
    accept = request.header("accept") or ""
    return any(part.strip().startswith(OBJECT_MEDIA) for part in accept.split(","))


def json_array(rows: list[str]) -> bytes:
    return ("[" + ",".join(rows) + "]").encode()


def single_error(count: int) -> RestError:
    return RestError(
        406,
        "PGRST116",
        "Cannot coerce the result to a single JSON object",
        f"The result contains {count} rows",
    )


Work = Callable[[psycopg.AsyncConnection], Awaitable[Response]]


class Postgrest:
    def __init__(
        self,
        pool: Any,
        cache: SchemaCache,
        reload: Callable[[], Awaitable[None]],
        switch_roles: bool,
        max_rows: int | None = None,
    ) -> None:
        self.pool = pool
        self.cache = cache
        self.reload = reload
        self.switch_roles = switch_roles
        #: Supabase's "Max rows" (PostgREST db-max-rows): no read answers more rows than this
        self.max_rows = max_rows

    def _capped(self, limit: int | None) -> int | None:
        if self.max_rows is None:
            return limit
        return self.max_rows if limit is None else min(max(limit, 0), self.max_rows)

    async def handle(self, request: Request, rest_path: str, auth: Auth) -> Response:
        try:
            schema = self._schema(request)
            if rest_path.startswith("rpc/"):
                return await self._rpc(request, schema, rest_path[4:], auth)
            if not rest_path or "/" in rest_path:
                if request.method in ("GET", "HEAD") and not rest_path:
                    return Response.json(200, {"swagger": "2.0", "info": {"title": "emulator"}})
                raise RestError(
                    404, "PGRST125", f"Invalid path specified in request URL: {rest_path}"
                )
            return await self._table(request, schema, rest_path, auth)
        except RestError as error:
            return error.response()

    def _schema(self, request: Request) -> str:
        header = "accept-profile" if request.method in ("GET", "HEAD") else "content-profile"
        schema = request.header(header) or self.cache.schemas[0]
        if schema not in self.cache.schemas:
            raise RestError(
                406,
                "PGRST106",
                "Invalid schema: " + schema,
                hint="Only the following schemas are exposed: " + ", ".join(self.cache.schemas),
            )
        return schema

    async def _run(self, request: Request, auth: Auth, work: Work, read_only: bool) -> Response:
        async with self.pool.connection() as conn:
            try:
                # pipeline mode: BEGIN, the settings and the statement travel together
                async with conn.pipeline(), conn.transaction():
                    if read_only:
                        await conn.execute("SET TRANSACTION READ ONLY")
                    await self._set_context(conn, request, auth)
                    return await work(conn)
            except psycopg.Error as error:
                raise from_database_error(error, auth.anonymous) from None

    async def _set_context(
        self, conn: psycopg.AsyncConnection, request: Request, auth: Auth
    ) -> None:
        claims = json.dumps(auth.claims)
        await conn.execute(
            "SELECT set_config('request.jwt.claims', %s, true),"
            " set_config('request.jwt.claim.role', %s, true),"
            " set_config('request.jwt.claim.sub', %s, true),"
            " set_config('request.method', %s, true),"
            " set_config('request.path', %s, true)",
            [claims, auth.role, str(auth.claims.get("sub") or ""), request.method, request.path],
        )
        if self.switch_roles:
            await conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(auth.role)))

    async def _lookup_table(self, schema: str, name: str) -> Table:
        table = self.cache.table(schema, name)
        if table is None:
            await self.reload()
            table = self.cache.table(schema, name)
        if table is None:
            similar = self.cache.similar_table(schema, name)
            raise RestError(
                404,
                "PGRST205",
                f"Could not find the table '{schema}.{name}' in the schema cache",
                hint=f"Perhaps you meant the table '{similar}'" if similar else None,
            )
        return table

    # -- tables ---------------------------------------------------------------------------------

    async def _table(self, request: Request, schema: str, name: str, auth: Auth) -> Response:
        table = await self._lookup_table(schema, name)
        query = parse_query(request.query)
        prefs = preferences(request)
        single = wants_object(request)
        method = request.method
        if method in ("GET", "HEAD"):
            return await self._select(request, table, query, prefs, single, auth)
        if method in ("PATCH", "DELETE") and (query.limit is not None or query.offset is not None):
            raise bad_query("the emulator does not support limit/offset on PATCH or DELETE")
        if method == "POST":
            return await self._insert(request, table, query, prefs, single, auth)
        if method == "PATCH":
            return await self._update(request, table, query, prefs, single, auth)
        if method == "DELETE":
            return await self._delete(request, table, query, prefs, single, auth)
        raise RestError(405, "PGRST117", f"Unsupported HTTP method: {method}")

    async def _select(
        self,
        request: Request,
        table: Table,
        query: Query,
        prefs: dict[str, str],
        single: bool,
        auth: Auth,
    ) -> Response:
        builder = SqlBuilder(table)
        target = sql.SQL("{}.{}").format(sql.Identifier(table.schema), sql.Identifier(table.name))
        projection = builder.projection(query.select)
        where = builder.where(query.filters)
        order = builder.order(query.order)
        statement = sql.SQL("SELECT ({})::text FROM {} AS _t WHERE {}{}").format(
            projection, target, where, order
        )
        params = list(builder.params)
        limit = self._capped(query.limit)
        if limit is not None:
            statement = sql.SQL("{} LIMIT {}").format(statement, sql.Literal(max(limit, 0)))
        if query.offset:
            statement = sql.SQL("{} OFFSET {}").format(statement, sql.Literal(max(query.offset, 0)))
        counting = prefs.get("count") in ("exact", "planned", "estimated")
        count_statement = sql.SQL("SELECT count(*) FROM {} AS _t WHERE {}").format(target, where)

        async def work(conn: psycopg.AsyncConnection) -> Response:
            rows = [r[0] for r in await (await conn.execute(statement, params)).fetchall()]
            total = None
            if counting:
                total = (await (await conn.execute(count_statement, params)).fetchone())[0]
            start = query.offset or 0
            span = f"{start}-{start + len(rows) - 1}" if rows else "*"
            headers = [("Content-Range", f"{span}/{'*' if total is None else total}")]
            if single:
                if len(rows) != 1:
                    raise single_error(len(rows))
                return Response(
                    200,
                    rows[0].encode(),
                    [*headers, ("Content-Type", OBJECT_MEDIA + "; charset=utf-8")],
                )
            return Response(
                200,
                json_array(rows),
                [*headers, ("Content-Type", "application/json; charset=utf-8")],
            )

        return await self._run(request, auth, work, read_only=True)

    def _body(self, request: Request) -> Any:
        try:
            return request.json()
        except ValueError as error:
            raise RestError(400, "PGRST102", "Empty or invalid json", str(error)) from None

    def _check_columns(self, table: Table, names: list[str]) -> None:
        for name in names:
            if name not in table.columns:
                raise RestError(
                    400,
                    "PGRST204",
                    f"Could not find the '{name}' column of '{table.name}' in the schema cache",
                )

    async def _write(
        self,
        request: Request,
        table: Table,
        query: Query,
        prefs: dict[str, str],
        single: bool,
        auth: Auth,
        statements: list[tuple[sql.Composable, list[Any]]],
        success: int,
    ) -> Response:
        returning = prefs.get("return", "minimal")

        async def work(conn: psycopg.AsyncConnection) -> Response:
            rows: list[str] = []
            for statement, params in statements:
                rows += [r[0] for r in await (await conn.execute(statement, params)).fetchall()]
            if single and len(rows) != 1:
                raise single_error(len(rows))
            total = len(rows) if prefs.get("count") else "*"
            headers = [("Content-Range", f"*/{total}")]
            if returning == "representation":
                if single:
                    body = rows[0].encode()
                    media = OBJECT_MEDIA
                else:
                    body, media = json_array(rows), "application/json"
                return Response(
                    success, body, [*headers, ("Content-Type", media + "; charset=utf-8")]
                )
            if (
                returning == "headers-only"
                and request.method == "POST"
                and table.primary_key
                and rows
            ):
                first = json.loads(rows[0])
                location = "&".join(f"{k}=eq.{first.get(k)}" for k in table.primary_key)
                headers.append(("Location", f"/{table.name}?{location}"))
            return Response(success if request.method == "POST" else 204, b"", headers)

        return await self._run(request, auth, work, read_only=False)

    def _returning_projection(
        self, table: Table, query: Query, prefs: dict[str, str]
    ) -> sql.Composable:
        builder = SqlBuilder(table)
        if prefs.get("return") != "representation":
            return sql.SQL("'{}'::json")
        return builder.projection(query.select)

    async def _insert(
        self,
        request: Request,
        table: Table,
        query: Query,
        prefs: dict[str, str],
        single: bool,
        auth: Auth,
    ) -> Response:
        body = self._body(request)
        if isinstance(body, dict):
            rows = [body]
        elif isinstance(body, list) and all(isinstance(row, dict) for row in body):
            rows = body
        else:
            raise RestError(
                400,
                "PGRST102",
                "Empty or invalid json",
                "expected an object or an array of objects",
            )
        if query.columns is not None:
            columns = query.columns
        else:
            columns = list(dict.fromkeys(key for row in rows for key in row))
        self._check_columns(table, columns)
        target = sql.SQL("{}.{}").format(sql.Identifier(table.schema), sql.Identifier(table.name))
        conflict = self._conflict_clause(table, query, prefs, columns)
        projection = self._returning_projection(table, query, prefs)
        missing_default = prefs.get("missing") == "default"
        statements: list[tuple[sql.Composable, list[Any]]] = []
        uniform = all(set(columns) <= set(row) for row in rows)
        groups: list[tuple[list[str], list[dict[str, Any]]]]
        if not rows:
            groups = []
        elif (missing_default and not uniform) or not columns:
            groups = [([c for c in columns if c in row], [row]) for row in rows]
        else:
            groups = [(columns, rows)]
        for cols, group in groups:
            if cols:
                names = sql.SQL(", ").join(sql.Identifier(c) for c in cols)
                insert = sql.SQL(
                    "INSERT INTO {target} AS _t ({names}) SELECT {names}"
                    " FROM json_populate_recordset(NULL::{target}, {data}::json){conflict}"
                    " RETURNING _t.*"
                ).format(target=target, names=names, data=sql.Placeholder(), conflict=conflict)
            else:
                insert = sql.SQL("INSERT INTO {} AS _t DEFAULT VALUES{} RETURNING _t.*").format(
                    target, conflict
                )
            statement = sql.SQL("WITH _w AS ({}) SELECT ({})::text FROM _w AS _t").format(
                insert, projection
            )
            params = [json.dumps(group)] if cols else []
            statements.append((statement, params))
        return await self._write(request, table, query, prefs, single, auth, statements, 201)

    def _conflict_clause(
        self, table: Table, query: Query, prefs: dict[str, str], columns: list[str]
    ) -> sql.Composable:
        resolution = prefs.get("resolution")
        if resolution not in ("merge-duplicates", "ignore-duplicates"):
            return sql.SQL("")
        keys = query.on_conflict or table.primary_key
        if not keys:
            raise bad_query("upsert needs on_conflict or a primary key")
        self._check_columns(table, keys)
        target = sql.SQL(", ").join(sql.Identifier(k) for k in keys)
        updates = [c for c in columns if c not in keys]
        if resolution == "ignore-duplicates" or not updates:
            return sql.SQL(" ON CONFLICT ({}) DO NOTHING").format(target)
        assignments = sql.SQL(", ").join(
            sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(c), sql.Identifier(c))
            for c in updates
        )
        return sql.SQL(" ON CONFLICT ({}) DO UPDATE SET {}").format(target, assignments)

    async def _update(
        self,
        request: Request,
        table: Table,
        query: Query,
        prefs: dict[str, str],
        single: bool,
        auth: Auth,
    ) -> Response:
        body = self._body(request)
        if not isinstance(body, dict):
            raise RestError(400, "PGRST102", "Empty or invalid json", "expected a JSON object")
        columns = list(body)
        self._check_columns(table, columns)
        builder = SqlBuilder(table)
        target = sql.SQL("{}.{}").format(sql.Identifier(table.schema), sql.Identifier(table.name))
        projection = self._returning_projection(table, query, prefs)
        if not columns:
            statement = sql.SQL("SELECT ({})::text FROM {} AS _t WHERE FALSE").format(
                projection, target
            )
            return await self._write(
                request, table, query, prefs, single, auth, [(statement, [])], 200
            )
        assignments = sql.SQL(", ").join(
            sql.SQL("{} = _v.{}").format(sql.Identifier(c), sql.Identifier(c)) for c in columns
        )
        data = builder.param(json.dumps(body))
        where = builder.where(query.filters)
        statement = sql.SQL(
            "WITH _w AS (UPDATE {target} AS _t SET {assignments}"
            " FROM json_populate_record(NULL::{target}, {data}::json) AS _v"
            " WHERE {where} RETURNING _t.*) SELECT ({projection})::text FROM _w AS _t"
        ).format(
            target=target, assignments=assignments, data=data, where=where, projection=projection
        )
        return await self._write(
            request, table, query, prefs, single, auth, [(statement, builder.params)], 200
        )

    async def _delete(
        self,
        request: Request,
        table: Table,
        query: Query,
        prefs: dict[str, str],
        single: bool,
        auth: Auth,
    ) -> Response:
        builder = SqlBuilder(table)
        target = sql.SQL("{}.{}").format(sql.Identifier(table.schema), sql.Identifier(table.name))
        projection = self._returning_projection(table, query, prefs)
        where = builder.where(query.filters)
        statement = sql.SQL(
            "WITH _w AS (DELETE FROM {} AS _t WHERE {} RETURNING _t.*)"
            " SELECT ({})::text FROM _w AS _t"
        ).format(target, where, projection)
        return await self._write(
            request, table, query, prefs, single, auth, [(statement, builder.params)], 200
        )

    # -- functions ------------------------------------------------------------------------------

    async def _rpc(self, request: Request, schema: str, name: str, auth: Auth) -> Response:
        if request.method not in ("GET", "HEAD", "POST"):
            raise RestError(405, "PGRST101", "Only GET, HEAD or POST are allowed for RPC")
        candidates = self.cache.functions.get((schema, name))
        if not candidates:
            await self.reload()
            candidates = self.cache.functions.get((schema, name)) or []
        if request.method == "POST":
            body = self._body(request) if request.body.strip() else {}
            names_hint = None
            query = parse_query(request.query)
        else:
            names_hint = {n for f in candidates for n in f.arg_names if n}
            query = parse_query(request.query, names_hint)
            body = dict(query.extra)
        function, whole_body = self._resolve(schema, name, candidates, body)
        read_only = request.method != "POST"
        single = wants_object(request)
        builder = SqlBuilder(None)
        target = sql.SQL("{}.{}").format(
            sql.Identifier(function.schema), sql.Identifier(function.name)
        )
        if whole_body:
            call = sql.SQL("{}({}::{})").format(
                target, builder.param(json.dumps(body)), sql.SQL(function.arg_types[0])
            )
            source = sql.SQL("")
        elif function.arg_names and body:
            used = [n for n in function.arg_names if n in body]
            call = sql.SQL("{}({})").format(
                target,
                sql.SQL(", ").join(
                    sql.SQL("{} => _a.{}").format(sql.Identifier(n), sql.Identifier(n))
                    for n in used
                ),
            )
            definitions = sql.SQL(", ").join(
                sql.SQL("{} {}").format(
                    sql.Identifier(n), sql.SQL(function.arg_types[function.arg_names.index(n)])
                )
                for n in used
            )
            source = sql.SQL("json_to_record({}::json) AS _a({}) CROSS JOIN LATERAL ").format(
                builder.param(json.dumps(body)), definitions
            )
        else:
            call = sql.SQL("{}()").format(target)
            source = sql.SQL("")
        kind = function.return_kind

        if kind == "void":
            statement = sql.SQL("SELECT 1 FROM {}{} AS _t").format(source, call)
        elif kind == "scalar":
            statement = sql.SQL("SELECT to_json(_t.v)::text FROM {}{} AS _t(v)").format(
                source, call
            )
            # PostgREST's max-rows limits every set a function returns, scalars included
            limit = self._capped(query.limit) if function.returns_set else query.limit
            if limit is not None:
                statement = sql.SQL("{} LIMIT {}").format(statement, sql.Literal(max(limit, 0)))
        else:
            projection = builder.projection(query.select)
            where = builder.where(query.filters)
            order = builder.order(query.order)
            statement = sql.SQL("SELECT ({})::text FROM {}{} AS _t WHERE {}{}").format(
                projection, source, call, where, order
            )
            limit = self._capped(query.limit) if function.returns_set else query.limit
            if limit is not None:
                statement = sql.SQL("{} LIMIT {}").format(statement, sql.Literal(max(limit, 0)))
            if query.offset:
                statement = sql.SQL("{} OFFSET {}").format(
                    statement, sql.Literal(max(query.offset, 0))
                )
        params = builder.params

        async def work(conn: psycopg.AsyncConnection) -> Response:
            rows = [r[0] for r in await (await conn.execute(statement, params)).fetchall()]
            if kind == "void":
                return Response(204, b"", [("Content-Range", "*/*")])
            json_type = [("Content-Type", "application/json; charset=utf-8")]
            if function.returns_set:
                if single:
                    if len(rows) != 1:
                        raise single_error(len(rows))
                    return Response(
                        200, rows[0].encode(), [("Content-Type", OBJECT_MEDIA + "; charset=utf-8")]
                    )
                return Response(200, json_array(rows), json_type)
            value = rows[0] if rows and rows[0] is not None else "null"  # a NULL scalar too
            return Response(200, value.encode(), json_type)

        return await self._run(request, auth, work, read_only=read_only)

    def _resolve(
        self, schema: str, name: str, candidates: list[Function], body: Any
    ) -> tuple[Function, bool]:
        keys = set(body) if isinstance(body, dict) else None
        matches = []
        for function in candidates:
            if (
                keys is not None
                and all(function.arg_names)
                and keys <= set(function.arg_names)
                and set(function.required) <= keys
            ):
                matches.append(function)
        if matches:
            matches.sort(key=lambda f: (len(f.arg_names) != len(keys or ()), len(f.arg_names)))
            return matches[0], False
        for function in candidates:
            if (
                len(function.arg_names) == 1
                and function.arg_names[0] == ""
                and function.arg_types[0] in ("json", "jsonb")
            ):
                return function, True
        described = ", ".join(sorted(keys)) if keys else ""
        with_params = f"with parameters {described}" if described else "without parameters"
        hint = None
        if candidates:
            signature = ", ".join(candidates[0].arg_names)
            hint = f"Perhaps you meant to call the function {schema}.{name}({signature})"
        raise RestError(
            404,
            "PGRST202",
            f"Could not find the function {schema}.{name}({described}) in the schema cache",
            f"Searched for the function {schema}.{name} {with_params} or with a single unnamed"
            " json/jsonb parameter, but no matches were found in the schema cache.",
            hint,
        )
