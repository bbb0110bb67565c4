"""The embedded AWS for local runs and tests: moto 5.2.5 in-process, patched, bootstrapped from the manifest.

- ``stack.LocalAws``: start/stop moto's server in this process and ``bootstrap()`` the manifest stack; with
  ``data_dir``, its data kept in a folder across restarts (``persistence``), unfinished runs restarted (``resume``).
- ``patches.apply_patches()``; ``lambda_registry.register_handler()``, ``ddb_streams.wait_for_stream_idle()``,
  ``sfn_patches.fast_waits()`` (tests).
- ``front.LocalFront``: API Gateway HTTP API (payload v2.0) semantics over a stdlib HTTP server, with SSE.
- ``ttl.ttl_sweep(now)``: DynamoDB TTL expiry, which moto never performs.
- ``commands.main``: the ``openwop-serverless`` console script: ``serve`` and the operator commands (``keys``,
  ``seed``, ``runs delete``, ``suites`` host-wide) here, composed with the HTTP commands of ``shared.cli``.

Nothing is imported eagerly: import the submodule you need.
"""
