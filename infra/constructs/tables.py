"""The DynamoDB tables of the resource manifest, one ``TableV2`` each."""

from __future__ import annotations

from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra.constructs.common import DEV_STAGE, pascal, removal_policy
from shared import manifest

_ATTRIBUTE_TYPES = {"S": dynamodb.AttributeType.STRING, "N": dynamodb.AttributeType.NUMBER}


def _attribute(key: tuple[str, manifest.KeyType]) -> dynamodb.Attribute:
    name, kind = key
    return dynamodb.Attribute(name=name, type=_ATTRIBUTE_TYPES[kind])


class HostTables(Construct):
    """One on-demand table per ``manifest.TABLES`` entry: PITR, TTL, encryption, streams and GSIs as declared.

    Construct ids are ``<Key>Table`` (``RunsTable``, ``EventsTable`` ...) and must never change: a new id replaces
    the table.
    """

    def __init__(self, scope: Construct, construct_id: str, *, stage: str) -> None:
        super().__init__(scope, construct_id)
        self._tables: dict[str, dynamodb.TableV2] = {}
        for spec in manifest.TABLES:
            self._tables[spec.key] = dynamodb.TableV2(
                self,
                f"{pascal(spec.key)}Table",
                partition_key=_attribute(spec.partition_key),
                sort_key=_attribute(spec.sort_key) if spec.sort_key else None,
                billing=dynamodb.Billing.on_demand(),
                encryption=dynamodb.TableEncryptionV2.aws_managed_key(),
                point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                    point_in_time_recovery_enabled=True
                ),
                time_to_live_attribute=spec.ttl_attribute,
                dynamo_stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES if spec.stream else None,
                global_secondary_indexes=[
                    dynamodb.GlobalSecondaryIndexPropsV2(
                        index_name=index.name,
                        partition_key=_attribute(index.partition_key),
                        sort_key=_attribute(index.sort_key),
                        projection_type=dynamodb.ProjectionType.ALL,
                    )
                    for index in spec.indexes
                ]
                or None,
                deletion_protection=stage != DEV_STAGE,
                removal_policy=removal_policy(stage),
            )

    def table(self, key: str) -> dynamodb.TableV2:
        return self._tables[key]

    @property
    def tables(self) -> dict[str, dynamodb.TableV2]:
        return dict(self._tables)
