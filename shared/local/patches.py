"""Patches to moto 5.2.5 internals that make the embedded AWS faithful enough to run our real code.

Every patch is pinned to moto 5.2.5 (see pyproject ``local`` extra) and names the upstream issue it works
around. ``apply_patches()`` is idempotent; nothing here runs at import time.

1. Lambda registry (no upstream fix planned: moto's no-Docker Lambda echoes the payload by design):
   ``LambdaBackend.invoke`` / ``LambdaSimpleBackend.invoke`` run the real ``lambda_handler`` in-process
   (``shared.local.lambda_registry``).
2. DynamoDB Streams → Lambda event-source mapping (moto always takes the Docker path and drops the records):
   ``LambdaBackend.send_dynamodb_items`` delivers the stream event to the real handler on a background worker
   per consuming function (a backlog coalesced into batches of up to 100 records, as the AWS poller does);
   ``StreamRecord.__init__`` marks TTL deletions with the TTL service identity (see ``shared.local.ttl``)
   (``shared.local.ddb_streams``).
3. (removed: JSONata. No ASL file of ours uses ``QueryLanguage: JSONata``; moto 5.2.5 fails such states,
   getmoto/moto#10105, and ``tests/unit`` checks that none of our state machines uses JSONata.)
4. ``states:startExecution`` casing (getmoto/moto#10076, PR #10101): PascalCase parameters go straight to boto3.
   Patches 4, 5, 7, 8 and 12 are in ``shared.local.sfn_patches``.
5. ``fast_waits()`` (test-only, never applied by default): Wait states and Retry intervals become instant.
6. ``TransactWriteItems`` without deep-copying whole tables per item (``shared.local.ddb_transactions``).
7. ``StopExecution`` of an execution waiting in a ``.waitForTaskToken`` task (no upstream issue filed yet):
   moto sets the program state to stopped but the task's thread keeps waiting on its callback endpoint with no
   timeout, so the execution stays ``RUNNING`` forever; AWS aborts it at once. Stopping also completes the
   waiting callbacks with an empty success (an error outcome would overwrite the stop and end ``FAILED``); the
   stopped program runs no further state, so the execution ends ``ABORTED``. A task that fails after the stop (its
   Lambda was already running) no longer turns the stopped program into a failed one (moto's ``set_error``
   replaced any program state, so the execution ended ``FAILED``).
8. A Distributed Map's worker takes its next item by recursion (``DistributedItemProcessorWorker._eval_pool``,
   no upstream issue filed yet): at Python's default recursion limit, which the local stack keeps (Lambda runs
   at it), a worker fails after ~980 items, so an eval of more than ~4,000 task-trials cannot finish locally; AWS
   has no such bound. The patch runs the same steps in a loop.
9. A Query of a table's partition reads that partition (``shared.local.ddb_query``): moto lists and sorts the
   whole table for every Query, so each one slowed with every run stored.
10. A send to a FIFO queue costs the same at any depth (``shared.local.sqs_send``): moto computed the queue's
   approximate counts for every message sent and walked every held message for a duplicate, so filling a queue
   took the square of its depth (a 100,000-event run's fan-out with a subscriber did not finish within an hour).
11. moto's Step Functions interpreter signs its calls to the server with a fixed key (``ak``): they sign with the
   endpoint's per-start credential instead, which the guard in front of moto requires (``shared.local.endpoint_auth``,
   applied by ``LocalAws`` at start; decision 0152).
12. An execution's end is seen whole (``BaseExecutionWorkerCommunication._reflect_execution_status``, no upstream
   issue filed yet): moto set ``SUCCEEDED`` before the output (``FAILED`` before the error), so a
   ``DescribeExecution`` between the two answered a succeeded execution with no ``output``.
13. moto's server dispatcher lists its own package folder (``os.listdir`` and an ``isdir`` per entry, ~200 stats)
   on every request, under the lock every request takes (``DomainDispatcherApplication.get_backend_for_host``, no
   upstream issue filed yet): the list is read once (``patch_module_list``), as the folder never changes while the
   process runs.
14. Region lists read once (``boto3.session.Session.get_available_regions``, no upstream issue filed yet): moto's
   EC2 models, which its Step Functions interpreter imports (through its Batch integration), ask three new boto3
   sessions for EC2's regions when imported, each loading EC2's service model afresh (~0.6 s of CPU per process
   that starts the embedded AWS). The lists are static data: one session answers, each once
   (``patch_region_lookups``, applied before anything imports moto's EC2 models).
15. A Distributed Map's ``ItemBatcher`` (``shared.local.sfn_batcher``, no upstream issue filed yet): moto's grammar
   refuses the field, so a definition that batches cannot be created; the patch takes it out before moto parses
   the definition and hands each child execution ``{"Items": [...]}`` as AWS does.
16. Not moto's, botocore's: a client's request to this process's own endpoint is answered by the same WSGI
   application on the calling thread instead of through a loopback socket and the server's request thread
   (``shared.local.direct``, applied by ``LocalAws`` while its server runs): three times less CPU per call.
17. A state machine's definition is parsed once per process (``AmazonStateLanguageParser.parse``, no upstream issue
   filed yet): moto lexed and parsed it with ANTLR's pure-Python runtime for every execution it started (~12% of a
   simple run's CPU); each execution still builds its own components from the kept tree.

When upstream fixes land (a moto release with #10101): bump the pin, delete the corresponding
``patch_*`` function (in its module) and its call in ``apply_patches``, and keep the canary test in
``tests/integration/test_local_patches.py`` — it must still pass on the unpatched, fixed moto.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any

from shared.local.ddb_streams import patch_stream_delivery, patch_stream_record_identity
from shared.local.lambda_registry import patch_lambda_invoke
from shared.local.sfn_patches import (
    patch_sfn_distributed_map_worker_loop,
    patch_sfn_end_seen_whole,
    patch_sfn_parse_once,
    patch_sfn_start_execution,
    patch_sfn_stop_wakes_callbacks,
)

PINNED_MOTO = "5.2.5"

log = logging.getLogger("shared.local")

_apply_lock = threading.Lock()
_applied = False


def apply_patches() -> None:
    """Apply every permanent patch once (idempotent, thread-safe). Warns when moto is not the pinned version."""
    global _applied
    with _apply_lock:
        if _applied:
            return
        import moto

        if moto.__version__ != PINNED_MOTO:
            log.warning("shared.local patches target moto %s, found %s", PINNED_MOTO, moto.__version__)
        patch_region_lookups()  # first: the Step Functions patches below import moto's EC2 models
        patch_lambda_invoke()
        patch_stream_delivery()
        patch_stream_record_identity()
        patch_sfn_start_execution()
        patch_sfn_stop_wakes_callbacks()
        patch_sfn_distributed_map_worker_loop()
        patch_sfn_end_seen_whole()
        patch_sfn_parse_once()  # before the batcher's parse, which calls it
        from shared.local.sfn_batcher import patch_sfn_item_batcher

        patch_sfn_item_batcher()  # ItemBatcher: the eval's trials run a batch per child execution
        from shared.local.ddb_transactions import apply_transaction_patch

        apply_transaction_patch()  # TransactWriteItems without a table deep-copy per item
        from shared.local.ddb_query import apply_query_patch

        apply_query_patch()  # a Query reads its partition, not a sort of the whole table
        from shared.local.sqs_send import apply_send_patch

        apply_send_patch()  # a FIFO send walks no held message (before any poller wraps add_message)
        patch_module_list()
        _applied = True


def patch_region_lookups() -> None:
    """Patch 14: ``get_available_regions`` of every boto3 session, answered once per (service, partition, non-regional)
    by one botocore session."""
    import boto3.session
    import botocore.session

    one: list[botocore.session.Session] = []

    @functools.lru_cache(maxsize=256)
    def regions(service_name: str, partition_name: str, allow_non_regional: bool) -> tuple[str, ...]:
        if not one:
            one.append(botocore.session.get_session())
        return tuple(
            one[0].get_available_regions(
                service_name=service_name, partition_name=partition_name, allow_non_regional=allow_non_regional
            )
        )

    def get_available_regions(
        self: Any, service_name: str, partition_name: str = "aws", allow_non_regional: bool = False
    ) -> list[str]:
        return list(regions(service_name, partition_name, allow_non_regional))

    boto3.session.Session.get_available_regions = get_available_regions  # type: ignore[method-assign]


def patch_module_list() -> None:
    """Patch 13: moto's list of its backend modules, read from its package folder once per process."""
    from moto import backends

    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules  # type: ignore[assignment]
