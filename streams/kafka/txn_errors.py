"""The transactional clients' errors: what the confluent engine does about each (abort and
make the transaction again, or renew the clients: streams.coordinator.confluent.renewal, whose
metric labels are their `reason`)."""

from __future__ import annotations

from streams.errors import TidemarkError


class TransactionAborted(TidemarkError):
    """The open transaction had to be aborted; its outputs, state and offsets are void."""


class TransactionFatal(TidemarkError):
    """The clients are unusable (a fatal error, or a call that gave up): the confluent engine
    renews them (streams.coordinator.confluent.renewal); `reason` labels the renewal."""

    reason = "fatal"


class ProducerFenced(TransactionFatal):
    """The producer was fenced: a newer producer of its transactional.id, or a broker that
    timed its transaction out and bumped its epoch."""

    reason = "fenced"


class AbortFailed(TransactionFatal):
    """abort_transaction failed, e.g. INVALID_TXN_STATE once the broker has rolled the
    transaction back on its timeout (librdkafka #3297, #4849)."""

    reason = "abort_failed"


class ConsumerStalled(TransactionFatal):
    """The consumer sits behind records it could read, for longer than a bound
    (streams.kafka.progress): a librdkafka fetcher wedged, say after a broker restart."""

    reason = "stalled_consumer"


class CallStuck(TransactionFatal):
    """A librdkafka call did not return long after its deadline (its timeout ignored: see
    docs/reliability.md "A coordinator hung for minutes after a broker restart"); it is left
    running on its thread and the clients are abandoned."""

    reason = "stuck_call"
