"""v2 consumer instances: a Trio consumer per instance, kept between requests, expired on disuse.

An instance is ``POST /consumers/{group}``'s answer: a group consumer of its own, opened with
the creating caller's credentials, living in a task of the proxy's nursery until ``DELETE``,
the proxy's stop, or ``consumer.instance.timeout.ms`` without a request (Confluent's rule and
default, 5 minutes). Requests to one instance run one at a time (its lock): the consumer
polls, seeks and commits from one caller at a time, as Java's KafkaConsumer demands.

The expiry watch reads trio's clock, so a test's MockClock drives it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

import attrs
import trio

from trikafka.client import Consumer, open_consumer
from trikafka.rest import errors
from trikafka.rest.clients import check_credentials

__all__ = ["ConsumerInstance", "ConsumerInstances"]

log = logging.getLogger("trikafka.rest")


@attrs.define(eq=False)
class ConsumerInstance:
    group: str
    name: str
    format: str
    consumer: Consumer
    request_timeout_ms: int
    #: trio.current_time() of the last request; the instance expires timeout after it.
    last_used: float
    lock: trio.Lock = attrs.field(factory=trio.Lock)
    done: trio.Event = attrs.field(factory=trio.Event)
    closed: trio.Event = attrs.field(factory=trio.Event)
    #: Partitions were assigned by hand (``…/assignments``): subscribing is refused until
    #: ``DELETE …/subscription`` (Kafka's rule: one way of getting partitions at a time).
    assigned_by_hand: bool = False
    #: The credentials it was created with (None: the proxy's own): another caller's
    #: requests do not find it, so one user cannot read through another's consumer.
    owner: Any = None


class ConsumerInstances:
    """The live instances by (group, name), and the task that expires them."""

    def __init__(
        self, bootstrap: Any, nursery: trio.Nursery, *, timeout_ms: int, check_interval_s: float | None = None
    ) -> None:
        self.bootstrap = bootstrap
        self.nursery = nursery
        self.timeout_s = timeout_ms / 1000
        self.check_interval_s = check_interval_s or min(max(self.timeout_s / 10, 0.01), 1.0)
        #: How long a new instance's first Metadata round trip may take.
        self.check_timeout_s = 10.0
        self.instances: dict[tuple[str, str], ConsumerInstance] = {}
        self._creating: set[tuple[str, str]] = set()

    async def create(
        self, group: str, name: str, fmt: str, config: Mapping[str, Any], request_timeout_ms: int, owner: Any = None
    ) -> ConsumerInstance:
        key = (group, name)
        if key in self.instances or key in self._creating:
            raise errors.consumer_already_exists(group, name)
        self._creating.add(key)
        try:
            instance: ConsumerInstance = await self.nursery.start(
                self._serve, group, name, fmt, dict(config), request_timeout_ms, name=f"rest-consumer-{group}-{name}"
            )
            instance.owner = owner
            await check_credentials(instance.consumer.client, self.check_timeout_s, f"consumer {name!r}", instance.done)
        finally:
            self._creating.discard(key)
        self.instances[key] = instance
        log.info("HTTP proxy: consumer instance %r of group %r created (%s)", name, group, fmt)
        return instance

    async def _serve(
        self,
        group: str,
        name: str,
        fmt: str,
        config: dict[str, Any],
        request_timeout_ms: int,
        *,
        task_status: trio.TaskStatus[ConsumerInstance],
    ) -> None:
        instance = None
        try:
            async with open_consumer(self.bootstrap, **config) as consumer:
                instance = ConsumerInstance(group, name, fmt, consumer, request_timeout_ms, trio.current_time())
                task_status.started(instance)
                await instance.done.wait()
                async with instance.lock:  # let a request in flight finish first
                    pass
        finally:
            if instance is not None:
                self.instances.pop((group, name), None)
                instance.closed.set()

    def get(self, group: str, name: str, owner: Any = None) -> ConsumerInstance:
        instance = self.instances.get((group, name))
        if instance is None or instance.done.is_set() or instance.owner != owner:
            raise errors.consumer_instance_not_found(group, name)
        instance.last_used = trio.current_time()
        return instance

    async def delete(self, group: str, name: str, owner: Any = None) -> None:
        instance = self.get(group, name, owner)
        instance.done.set()
        self.instances.pop((group, name), None)
        await instance.closed.wait()
        log.info("HTTP proxy: consumer instance %r of group %r deleted", name, group)

    def expire(self, now: float) -> list[ConsumerInstance]:
        """Close every instance unused for the timeout; the ones closed."""
        expired = [
            i for i in self.instances.values()
            if not i.lock.locked() and now - i.last_used >= self.timeout_s
        ]
        for instance in expired:
            log.info(
                "HTTP proxy: consumer instance %r of group %r expired (unused for consumer.instance.timeout.ms=%d)",
                instance.name, instance.group, round(self.timeout_s * 1000),
            )
            instance.done.set()
            self.instances.pop((instance.group, instance.name), None)
        return expired

    async def run_expiry(self) -> None:
        while True:
            next_due = min((i.last_used + self.timeout_s for i in self.instances.values()), default=math.inf)
            await trio.sleep(max(min(self.check_interval_s, next_due - trio.current_time()), 0))
            self.expire(trio.current_time())

    def close_all(self) -> None:
        for instance in list(self.instances.values()):
            instance.done.set()

    async def close_all_and_wait(self) -> None:
        instances = list(self.instances.values())
        self.close_all()
        for instance in instances:
            await instance.closed.wait()
