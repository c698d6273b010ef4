"""When the confluent engine commits its open transaction, and how long its next poll waits.

A transaction costs the same round trips whatever it holds, and the loop is blocked while it
commits, so an input that arrives meanwhile waits for the whole commit and then for its own. The
rule, like Kafka Streams' `commit.interval.ms` with an early commit once caught up:

- under load (every poll finds inputs), commit every `interval_s`: large transactions;
- once the input has run dry, commit at once: low latency. Dry means a poll that found
  nothing, not a small batch: a burst (a thousand live streams acking the same second) arrives
  in several fetches, and committing after its first small part held the rest of it for a
  whole commit (two transactions instead of one; in a traced run that split 6 seconds of 20,
  ack-to-commit p99 165 ms, against 112 ms with this rule: docs/benchmarks.md, seventh pass);
- after a poll that found inputs, the next poll does not wait: what librdkafka has fetched
  meanwhile joins the transaction, and a poll that finds nothing commits at once.
"""

from __future__ import annotations


class CommitPacing:
    def __init__(self, interval_s: float, poll_s: float) -> None:
        self.interval_s = interval_s
        self.poll_s = poll_s
        self._reading = False  # the last poll found inputs

    def poll_timeout_s(self, work_left: bool) -> float:
        """How long the next poll may wait for inputs: not at all while inputs are flowing or
        time-driven work is left over (`work_left`), else `poll_s`."""
        return 0.0 if self._reading or work_left else self.poll_s

    def commit_now(self, read: int, pending: bool, since_commit_s: float) -> bool:
        """After a step that read `read` inputs: whether to commit the open transaction, given
        whether it holds anything (`pending`) and the time since the last commit."""
        self._reading = read > 0
        return pending and (read == 0 or since_commit_s >= self.interval_s)


class AbortStreak:
    """When to stop making aborted transactions again and renew the clients instead.

    An abortable error is retried by aborting and making the transaction again. Some never
    clear: after a broker restart, librdkafka's consumer has been seen to stay out of its group
    for good, every `send_offsets_to_transaction` then answering "unknown member" (1 run in 3
    of tests/kafka/txn_across_restart.py with three side by side, still failing after 150 s).
    Only new clients get out of that, so once every transaction has aborted for `max_s` the
    engine renews its clients in process (renewal.py, beside this module), as a restart
    would.
    """

    def __init__(self, max_s: float) -> None:
        self.max_s = max_s
        self._since_s: float | None = None  # the first abort since the last commit

    def committed(self) -> None:
        self._since_s = None

    def aborted(self, now_s: float) -> bool:
        """An abort at `now_s`: whether the streak has outlasted `max_s`."""
        if self._since_s is None:
            self._since_s = now_s
        return now_s - self._since_s >= self.max_s
