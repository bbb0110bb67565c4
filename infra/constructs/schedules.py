"""EventBridge schedules of the manifest's ``schedule`` functions: the start outbox's sweep (decision 0150)."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from constructs import Construct

from infra.constructs.common import acknowledge, pascal
from infra.constructs.functions import HostFunctions
from shared import manifest

# A tick not delivered at once is stale by the next one: retry it a little, then drop it (the next tick sweeps).
RETRY_ATTEMPTS = 2
MAX_EVENT_AGE = Duration.minutes(2)


class HostSchedules(Construct):
    """One rule per ``schedule`` function (``<Name>Schedule``), invoking its ``live`` alias every ``every_minutes``."""

    def __init__(self, scope: Construct, construct_id: str, *, functions: HostFunctions) -> None:
        super().__init__(scope, construct_id)
        self.rules: dict[str, events.Rule] = {}
        for spec in manifest.FUNCTIONS:
            if spec.kind != "schedule":
                continue
            rule = events.Rule(
                self,
                f"{pascal(spec.name)}Schedule",
                schedule=events.Schedule.rate(Duration.minutes(spec.every_minutes)),
                description=f"OpenWOP {spec.name}: every {spec.every_minutes} minute(s)",
                targets=[
                    targets.LambdaFunction(
                        functions.alias(spec.name), retry_attempts=RETRY_ATTEMPTS, max_event_age=MAX_EVENT_AGE
                    )
                ],
            )
            acknowledge(
                rule,
                "Serverless-EventBusDLQ",
                f"A tick of {spec.name} carries nothing: one that is not delivered is made up by the next, which "
                "sweeps the same markers; a dead-letter queue would hold only stale ticks.",
            )
            self.rules[spec.name] = rule
