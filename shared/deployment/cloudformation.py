"""The StackOutputs port on CloudFormation ``DescribeStacks``: a deployed stack's outputs by name.

Every failure becomes a ``StackLookupError`` whose reason is one line an operator can act on (no traceback):
no region, no credentials, no such stack, access refused, endpoint unreachable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
)

from shared.ports import StackLookupError


class CloudFormationStackOutputs:
    def __init__(self, client_factory: Callable[[], Any], region: str | None) -> None:
        self._client_factory = client_factory
        self._region = region

    def read_outputs(self, stack_name: str) -> dict[str, str]:
        where = f"region {self._region}" if self._region else "the configured region"
        try:
            client = self._client_factory()
            resp = client.describe_stacks(StackName=stack_name)
        except NoRegionError as exc:
            raise StackLookupError("no AWS region: pass --region or set AWS_REGION") from exc
        except (NoCredentialsError, PartialCredentialsError) as exc:
            raise StackLookupError("no AWS credentials found (set AWS_PROFILE or AWS_ACCESS_KEY_ID/...)") from exc
        except EndpointConnectionError as exc:
            raise StackLookupError(f"cannot reach CloudFormation in {where}") from exc
        except ClientError as exc:
            err = exc.response.get("Error", {})
            code, message = str(err.get("Code", "")), str(err.get("Message", ""))
            if code == "ValidationError" and "does not exist" in message:
                raise StackLookupError(f"stack {stack_name} does not exist in {where}") from exc
            raise StackLookupError(f"CloudFormation refused DescribeStacks on {stack_name}: {code}") from exc
        except BotoCoreError as exc:
            raise StackLookupError(f"cannot read stack {stack_name}: {type(exc).__name__}") from exc
        stacks = resp.get("Stacks") or []
        if not stacks:
            raise StackLookupError(f"stack {stack_name} does not exist in {where}")
        return {str(o["OutputKey"]): str(o["OutputValue"]) for o in stacks[0].get("Outputs") or []}
