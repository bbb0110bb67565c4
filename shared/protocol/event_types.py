"""The registered v2 event type names (events.md §2): the keys of the root ``_typeIndex`` of the spec's
``schemas/v2/run-event-payloads.schema.json`` (openwop/openwop-sdks, commit 33f1a23f), 118 names, in that
order. A webhook subscription filters on these (webhooks.md: ``events[]`` are v2 event type names); the types this
host emits are a subset (``shared.protocol.codes``; a unit test keeps it so).
"""

from __future__ import annotations

V2_EVENT_TYPES: frozenset[str] = frozenset((
    "run.started", "run.completed", "run.failed", "run.cancelled", "run.resume-started", "run.paused",
    "run.resumed", "run.restored-from-snapshot", "run.dead-lettered", "node.started", "node.completed",
    "node.failed", "node.suspended", "node.suspend-failed", "node.resumed", "node.retried", "node.skipped",
    "node.cancelled", "approval.requested", "approval.received", "approval.granted", "approval.rejected",
    "approval.overridden", "clarification.requested", "clarification.resolved", "interrupt.requested",
    "interrupt.resolved", "channel.written", "channel.presence", "context.summarized", "artifact.created",
    "output.chunk", "variable.changed", "log.appended", "version.pinned", "workflow.restored",
    "workflow.loopback-limit", "workflow.stalled", "cap.breached", "lease.acquired", "lease.renewed", "lease.lost",
    "lease.handed-off", "replay.diverged", "replay.diverged-at-refusal", "agent.reasoned", "agent.reasoning-delta",
    "provider.usage", "prompt.composed", "agent.prompt-resolved", "model.capability-substituted",
    "model.capability-insufficient", "envelope.retry-attempted", "envelope.retry-exhausted", "envelope.refusal",
    "envelope.truncated", "envelope.nl-to-format-engaged", "envelope.recovery-applied", "agent.tool-called",
    "agent.tool-returned", "agent.handoff", "agent.decided", "agent.verified", "agent.invocation-started",
    "agent.invocation-completed", "eval.started", "eval.scored", "eval.completed", "deployment.promoted",
    "deployment.rolled-back", "deployment.canary-adjusted", "deployment.state-changed", "roster.run-initiated",
    "tool.session-opened", "tool.session-closed", "egress.decided", "trigger.subscription-state-changed",
    "trigger.delivery-attempted", "budget.reserved", "budget.consumed", "budget.threshold-crossed",
    "budget.exhausted", "orchestrator.decided", "node.dispatched", "dispatch.fanned-out", "dispatch.joined",
    "conversation.opened", "conversation.exchanged", "conversation.closed", "memory.compacted", "memory.written",
    "agent.memory-consolidated", "commitment.fired", "workspace.updated", "workflow-chain.event",
    "workflow-chain.confidence-escalated", "connector.authorized", "connector.auth-expired",
    "authorization.decided", "proposal.created", "proposal.activated", "goal.evaluated", "goal.closed",
    "import.applied", "voice.speech-start", "voice.transcript", "voice.endpoint-candidate", "voice.turn-commit",
    "voice.synthesis-chunk", "voice.barge-in", "voice.cancelled", "compensation.requested", "compensation.started",
    "compensation.completed", "compensation.failed", "compensation.paused",
    "compensation.manual-intervention-required", "negotiation.decided"
))
