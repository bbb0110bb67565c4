"""The SecretStore on moto's Secrets Manager (``shared.storage.secrets``): a put racing a delete of the same secret
never fails (schemathesis found a 500 on ``PUT .../credentials/{ref}``: the create found the secret, the delete
removed it, the new version found nothing)."""

from __future__ import annotations

import threading

from tests.helpers import unique


def test_puts_racing_deletes_of_one_secret_always_store_their_value(local_aws) -> None:
    from shared.storage.secrets import SecretsManagerSecretStore
    from shared.wiring import _client

    # Given two writers on one secret name: one puts values, the other deletes it, 40 times each at once
    store = SecretsManagerSecretStore(lambda: _client("secretsmanager"))
    name, errors, barrier = f"openwop-serverless/test/{unique('race')}", [], threading.Barrier(2)

    def puts() -> None:
        barrier.wait()
        for i in range(40):
            try:
                store.put_secret(name, f"value-{i}")
            except Exception as exc:  # noqa: BLE001 - the assertion names whatever escaped
                errors.append(repr(exc))

    def deletes() -> None:
        barrier.wait()
        for _ in range(40):
            store.delete_secret(name)

    threads = [threading.Thread(target=puts), threading.Thread(target=deletes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Then no put failed, and a last put after the race stores its value
    assert errors == []
    assert store.put_secret(name, "last") in (True, False)
    assert _client("secretsmanager").get_secret_value(SecretId=name)["SecretString"] == "last"
