"""Kafka's config resource types (``ConfigResource.Type``): what DescribeConfigs,
AlterConfigs and IncrementalAlterConfigs name a resource by — one table for the broker's
answers and the client's requests."""

from __future__ import annotations

import enum

__all__ = ["ConfigResourceType"]


class ConfigResourceType(enum.IntEnum):
    """Kafka's ``ConfigResource.Type`` codes."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16  # client-metrics subscriptions (KIP-714)
    GROUP = 32  # group configs (KIP-848, KIP-932 share groups)
