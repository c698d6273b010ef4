"""The Python peer for bench/coordinator_bench.py: a Quix Streams app doing the minimum work.

Run inside .bench/quix-venv (coordinator_bench.py installs it there: Quix's pins conflict with
ours), never imported by Tidemark:

    .bench/quix-venv/bin/python bench/quix_peer.py --bootstrap 127.0.0.1:9092 \
        --input in --output out --events 200000

Per event, keyed by stream: read the key's JSON state, update it, emit one message. It stops by
itself once it has processed `--events` events (Quix commits on stop), or after `--max-seconds`.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
from typing import Any

from quixstreams import Application, State


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", default="bench-quix-peer")
    parser.add_argument("--state-dir", default=".bench/quix-state")
    parser.add_argument("--events", type=int, required=True, help="stop after this many")
    parser.add_argument(
        "--guarantee", choices=["exactly-once", "at-least-once"], default="exactly-once"
    )
    parser.add_argument("--commit-interval", type=float, default=5.0, help="Quix's default")
    parser.add_argument("--max-seconds", type=float, default=300)
    parser.add_argument("--stamp-file", help="write the wall time of the first event here")
    args = parser.parse_args()

    app = Application(
        broker_address=args.bootstrap,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        processing_guarantee=args.guarantee,
        commit_interval=args.commit_interval,
        state_dir=args.state_dir,
        loglevel="WARNING",
        # Our input and output topics exist already (the bench creates them); Quix creates its
        # changelog topic itself through the admin API (the broker's auto-create is off).
        auto_create_topics=True,
    )
    source = app.topic(args.input, value_deserializer="json")
    sink = app.topic(args.output, value_serializer="json")

    processed = 0
    done = threading.Event()

    def update(value: dict[str, Any], state: State) -> dict[str, Any]:
        nonlocal processed
        if not processed and args.stamp_file:
            with open(args.stamp_file, "w") as out:
                out.write(repr(time.time()))
        doc = state.get("s") or {"results": 0, "downstream_ms": 0}
        doc["results"] += 1
        doc["downstream_ms"] = max(doc["downstream_ms"], value["ack_ms"])
        state.set("s", doc)
        processed += 1
        if processed >= args.events and not done.is_set():
            done.set()
            app.stop()  # commits what was processed, then run() returns
        return {"stream_id": value["stream_id"], **doc}

    app.dataframe(source).apply(update, stateful=True).to_topic(sink)

    def watchdog() -> None:
        if not done.wait(args.max_seconds):
            logging.error("quix peer: %d of %d events in %g s; stopping", processed,
                          args.events, args.max_seconds)  # fmt: skip
            app.stop()

    threading.Thread(target=watchdog, daemon=True).start()
    began = time.perf_counter()
    app.run()
    elapsed = time.perf_counter() - began
    print(f"quix peer: processed {processed} events in {elapsed:.1f} s (incl. start-up)")
    return 0 if processed >= args.events else 1


if __name__ == "__main__":
    sys.exit(main())
