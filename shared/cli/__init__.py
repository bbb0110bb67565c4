"""The ``openwop-serverless`` command line a user invokes, and its commands that talk HTTP to any host.

- ``parser.build_parser()``: the whole command line (argparse), the commands that need AWS included;
  ``main.main(argv, operator)`` parses it, runs ``eval`` (``evalcli``), ``webhooks listen`` (``webhooks``) and
  ``suites`` as a tenant (``suitecli``) here, and hands every other command to ``operator``;
- ``evalcli``: ``eval run|compare|list|accept|suite from-runs`` (typer + rich over ``openwop-client``), with
  ``evalhost`` (the host over HTTP, waiting), ``evalrequest`` (the run's body), ``evalcompare`` (verdicts),
  ``evaltable`` (output), ``evalmarkdown`` / ``evaljunit`` (the pull-request comment, JUnit), ``experiments``
  (named runs and baselines); ``suiterules`` (``eval suite rules|draft``);
- ``agentcli`` (``agents promote|rollback|history|list``) and ``registercli`` (``tools add``, ``workflows add``): the
  release loop over HTTP; ``clirun`` runs every typer group (exit codes, one ``error:`` line).

This package imports no AWS SDK, no embedded AWS and none of the host's services (an import-linter contract):
``serve`` and the operator commands that reach AWS (``--endpoint``/``--stack``) are ``shared.local.commands``, the
console script's entry, which composes them with this package.
"""
