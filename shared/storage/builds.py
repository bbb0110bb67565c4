"""The run store that records, in every new run, the build that started it (``data.build``).

A run created by build N may be advanced by build N+1 after a deploy (the functions' alias moves, a canary first);
the engine version it records decides whether a build may advance it (``shared.engine.version``). The stamp is
part of the run's creation facts, so it is written in the run item's one ``PutItem`` (no extra request).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from shared.engine.version import BUILD_KEY, build_stamp
from shared.ports import RunRecord
from shared.storage.dynamodb import DynamoRunStore


class BuildStampedRunStore(DynamoRunStore):
    def __init__(self, *args: Any, build_id: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._build = build_stamp(build_id)

    def create_run(self, record: RunRecord) -> None:
        super().create_run(replace(record, data={**record.data, BUILD_KEY: dict(self._build)}))
