"""Embed a broker in a Trio program and talk to it with the project's client."""

import trio
from kio.schema.metadata.v12.request import MetadataRequest

from trikafka import open_broker
from trikafka.client import connect_tcp


async def main():
    async with open_broker(listeners="PLAINTEXT://127.0.0.1:0") as broker:
        async with connect_tcp("127.0.0.1", broker.port) as client:
            metadata = await client.request(
                MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
            )
            print("cluster", metadata.cluster_id, "brokers", [(b.host, b.port) for b in metadata.brokers])


trio.run(main)
