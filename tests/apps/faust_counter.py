"""A minimal Faust app for the foundation test: a RocksDB (rocksdict) table counts events.

Run as `python tests/apps/faust_counter.py worker`; configured through environment variables
so that each test gets its own app id, topics and data folder. After each increment the agent
sends the new count to an output topic, which is how the test reads it.
"""

from __future__ import annotations

import logging
import os

import faust

BROKER = os.environ["COUNTER_BROKER"]
APP_ID = os.environ["COUNTER_APP_ID"]
DATA_DIR = os.environ["COUNTER_DATA_DIR"]

app = faust.App(
    APP_ID,
    broker=f"kafka://{BROKER}",
    store="rocksdb://",
    datadir=DATA_DIR,
    topic_partitions=3,
    web_enabled=False,
    processing_guarantee="at_least_once",
    broker_commit_interval=0.2,
)
events = app.topic(f"{APP_ID}-events", key_type=str, value_type=str, partitions=3)
counts_out = app.topic(f"{APP_ID}-counts", key_type=str, value_type=int, partitions=3)
counts = app.Table(
    "counts",
    default=int,
    partitions=3,
    options={"driver": "rocksdict"},
)


@app.agent(events, concurrency=1)
async def count(stream: faust.StreamT[str]) -> None:
    async for key, _ in stream.items():
        counts[key] += 1
        await counts_out.send(key=key, value=counts[key])


if __name__ == "__main__":
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    app.main()
