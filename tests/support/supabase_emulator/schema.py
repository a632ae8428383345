"""Schema cache: tables, columns, keys and functions of the exposed schemas, from pg_catalog.

Like PostgREST's schema cache it is loaded once and reloaded when a request names a table or
function the cache does not know (so migrations applied after the emulator started are seen).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import psycopg


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # format_type(), usable in a column definition list ("text[]", "uuid", ...)
    typname: str  # pg_type.typname, what Realtime reports in `columns` ("_text", "int4", ...)
    not_null: bool
    has_default: bool


@dataclass
class Table:
    schema: str
    name: str
    kind: str  # pg_class.relkind
    replica_identity: str  # pg_class.relreplident: d default, f full, n nothing, i index
    columns: dict[str, Column] = field(default_factory=dict)
    primary_key: list[str] = field(default_factory=list)

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


@dataclass(frozen=True)
class Function:
    schema: str
    name: str
    arg_names: tuple[str, ...]  # input arguments, in order ("" when unnamed)
    arg_types: tuple[str, ...]
    n_defaults: int  # the last n_defaults input arguments have defaults
    returns_set: bool
    return_type: str  # format_type of prorettype
    return_kind: str  # "composite", "scalar" or "void"
    volatile: bool

    @property
    def required(self) -> tuple[str, ...]:
        return self.arg_names[: len(self.arg_names) - self.n_defaults]


TABLES_SQL = """
SELECT n.nspname, c.relname, c.relkind, c.relreplident
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = ANY(%s) AND c.relkind IN ('r', 'v', 'm', 'p', 'f')
"""

COLUMNS_SQL = """
SELECT n.nspname, c.relname, a.attname, format_type(a.atttypid, a.atttypmod), t.typname,
       a.attnotnull, a.atthasdef
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_type t ON t.oid = a.atttypid
WHERE n.nspname = ANY(%s) AND c.relkind IN ('r', 'v', 'm', 'p', 'f')
  AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY n.nspname, c.relname, a.attnum
"""

PRIMARY_KEYS_SQL = """
SELECT n.nspname, c.relname, a.attname
FROM pg_index i
JOIN pg_class c ON c.oid = i.indrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) ON true
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
WHERE i.indisprimary AND n.nspname = ANY(%s)
ORDER BY n.nspname, c.relname, k.ord
"""

FUNCTIONS_SQL = """
SELECT n.nspname, p.proname, p.proargnames, p.proargmodes,
       ARRAY(SELECT format_type(t.oid, NULL)
             FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS a(oid, ord)
             JOIN pg_type t ON t.oid = a.oid ORDER BY a.ord),
       p.pronargdefaults, p.proretset, format_type(p.prorettype, NULL), rt.typtype,
       rt.typname, p.provolatile,
       EXISTS (SELECT 1 FROM unnest(coalesce(p.proargmodes, ARRAY[]::"char"[])) m
               WHERE m IN ('o', 'b', 't'))
FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace
JOIN pg_type rt ON rt.oid = p.prorettype
WHERE n.nspname = ANY(%s) AND p.prokind = 'f'
"""


class SchemaCache:
    def __init__(self, schemas: tuple[str, ...]) -> None:
        self.schemas = schemas
        self.tables: dict[tuple[str, str], Table] = {}
        self.functions: dict[tuple[str, str], list[Function]] = {}

    async def load(self, conn: psycopg.AsyncConnection) -> None:
        schemas = list(self.schemas)
        tables: dict[tuple[str, str], Table] = {}
        for nsp, rel, kind, ident in await (await conn.execute(TABLES_SQL, [schemas])).fetchall():
            tables[(nsp, rel)] = Table(nsp, rel, kind, ident)
        rows = await (await conn.execute(COLUMNS_SQL, [schemas])).fetchall()
        for nsp, rel, name, type_, typname, not_null, has_default in rows:
            table = tables.get((nsp, rel))
            if table is not None:
                table.columns[name] = Column(name, type_, typname, not_null, has_default)
        for nsp, rel, name in await (await conn.execute(PRIMARY_KEYS_SQL, [schemas])).fetchall():
            table = tables.get((nsp, rel))
            if table is not None:
                table.primary_key.append(name)
        functions: dict[tuple[str, str], list[Function]] = {}
        for row in await (await conn.execute(FUNCTIONS_SQL, [schemas])).fetchall():
            (nsp, name, argnames, argmodes, argtypes, ndefaults, retset, rettype, typtype,
             typname, volatile, has_out) = row  # fmt: skip
            modes = list(argmodes or ["i"] * len(argtypes))
            names = list(argnames or [""] * len(modes))
            inputs = [n or "" for n, m in zip(names, modes, strict=False) if m in ("i", "b", "v")]
            if typname == "void":
                kind = "void"
            elif typtype == "c" or (typname == "record" and has_out):
                kind = "composite"
            else:
                kind = "scalar"
            functions.setdefault((nsp, name), []).append(
                Function(
                    schema=nsp,
                    name=name,
                    arg_names=tuple(inputs),
                    arg_types=tuple(argtypes),
                    n_defaults=ndefaults,
                    returns_set=retset,
                    return_type=rettype,
                    return_kind=kind,
                    volatile=volatile == "v",
                )
            )
        self.tables = tables
        self.functions = functions

    def table(self, schema: str, name: str) -> Table | None:
        return self.tables.get((schema, name))

    def similar_table(self, schema: str, name: str) -> str | None:
        import difflib

        names = [t for (s, t) in self.tables if s == schema]
        close = difflib.get_close_matches(name, names, n=1)
        return f"{schema}.{close[0]}" if close else None
