"""API Gateway's ``$default`` route: a path no route matches answers the protocol's ``404 not_found`` envelope."""

from __future__ import annotations

from functions._common import api

app = api.build_resolver()  # no routes: every request reaches the resolver's not-found handler

lambda_handler = api.make_handler(app)
