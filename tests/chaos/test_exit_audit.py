"""The chaos run's audit of exits, native crashes and stalls of `commits`, on hand-made
records (no broker, no process: it checks the checker)."""

from __future__ import annotations

from tests.chaos.exit_audit import Exit, Fault, FaultLog, commit_stalls, stall_after

EXIT_1 = (
    "INFO streams.coordinator.confluent.engine: committed 40 windows\n"
    "ERROR streams.coordinator: abort_transaction: Failed to end transaction: Broker: Producer "
    "attempted a transactional operation in an invalid state\n"
    "INFO streams: bye\n"
)
SEGV = (
    "INFO streams.kafka.lag: lag read\n"
    "Fatal Python error: Segmentation fault\n\n"
    "Thread 0x00007f (most recent call first):\n"
    '  File "streams/kafka/lag.py", line 88 in read\n'
)


def test_an_exit_with_a_status_is_an_unplanned_exit_with_its_last_error() -> None:
    e = Exit("coordinator-0", 1, 0, EXIT_1)
    assert not e.native
    assert e.cause == "status 1"
    assert e.line().startswith("unplanned exit: coordinator-0 at ")
    assert e.line().endswith(
        ", status 1: ERROR streams.coordinator: abort_transaction: Failed to end transaction: "
        "Broker: Producer attempted a transactional operation in an invalid state"
    )
    assert Exit("worker-1", 0, 0, "").line().endswith("status 0: (no output)")


def test_a_signal_or_a_fatal_error_report_is_a_native_crash() -> None:
    # Popen's status of a process killed by a signal the run did not send: minus its number.
    segv = Exit("coordinator-1", -11, 0, "INFO fine\n")
    assert segv.native and segv.cause == "signal SIGSEGV"
    assert segv.line().startswith("native crash: coordinator-1 at ")
    assert Exit("c", -6, 0).cause == "signal SIGABRT"
    # Through a shell: 128 + the signal.
    assert Exit("c", 139, 0).native and Exit("c", 134, 0).cause == "signal SIGABRT"
    # faulthandler's report, whatever the status (it re-raises the signal, or exits).
    report = Exit("coordinator-0", 1, 0, SEGV)
    assert report.native
    assert report.line().endswith("status 1: Fatal Python error: Segmentation fault")
    assert Exit("c", 1, 0, "boom: Segmentation fault (core dumped)\n").native
    assert not Exit("c", 2, 0, "Traceback (most recent call last):\nValueError: x\n").native


def test_the_fault_log_keeps_each_fault_with_its_window() -> None:
    log = FaultLog()
    kill = log.begin("leader-kill", "node 2, leader of results[0]", 1000)
    log.begin("sigkill", "worker-0", 1500).end_ms = 2500
    kill.end_ms = 21_000
    assert log.counts() == {"leader-kill": 1, "sigkill": 1}
    assert [f.end_ms for f in log.faults] == [21_000, 2500]
    assert kill.line().endswith("leader-kill: node 2, leader of results[0] (20.0 s)")


def test_a_stall_counts_from_the_fault_over_gaps_that_begin_in_its_window() -> None:
    records = [0, 1000, 2000, 3000, 40_000, 41_000, 90_000, 91_000]
    # The gap under way at the fault (3000 -> 40000) counts from the fault's start.
    assert stall_after(records, 10_000, 20_000, 100_000) == 30_000
    # A fault whose window covers the gap's start: the whole gap.
    assert stall_after(records, 2500, 5000, 100_000) == 37_000
    # A gap that begins after the window is not this fault's.
    assert stall_after(records, 40_000, 40_500, 100_000) == 1000
    # Gaps beginning inside a long window: the longest of them.
    assert stall_after(records, 0, 60_000, 100_000) == 49_000
    # No record after the fault: stalled up to the end of the read.
    assert stall_after(records, 95_000, 96_000, 100_000) == 5000
    assert stall_after([], 5000, 6000, 8000) == 3000


def test_commit_stalls_take_the_worst_partition_and_fault_per_kind() -> None:
    read_ms = {
        0: [0, 1000, 2000, 3000, 4000, 30_000, 31_000, 32_000, 60_000],
        1: [0, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 60_000],
    }
    first = Fault("node-kill", "node 1", 4500, 5000)
    second = Fault("node-kill", "node 3", 7500, 8000)
    quick = Fault("sigkill", "worker-0", 1200, 1500)
    stalls = commit_stalls(read_ms, [first, quick, second], read_end_ms=60_000)
    assert [(s.kind, s.faults, s.longest_ms, s.partition, s.fault) for s in stalls] == [
        ("node-kill", 2, 52_500, 1, second),
        ("sigkill", 1, 800, 0, quick),
    ]
    assert (
        stalls[0]
        .line()
        .startswith("node-kill (2): longest stall of commits 52.5 s on commits[1], after ")
    )
    # A fault not over by the end of the read: its window runs to the read's end.
    open_fault = Fault("two-down", "nodes 1 and 2", 31_500)
    (stall,) = commit_stalls(read_ms, [open_fault], read_end_ms=60_000)
    assert (stall.longest_ms, stall.partition) == (28_500, 1)
