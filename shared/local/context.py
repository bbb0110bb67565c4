"""The in-process Lambda runtime used by the embedded host: a Lambda-like context and handler loading.

Handlers are imported lazily (``importlib``) the first time they are called, exactly as a cold start
would, so importing this module costs nothing. Used by the Lambda registry patch (Step Functions tasks,
DynamoDB stream delivery) and by the local HTTP front.
"""

from __future__ import annotations

import importlib
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from shared import manifest

DEFAULT_REGION = "us-east-1"
DEFAULT_ACCOUNT = "123456789012"

Handler = Callable[[Any, Any], Any]


def function_arn(local_name: str, region: str = DEFAULT_REGION, account: str = DEFAULT_ACCOUNT) -> str:
    return f"arn:aws:lambda:{region}:{account}:function:{local_name}"


class LambdaContext:
    """The attributes and method of the AWS Lambda Python runtime's context object.

    ``aws_request_id`` is fresh per invocation; ``get_remaining_time_in_millis`` counts down from the
    function's timeout like the real runtime does.
    """

    def __init__(
        self,
        function_name: str,
        *,
        memory_limit_in_mb: int = 128,
        timeout_s: int = 30,
        region: str = DEFAULT_REGION,
        account: str = DEFAULT_ACCOUNT,
    ) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = function_arn(function_name, region, account)
        self.memory_limit_in_mb = memory_limit_in_mb
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = f"local/[$LATEST]{self.aws_request_id.replace('-', '')}"
        self.identity: Any = None
        self.client_context: Any = None
        self.tenant_id: str | None = None
        self._deadline = time.monotonic() + timeout_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def context_for(fn: manifest.Function) -> LambdaContext:
    """A fresh context for one invocation of a manifest function."""
    return LambdaContext(fn.local_name, memory_limit_in_mb=fn.memory_mb, timeout_s=fn.timeout_s)


_first_imports = threading.Lock()
# Packages with an import cycle that handlers also import lazily, inside a call (where no lock holds): imported whole
# with the first handler, so no thread's later import of a part of them can meet another's half-done one.
CYCLIC_PACKAGES = ("aws_lambda_powertools.utilities.data_classes",)


def load_handler(fn: manifest.Function) -> Handler:
    """Import ``fn.module`` (cached by Python after the first call) and return its ``lambda_handler``.

    First imports take one lock: a restarted host resumes runs, polls queues and answers requests at once, and two
    threads importing the same package tree for the first time can be handed a partially initialized module
    (seen: ``cannot import name 'SQSEvent' from partially initialized module``, a 500 on a restarted host). The
    packages of ``CYCLIC_PACKAGES`` are imported whole under it too: a queue consumer's first call imports
    Powertools' batch utilities lazily, outside the lock, and met the API resolver's import of the same package (seen
    again so, a 500 of ``GET /tools/{toolId}`` just after a restart)."""
    module = sys.modules.get(fn.module)
    if module is None or not hasattr(module, "lambda_handler"):
        with _first_imports:
            for package in CYCLIC_PACKAGES:
                importlib.import_module(package)
            module = importlib.import_module(fn.module)
    handler: Handler = module.lambda_handler
    return handler


def manifest_function_by_local_name(local_name: str) -> manifest.Function | None:
    for fn in manifest.FUNCTIONS:
        if fn.local_name == local_name:
            return fn
    return None


def function_name_from(name_or_arn: str) -> str:
    """``openwop-x``, ``openwop-x:$LATEST``, ``arn:aws:lambda:r:a:function:openwop-x[:qualifier]`` → ``openwop-x``."""
    if name_or_arn.startswith("arn:"):
        parts = name_or_arn.split(":")
        return parts[6] if len(parts) > 6 else name_or_arn
    return name_or_arn.split(":", 1)[0]
