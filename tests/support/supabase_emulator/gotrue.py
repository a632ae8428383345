"""A minimal Supabase Auth (GoTrue) for tests: password sign-in for users the tests create.

- `POST /auth/v1/token?grant_type=password` `{"email", "password"}` → a session
  `{"access_token", "token_type": "bearer", "expires_in", "expires_at", "refresh_token",
  "user"}`; wrong email or password → 400 `{"code": 400, "error_code": "invalid_credentials",
  "msg": "Invalid login credentials"}` (GoTrue's shape).
- `POST /auth/v1/token?grant_type=refresh_token` `{"refresh_token"}` → a new session.
- `GET /auth/v1/user` (Bearer access token) → the user; `POST /auth/v1/logout` → 204.

Access tokens are HS256 JWTs signed with the emulator's secret, with GoTrue's claims (`sub`
the user's id, `role` "authenticated", `aud`, `email`, `session_id`, `exp` one hour on), so
PostgREST and Realtime run them as `authenticated` with `auth.uid()` = the user. Users live in
the database's `auth.users` (`create_user`), passwords as salted PBKDF2-SHA256.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
import uuid
from typing import Any
from urllib.parse import parse_qs

import psycopg

from .auth import InvalidToken, sign_jwt, verify_jwt
from .http import Request, Response

TOKEN_SECONDS = 3600
_ITERATIONS = 10_000


def hash_password(password: str) -> str:
    salt = secrets.token_hex(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), bytes.fromhex(salt), _ITERATIONS)
    return f"pbkdf2_sha256${salt}${digest.hex()}"


def check_password(password: str, stored: str | None) -> bool:
    try:
        scheme, salt, digest = (stored or "").split("$")
    except ValueError:
        return False
    if scheme != "pbkdf2_sha256":
        return False
    actual = hashlib.pbkdf2_hmac("sha256", password.encode(), bytes.fromhex(salt), _ITERATIONS)
    return hmac.compare_digest(actual.hex(), digest)


def create_user(dsn: str, email: str, password: str) -> str:
    """Insert a confirmed user into auth.users; its id."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO auth.users (email, encrypted_password) VALUES (%s, %s) RETURNING id",
            (email, hash_password(password)),
        ).fetchone()
    assert row is not None
    return str(row[0])


def _error(status: int, code: str, message: str) -> Response:
    return Response.json(status, {"code": status, "error_code": code, "msg": message})


class GoTrue:
    def __init__(self, pool: Any, secret: str, url: str) -> None:
        self.pool = pool
        self.secret = secret
        self.url = url
        self.refresh: dict[str, str] = {}  # refresh token -> user id

    async def handle(self, request: Request, path: str) -> Response:
        if path == "token" and request.method == "POST":
            grant = (parse_qs(request.query).get("grant_type") or [""])[0]
            try:
                body = request.json() or {}
            except ValueError:
                return _error(400, "validation_failed", "Could not parse request body as JSON")
            if grant == "password":
                return await self._password(body)
            if grant == "refresh_token":
                user_id = self.refresh.pop(str(body.get("refresh_token") or ""), None)
                user = await self._user("id", user_id) if user_id else None
                if user is None:
                    return _error(400, "refresh_token_not_found", "Invalid Refresh Token")
                return Response.json(200, self._session(user))
            return _error(400, "validation_failed", f"unsupported grant_type {grant!r}")
        if path == "user" and request.method == "GET":
            claims = self._bearer(request)
            user = await self._user("id", claims.get("sub")) if claims else None
            if user is None:
                return _error(401, "bad_jwt", "invalid JWT")
            return Response.json(200, self._public(user))
        if path == "logout" and request.method == "POST":
            return Response(204)
        if path == "settings":
            return Response.json(200, {"external": {"email": True}, "disable_signup": True})
        return _error(404, "not_found", f"the emulator's auth does not serve /auth/v1/{path}")

    def _bearer(self, request: Request) -> dict[str, Any] | None:
        scheme, _, token = (request.header("authorization") or "").partition(" ")
        if scheme.lower() != "bearer":
            return None
        try:
            return verify_jwt(token.strip(), self.secret)
        except InvalidToken:
            return None

    async def _password(self, body: dict[str, Any]) -> Response:
        email, password = str(body.get("email") or ""), str(body.get("password") or "")
        user = await self._user("email", email) if email else None
        if user is None or not check_password(password, user.get("encrypted_password")):
            return _error(400, "invalid_credentials", "Invalid login credentials")
        return Response.json(200, self._session(user))

    async def _user(self, key: str, value: Any) -> dict[str, Any] | None:
        where = "id::text = %s" if key == "id" else "lower(email) = lower(%s)"
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT row_to_json(u)::text FROM auth.users u WHERE " + where,  # type: ignore[operator]
                (str(value),),
            )
            row = await cur.fetchone()
        return None if row is None else json.loads(row[0])

    def _public(self, user: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": user["id"],
            "aud": "authenticated",
            "role": "authenticated",
            "email": user.get("email"),
            "phone": "",
            "email_confirmed_at": user.get("created_at"),
            "confirmed_at": user.get("created_at"),
            "last_sign_in_at": user.get("updated_at"),
            "app_metadata": user.get("raw_app_meta_data") or {},
            "user_metadata": user.get("raw_user_meta_data") or {},
            "identities": [],
            "created_at": user.get("created_at"),
            "updated_at": user.get("updated_at"),
            "is_anonymous": False,
        }

    def _session(self, user: dict[str, Any]) -> dict[str, Any]:
        now = int(time.time())
        claims = {
            "iss": f"{self.url}/auth/v1",
            "sub": user["id"],
            "aud": "authenticated",
            "exp": now + TOKEN_SECONDS,
            "iat": now,
            "email": user.get("email"),
            "phone": "",
            "app_metadata": user.get("raw_app_meta_data") or {},
            "user_metadata": user.get("raw_user_meta_data") or {},
            "role": "authenticated",
            "aal": "aal1",
            "amr": [{"method": "password", "timestamp": now}],
            "session_id": str(uuid.uuid4()),
            "is_anonymous": False,
        }
        refresh = secrets.token_urlsafe(24)
        self.refresh[refresh] = user["id"]
        return {
            "access_token": sign_jwt(claims, self.secret),
            "token_type": "bearer",
            "expires_in": TOKEN_SECONDS,
            "expires_at": now + TOKEN_SECONDS,
            "refresh_token": refresh,
            "user": self._public(user),
        }
