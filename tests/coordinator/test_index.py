"""The due-index: per partition, which streams need the clock and when (lazy deletion)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.coordinator.index import DueIndex


def test_pop_due_returns_streams_at_or_before_now_in_wake_order_and_removes_them() -> None:
    index = DueIndex()
    index.set(0, "b", 200)
    index.set(0, "a", 100)
    index.set(0, "c", 300)
    index.set(1, "d", 50)

    assert index.next_wake_ms(0) == 100 and index.next_wake_ms(1) == 50
    assert index.pop_due(0, 99) == []
    assert index.pop_due(0, 200) == ["a", "b"]
    assert index.pop_due(0, 200) == []
    assert index.next_wake_ms(0) == 300
    assert len(index) == 2  # "c" and partition 1's "d"


def test_set_replaces_a_stream_wake_in_either_direction() -> None:
    index = DueIndex()
    index.set(0, "a", 100)
    index.set(0, "a", 500)  # later: the old entry must not fire
    assert index.next_wake_ms(0) == 500
    assert index.pop_due(0, 499) == []

    index.set(0, "a", 50)  # earlier
    assert index.next_wake_ms(0) == 50
    assert index.pop_due(0, 1000) == ["a"]  # once, although three entries were pushed
    assert index.next_wake_ms(0) is None and len(index) == 0


def test_set_none_removes_the_stream() -> None:
    index = DueIndex()
    index.set(0, "a", 100)
    index.set(0, "b", 200)
    index.set(0, "a", None)
    assert index.next_wake_ms(0) == 200
    assert index.pop_due(0, 1000) == ["b"]
    index.set(0, "never-set", None)
    assert len(index) == 0


def test_a_wake_moved_later_comes_up_in_order_with_the_others() -> None:
    index = DueIndex()
    index.set(0, "a", 100)
    index.set(0, "b", 200)
    index.set(0, "a", 300)  # later: its entry at 100 stays in the heap
    index.set(0, "c", 250)
    assert index.pop_due(0, 250, limit=1) == ["b"]
    assert index.next_wake_ms(0) == 250
    assert index.pop_due(0, 1000) == ["c", "a"]


def test_a_stream_popped_and_set_again_to_the_same_wake_is_indexed_again() -> None:
    index = DueIndex()
    index.set(0, "a", 100)
    assert index.pop_due(0, 100) == ["a"]
    index.set(0, "a", 100)
    assert index.next_wake_ms(0) == 100
    assert index.pop_due(0, 100) == ["a"]


def test_drop_forgets_one_partition_only() -> None:
    index = DueIndex()
    index.set(0, "a", 100)
    index.set(1, "b", 100)
    index.drop(0)
    index.drop(7)  # never seen: no error
    assert index.next_wake_ms(0) is None and index.pop_due(0, 1000) == []
    assert index.pop_due(1, 1000) == ["b"]


def test_an_unknown_partition_is_empty() -> None:
    index = DueIndex()
    assert index.next_wake_ms(3) is None
    assert index.pop_due(3, 10**15) == []
    assert len(index) == 0


# A dict model: partition -> {stream_id: wake_ms}.
streams = st.sampled_from(["a", "b", "c", "d"])
partitions = st.integers(0, 2)
wakes = st.integers(0, 20)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("set"), partitions, streams, st.none() | wakes),
        st.tuples(st.just("pop_due"), partitions, wakes, st.none() | st.integers(1, 3)),
        st.tuples(st.just("next_wake_ms"), partitions),
        st.tuples(st.just("drop"), partitions),
    ),
    max_size=60,
)


@settings(max_examples=1000, deadline=None)
@given(operations)
def test_the_index_behaves_like_a_dict_of_wake_times(ops: list[tuple[Any, ...]]) -> None:
    index = DueIndex()
    model: dict[int, dict[str, int]] = {}
    for op in ops:
        name, p, *args = op
        wakes_of = model.setdefault(p, {})
        if name == "set":
            stream_id, wake_ms = args
            index.set(p, stream_id, wake_ms)
            if wake_ms is None:
                wakes_of.pop(stream_id, None)
            else:
                wakes_of[stream_id] = wake_ms
        elif name == "pop_due":
            now_ms, limit = args
            due = sorted((w, s) for s, w in wakes_of.items() if w <= now_ms)[:limit]
            assert index.pop_due(p, now_ms, limit) == [s for _, s in due]
            for _, s in due:
                del wakes_of[s]
        elif name == "next_wake_ms":
            assert index.next_wake_ms(p) == min(wakes_of.values(), default=None)
        else:
            index.drop(p)
            wakes_of.clear()
        assert len(index) == sum(len(w) for w in model.values())
    for p, wakes_of in model.items():
        assert index.next_wake_ms(p) == min(wakes_of.values(), default=None)
