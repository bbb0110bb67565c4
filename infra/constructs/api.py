"""The HTTP API: one route per ``shared.manifest.routes.ROUTES`` entry; one Lambda proxy integration and one invoke
permission per function, shared by its routes (a CloudFormation stack holds at most 500 resources: an integration and
a permission per route cost two resources a route)."""

from __future__ import annotations

import json
import re

import jsii
from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk.aws_apigatewayv2_integrations import HttpLambdaIntegration
from constructs import Construct

from infra.constructs.common import acknowledge, log_retention, pascal, removal_policy
from infra.constructs.functions import HostFunctions
from shared import manifest
from shared.manifest.routes import DEFAULT_ROUTE, ROUTES, Route

ACCESS_LOG_FORMAT = json.dumps(
    {
        "requestId": "$context.requestId",
        "ip": "$context.identity.sourceIp",
        "requestTime": "$context.requestTime",
        "routeKey": "$context.routeKey",
        "status": "$context.status",
        "protocol": "$context.protocol",
        "responseLength": "$context.responseLength",
        "latency": "$context.responseLatency",
        "integrationLatency": "$context.integrationLatency",
        "integrationError": "$context.integrationErrorMessage",
    },
    separators=(",", ":"),
)


DEFAULT_THROTTLE_RATE = 100
DEFAULT_THROTTLE_BURST = 200


def route_id(route: Route) -> str:
    """``GET /runs/{runId}/events`` -> ``GetRunsRunIdEventsRoute``: stable, unique per route key."""
    words = re.findall(r"[A-Za-z0-9]+", f"{route.method.lower()} {route.path}")
    return "".join(w[:1].upper() + w[1:] for w in words) + "Route"


def route_key(route: Route) -> str:
    return route.key


def cors_preflight(origins: tuple[str, ...]) -> apigwv2.CorsPreflightOptions | None:
    """The HTTP API's CORS configuration (``manifest.Cors``) for these origins; None (no CORS) when there are none."""
    if not origins:
        return None
    return apigwv2.CorsPreflightOptions(
        allow_origins=list(origins),
        allow_methods=[apigwv2.CorsHttpMethod(m) for m in manifest.CORS.allow_methods],
        allow_headers=[h.lower() for h in manifest.CORS.allow_headers],
        expose_headers=list(manifest.CORS.expose_headers),
        max_age=Duration.seconds(manifest.CORS.max_age_s),
        allow_credentials=False,
    )


class RunsApi(Construct):
    """``aws_apigatewayv2.HttpApi`` (payload v2) with the ``$default`` stage, JSON access logs and CORS.

    CDK context ``corsOrigins``: the origins granted (a comma list; unset: ``*``; empty: CORS off), see
    ``manifest.cors_origins``. API Gateway answers preflights itself and adds the CORS headers to answers.

    Route keys are exactly ``METHOD path`` from the manifest. ``:verb`` operations (``POST /runs/{runId}:fork``)
    are not routes: ``POST /runs/{runId}`` reaches ``run_actions``, whose resolver dispatches the verb.
    """

    def __init__(self, scope: Construct, construct_id: str, *, stage: str, functions: HostFunctions) -> None:
        super().__init__(scope, construct_id)
        self.access_logs = logs.LogGroup(
            self, "AccessLogs", retention=log_retention(stage), removal_policy=removal_policy(stage)
        )
        self.http_api = apigwv2.HttpApi(
            self,
            "HttpApi",
            description="OpenWOP v2 host (serverless)",
            create_default_stage=False,
            cors_preflight=cors_preflight(manifest.cors_origins(self.node.try_get_context("corsOrigins"))),
        )
        self.stage = apigwv2.HttpStage(
            self,
            "DefaultStage",
            http_api=self.http_api,
            stage_name="$default",
            auto_deploy=True,
            access_log_settings=_AccessLogs(self.access_logs),
            # CDK context ``throttleRate`` / ``throttleBurst``: the stage's request rate (per second) and burst,
            # for all callers together (API Gateway HTTP APIs have no per-key quota; docs/operations.md).
            throttle=apigwv2.ThrottleSettings(
                rate_limit=float(self.node.try_get_context("throttleRate") or DEFAULT_THROTTLE_RATE),
                burst_limit=int(self.node.try_get_context("throttleBurst") or DEFAULT_THROTTLE_BURST),
            ),
        )
        self.routes: dict[str, apigwv2.HttpRoute] = {}
        integrations: dict[str, _FunctionIntegration] = {}
        for route in ROUTES:
            rid = route_id(route)
            integration = integrations.get(route.function)
            if integration is None:  # the live alias, never $LATEST
                integration = integrations[route.function] = _FunctionIntegration(
                    f"{pascal(route.function)}Integration", functions.alias(route.function)
                )
            http_route = apigwv2.HttpRoute(
                self,
                rid,
                http_api=self.http_api,
                route_key=apigwv2.HttpRouteKey.DEFAULT
                if route.path == DEFAULT_ROUTE
                else apigwv2.HttpRouteKey.with_(route.path, apigwv2.HttpMethod(route.method)),
                integration=integration,
            )
            acknowledge(
                http_route,
                "AwsSolutions-APIG4",
                "Callers authenticate in the handler: bearer API keys are checked against HMAC-SHA-256 hashes "
                "(pepper in Secrets Manager) in the host table; routes marked auth=False are public discovery "
                "documents.",
            )
            self.routes[route_key(route)] = http_route


class _FunctionIntegration(HttpLambdaIntegration):
    """A function's one Lambda proxy integration, shared by all its routes, with one invoke permission for this API
    (any stage, method and path of it: the function itself routes) instead of CDK's one per route."""

    def __init__(self, construct_id: str, handler: lambda_.IFunction) -> None:
        super().__init__(construct_id, handler, payload_format_version=apigwv2.PayloadFormatVersion.VERSION_2_0)
        self._target = handler
        self._granted = False

    @jsii.member(jsii_name="completeBind")
    def _complete_bind(self, *, route: apigwv2.IHttpRoute, scope: Construct) -> None:
        if self._granted:
            return
        self._granted = True
        self._target.add_permission(
            "ApiInvoke",
            principal=iam.ServicePrincipal("apigateway.amazonaws.com"),
            source_arn=Stack.of(route).format_arn(
                service="execute-api",
                resource=route.http_api.api_id,
                resource_name="*/*",
                arn_format=ArnFormat.SLASH_RESOURCE_NAME,
            ),
        )


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogs:
    """JSON access logs into a CloudWatch log group (``IAccessLogSettings`` is an interface, not a struct)."""

    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigwv2.LogGroupLogDestination(log_group)

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        return apigw.AccessLogFormat.custom(ACCESS_LOG_FORMAT)
