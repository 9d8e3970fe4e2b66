"""The Trio Kafka client: the producer, consumer and admin client, and the raw connection.

``open_producer``, ``open_consumer`` and ``open_admin`` are the names users import; the client
core (:mod:`trikafka.client.client`) is what they share. ``KafkaConnection`` and
``open_connection`` stay: kio requests in, kio responses out, for tests that speak the protocol.
"""

from trikafka.client.accumulator import RecordFuture, RecordMetadata
from trikafka.client.admin import Admin, open_admin
from trikafka.client.admin_types import (
    AlterConfigOp,
    ConfigResource,
    ConfigResourceType,
    NewTopic,
    OffsetSpec,
    OpType,
)
from trikafka.client.client import CoordinatorType, KafkaClient, open_client
from trikafka.client.cluster import TopicPartition
from trikafka.client.config import ClientConfig
from trikafka.client.connection import (
    ConnectionClosed,
    KafkaConnection,
    connect_tcp,
    open_connection,
)
from trikafka.client.errors import (
    BrokerUnreachableError,
    KafkaClientError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionAbortedError,
    UnknownTopicOrPartitionError,
)
from trikafka.client.producer import Producer, open_producer
from trikafka.client.transport import memory_connector, tcp_connector

__all__ = [
    "Admin",
    "AlterConfigOp",
    "BrokerUnreachableError",
    "ConfigResource",
    "ConfigResourceType",
    "NewTopic",
    "OffsetSpec",
    "OpType",
    "open_admin",
    "ClientConfig",
    "ConnectionClosed",
    "CoordinatorType",
    "KafkaClient",
    "KafkaClientError",
    "KafkaConnection",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "Producer",
    "ProducerFencedError",
    "RecordFuture",
    "RecordMetadata",
    "TopicPartition",
    "TransactionAbortedError",
    "UnknownTopicOrPartitionError",
    "connect_tcp",
    "memory_connector",
    "open_client",
    "open_connection",
    "open_producer",
    "tcp_connector",
]

# The consumer (kept in one block at the end so the producer's and admin's names merge cleanly).
from trikafka.client.consumer import Consumer, open_consumer  # noqa: E402
from trikafka.client.consumer_fetch import NoOffsetForPartitionError, OffsetOutOfRangeError  # noqa: E402
from trikafka.client.fetcher import ConsumerRecord  # noqa: E402
from trikafka.client.group_member import GroupMemberError  # noqa: E402
from trikafka.client.group_offsets import CommitFailedError  # noqa: E402
from trikafka.client.group_session import ConsumerGroupMetadata, RebalanceListener  # noqa: E402
from trikafka.client.serialization import RecordDeserializationError, SerializationContext  # noqa: E402

__all__ += [
    "CommitFailedError",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "GroupMemberError",
    "NoOffsetForPartitionError",
    "OffsetOutOfRangeError",
    "RebalanceListener",
    "RecordDeserializationError",
    "SerializationContext",
    "open_consumer",
]

# The share consumer (KIP-932).
from trikafka.client.share_consumer import ShareConsumer, ShareRecord, open_share_consumer  # noqa: E402

__all__ += ["ShareConsumer", "ShareRecord", "open_share_consumer"]
