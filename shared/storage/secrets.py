"""The SecretStore port on AWS Secrets Manager, through Powertools Parameters' cached secrets provider.

The client and the provider are built on the first read, so functions that never read a secret never pay for
either. Values are cached for ``max_age_s`` (a whole execution environment's life in practice): one
GetSecretValue per secret per cold start.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from shared.errors import StorageError

SECRET_MAX_AGE_S = 24 * 3600
PUT_ROUNDS = 5


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

    def get_secret(self, secret_id: str, *, max_age_s: int | None = None) -> str:
        from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

        from shared.ports import SecretNotFoundError

        try:
            value = self._get_provider().get(secret_id, max_age=self._max_age_s if max_age_s is None else max_age_s)
        except GetParameterError as exc:
            raise SecretNotFoundError("the secret cannot be read") from exc
        if isinstance(value, bytes):
            return value.decode("utf-8")
        return str(value)

    def put_secret(self, name: str, value: str, *, description: str = "") -> bool:
        """Create the secret, or store a new current version of it. True when it was created."""
        client = self.client()
        # A delete racing this put can remove the secret between the two calls: create again (it is gone), and the
        # other way round. Each lost round is another request's completed create or delete, so a few suffice.
        for _ in range(PUT_ROUNDS):
            try:
                client.create_secret(Name=name, SecretString=value, Description=description)
                return True
            except client.exceptions.ResourceExistsException:
                pass
            try:
                client.put_secret_value(SecretId=name, SecretString=value)
                return False
            except client.exceptions.ResourceNotFoundException:
                continue
        raise StorageError("the secret is being created and deleted concurrently")

    def update_secret(self, secret_id: str, value: str) -> None:
        """Store a new current version of an existing secret (name or ARN); the old one becomes AWSPREVIOUS."""
        from shared.ports import SecretNotFoundError

        client = self.client()
        try:
            client.put_secret_value(SecretId=secret_id, SecretString=value)
        except client.exceptions.ResourceNotFoundException as exc:
            raise SecretNotFoundError("the secret does not exist") from exc
        with self._lock:
            self._provider = None  # the next read sees the new value

    def delete_secret(self, name: str) -> bool:
        """Delete at once (no recovery window: a credential removed by its owner must stop working now)."""
        client = self.client()
        try:
            client.delete_secret(SecretId=name, ForceDeleteWithoutRecovery=True)
            return True
        except client.exceptions.ResourceNotFoundException:
            return False
