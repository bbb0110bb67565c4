"""The SecretStore port on AWS Secrets Manager, through Powertools Parameters' cached secrets provider.

The client and the provider are built on the first read, so functions that never read a secret never pay for
either. Values are cached for ``max_age_s`` (a whole execution environment's life in practice): one
GetSecretValue per secret per cold start.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

SECRET_MAX_AGE_S = 24 * 3600


class SecretsManagerSecretStore:
    def __init__(self, client_factory: Callable[[], Any], *, max_age_s: int = SECRET_MAX_AGE_S) -> None:
        self._client_factory = client_factory
        self._max_age_s = max_age_s
        self._provider: Any = None
        self._lock = threading.Lock()

    def client(self) -> Any:
        """The Secrets Manager client (built on first use)."""
        return self._get_provider().client

    def _get_provider(self) -> Any:
        with self._lock:
            if self._provider is None:
                from aws_lambda_powertools.utilities.parameters import SecretsProvider

                self._provider = SecretsProvider(boto3_client=self._client_factory())
            return self._provider

    def get_secret(self, secret_id: str) -> str:
        value = self._get_provider().get(secret_id, max_age=self._max_age_s)
        if isinstance(value, bytes):
            return value.decode("utf-8")
        return str(value)
