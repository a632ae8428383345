"""API keys for the emulator: HS256 JWTs shaped like a Supabase project's anon/service_role keys.

Only the standard library is used. The emulator accepts a request when its ``apikey`` is one of
the two project keys and its ``Authorization: Bearer`` token (if any) is a JWT signed with the
emulator's secret that has not expired; the token's ``role`` claim decides the database role.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any


class InvalidToken(ValueError):
    pass


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign_jwt(claims: dict[str, Any], secret: str) -> str:
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    body = _b64(json.dumps(claims, separators=(",", ":")).encode())
    signature = hmac.new(secret.encode(), f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{_b64(signature)}"


def verify_jwt(token: str, secret: str) -> dict[str, Any]:
    """Return the claims of a valid token; raise InvalidToken with PostgREST-like wording."""
    parts = token.split(".")
    if len(parts) != 3:
        raise InvalidToken(
            "JWSError (CompactDecodeError Invalid number of parts: Expected 3 parts)"
        )
    header_b64, body_b64, sig_b64 = parts
    try:
        header = json.loads(_unb64(header_b64))
        claims = json.loads(_unb64(body_b64))
        signature = _unb64(sig_b64)
    except (ValueError, UnicodeDecodeError) as error:
        raise InvalidToken(f"JWSError (CompactDecodeError {error})") from None
    if header.get("alg") != "HS256" or not isinstance(claims, dict):
        raise InvalidToken("JWSError JWSInvalidSignature")
    expected = hmac.new(
        secret.encode(), f"{header_b64}.{body_b64}".encode(), hashlib.sha256
    ).digest()
    if not hmac.compare_digest(signature, expected):
        raise InvalidToken("JWSError JWSInvalidSignature")
    exp = claims.get("exp")
    if isinstance(exp, int | float) and exp < time.time():
        raise InvalidToken("JWT expired")
    return claims


def project_keys(secret: str, ref: str = "emulator") -> tuple[str, str]:
    """(anon_key, service_role_key) valid for ten years, like a Supabase project's keys."""
    now = int(time.time())
    exp = now + 10 * 365 * 24 * 3600
    anon = sign_jwt({"iss": "supabase", "ref": ref, "role": "anon", "iat": now, "exp": exp}, secret)
    service = sign_jwt(
        {"iss": "supabase", "ref": ref, "role": "service_role", "iat": now, "exp": exp}, secret
    )
    return anon, service
