"""The secrets a notification must never carry: the office's store credentials and tokens.

They come from its config and from the environment (store credentials and API tokens)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from semo.engine.config import SemoConfig

#: environment variables whose values never appear in a notification
SECRET_VARIABLES = (
    "SEMO_DATABASE_URL",
    "SUPABASE_SERVICE_ROLE_KEY",
    "SUPABASE_KEY",
    "SEMO_API_TOKEN",
    "SEMO_API_TOKENS",
)


def config_secrets(config: SemoConfig) -> list[str]:
    """The secrets of an office's config and environment: its store's, its API tokens."""
    found = [os.environ.get(name, "") for name in SECRET_VARIABLES]
    store = config.store
    for secret in (store.database_url, store.supabase_key, config.api.token):
        if secret is not None:
            found.append(secret.get_secret_value())
    return [value for value in found if value]
