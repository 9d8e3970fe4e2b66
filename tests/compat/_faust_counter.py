"""The faust app tests/compat/test_stream_changelogs.py runs as a worker process: a count
per key in a Table (its changelog topic ``counter-counts-changelog``, compacted), each new
count also sent to the ``faust-counts`` topic for the test to read. The memory store keeps nothing
locally, so every start of a worker restores the table from the changelog."""

from __future__ import annotations

import os

import faust

__all__ = ["app"]

app = faust.App(
    "counter",
    broker="kafka://" + os.environ["COUNTER_BOOTSTRAP"],
    store="memory://",
    topic_partitions=1,
    topic_replication_factor=1,
    web_enabled=False,  # the worker binds its web port all the same: on 127.0.0.1, a free one
    web_bind="127.0.0.1",
    web_port=int(os.environ["COUNTER_WEB_PORT"]),
    producer_max_batch_size=8192,  # a produce request must fit the broker's 16 KiB segments
)
clicks = app.topic("faust-clicks", key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")
counts_out = app.topic("faust-counts", key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")
# Keys and values JSON in the changelog (str and int): faust decodes a table's changelog with the
# table's serializers on recovery, so raw bytes keys would not come back.
counts = app.Table("counts", default=int, partitions=1, key_type=str, value_type=int)


@app.agent(clicks)
async def count(stream):
    async for key, _value in stream.items():
        name = key.decode()
        counts[name] += 1
        await counts_out.send(key=key, value=str(counts[name]).encode())
