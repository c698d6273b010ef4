"""The queue of waiting streams (streams.coordinator.admission.queue) against a plain model: a
dict of each stream's places per class, whatever the order of puts and drops."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.coordinator.admission.queue import Place, Places, WaitQueue

SOURCES = ("S", "T")
STREAMS = tuple(f"s-{i}" for i in range(6))
place = st.one_of(st.none(), st.tuples(st.integers(0, 3), st.integers(0, 3)))
places = st.tuples(place, place, place)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from(SOURCES), st.sampled_from(STREAMS), places),
        st.tuples(st.just("drop"), st.sampled_from(SOURCES), st.sampled_from(STREAMS)),
        st.tuples(
            st.just("ahead"),
            st.sampled_from(SOURCES),
            st.sampled_from(STREAMS),
            st.integers(0, 2),
            st.tuples(st.integers(0, 4), st.integers(0, 4)),
        ),
    ),
    max_size=200,
)


@settings(max_examples=300, deadline=None)
@given(operations)
def test_the_queue_answers_as_a_dict_of_ends_does(ops: list[tuple]) -> None:  # type: ignore[type-arg]
    queue = WaitQueue()
    model: dict[str, dict[str, Places]] = {}
    for op in ops:
        kind, source, stream_id = op[0], op[1], op[2]
        if kind == "put":
            queue.put(source, stream_id, op[3])
            model.setdefault(source, {})[stream_id] = op[3]
        elif kind == "drop":
            queue.drop(source, stream_id)
            model.get(source, {}).pop(stream_id, None)
        else:
            klass, at = op[3], op[4]
            others: list[Place] = [
                p
                for s, e in model.get(source, {}).items()
                if s != stream_id and (p := e[klass]) is not None
            ]
            assert queue.ahead(source, klass, at, stream_id) == any(o < at for o in others)
        for s in SOURCES:
            waiting = model.get(s, {})
            assert (s in queue.sources()) == bool(waiting)
            counts = tuple(sum(e[k] is not None for e in waiting.values()) for k in (0, 1, 2))
            assert queue.counts(s) == counts
            for klass in (0, 1, 2):
                ranked = sorted((p, x) for x, e in waiting.items() if (p := e[klass]) is not None)
                assert queue.best(s, klass, None) == [x for _, x in ranked]
                assert queue.best(s, klass, 2) == [x for _, x in ranked[:2]]


def test_stale_entries_do_not_pile_up() -> None:
    """A stream that moves on at every decision leaves the heap within twice the streams (and a
    slack), not one entry per move."""
    queue = WaitQueue()
    for end_ms in range(10_000):
        queue.put("S", "only", (None, (5, end_ms), None))
    assert len(queue._heaps[("S", 1)]) <= 2 + 64 + 1
    assert queue.ahead("S", 1, (5, 10_000), "other")
    assert queue.ahead("S", 1, (6, 0), "other")  # it began to wait earlier
    assert not queue.ahead("S", 1, (5, 9_999), "other")
    assert not queue.ahead("S", 1, (9, 10_000), "only")  # its own place is not ahead of it
