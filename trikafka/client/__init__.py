"""The project's minimal Trio client: kio requests in, kio responses out."""

from trikafka.client.connection import (
    ConnectionClosed,
    KafkaConnection,
    connect_tcp,
    open_connection,
)

__all__ = ["ConnectionClosed", "KafkaConnection", "connect_tcp", "open_connection"]
