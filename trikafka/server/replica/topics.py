"""Topics: names, ids, partition counts and config overrides — the broker's own metadata.

Kafka keeps this in its KRaft metadata log; a single trikafka broker keeps it in
``<first log dir>/trikafka-topics.json`` (written atomically: temp file, fsync, rename), and in
memory only when there are no log dirs. Names follow Kafka's rules exactly (``Topic.validate``):
1–249 characters of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``, and no two topics that differ only
in ``.`` versus ``_``.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from trikafka.errors import ErrorCode, KafkaProtocolError
from trikafka.security.files import write_text_atomically

__all__ = ["TopicInfo", "TopicStore", "validate_topic_name", "MAX_NAME_LENGTH"]

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> None:
    """Raise INVALID_TOPIC_EXCEPTION with Kafka's reason when ``name`` is not legal."""
    if not name:
        reason = "Topic name is illegal, it can't be empty"
    elif name in (".", ".."):
        reason = "Topic name cannot be \".\" or \"..\""
    elif len(name) > MAX_NAME_LENGTH:
        reason = (
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
            f"topic name: {name}"
        )
    elif not _LEGAL.fullmatch(name):
        reason = (
            f"Topic name \"{name}\" is illegal, it contains a character other than ASCII "
            "alphanumerics, '.', '_' and '-'"
        )
    else:
        return
    raise KafkaProtocolError(reason, ErrorCode.invalid_topic_exception)


def _collision_key(name: str) -> str:
    return name.replace(".", "_")


def _json_value(instance: Any, field: Any, value: Any) -> Any:
    """``attrs.asdict`` hook: topic ids are written as strings (tuples become lists anyway)."""
    return str(value) if isinstance(value, uuid.UUID) else value


@attrs.define
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, Any] = attrs.Factory(dict)  # typed topic-level overrides
    is_internal: bool = False

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TopicInfo:
        return cls(
            name=data["name"],
            topic_id=uuid.UUID(data["topic_id"]),
            partitions=int(data["partitions"]),
            configs={k: tuple(v) if isinstance(v, list) else v for k, v in data["configs"].items()},
            is_internal=bool(data.get("is_internal", False)),
        )


class TopicStore:
    """The set of topics, by name and by id, saved on every change when ``path`` is set.

    Every operation is O(1) or O(topics) once per change, never per topic of a batch: the
    ``.``/``_`` collision check looks its key up, the sorted order is kept until a change, and
    inside :meth:`deferred_saves` (one CreateTopics request) the file is written once at the
    end rather than once per topic. ``version`` counts changes, so a cache of anything derived
    from the topics (Metadata answers) knows when it is stale without comparing them all.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._by_name: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self._collision: dict[str, str] = {}  # collision key → the topic holding it
        self._sorted: list[TopicInfo] | None = None
        self._defer = 0
        self._dirty = False
        #: Incremented by every change: a topic added or removed, or changed then saved.
        self.version = 0
        #: Partitions of every topic together (``max.broker.partitions`` bounds it).
        self.total_partitions = 0
        if path is not None and path.exists():
            for item in json.loads(path.read_text())["topics"]:
                self._add(TopicInfo.from_json(item))

    def _add(self, topic: TopicInfo) -> None:
        self._by_name[topic.name] = topic
        self._by_id[topic.topic_id] = topic
        self._collision[_collision_key(topic.name)] = topic.name
        self.total_partitions += topic.partitions
        self._changed()

    def _changed(self) -> None:
        self._sorted = None
        self.version += 1

    def __iter__(self) -> Iterator[TopicInfo]:
        if self._sorted is None:
            self._sorted = sorted(self._by_name.values(), key=lambda t: t.name)
        return iter(self._sorted)

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def get(self, name: str) -> TopicInfo | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def check_new_name(self, name: str) -> None:
        validate_topic_name(name)
        if name in self._by_name:
            raise KafkaProtocolError(f"Topic '{name}' already exists.", ErrorCode.topic_already_exists)
        existing = self._collision.get(_collision_key(name))
        if existing is not None:
            raise KafkaProtocolError(
                f"Topic '{name}' collides with existing topic: {existing}",
                ErrorCode.invalid_topic_exception,
            )

    def add(self, topic: TopicInfo) -> None:
        self._add(topic)
        self.save()

    def remove(self, name: str) -> TopicInfo:
        topic = self._by_name.pop(name)
        self._by_id.pop(topic.topic_id, None)
        if self._collision.get(_collision_key(name)) == name:
            del self._collision[_collision_key(name)]
        self.total_partitions -= topic.partitions
        self._changed()
        self.save()
        return topic

    def check_room(self, adding: int, cap: int) -> None:
        """POLICY_VIOLATION naming ``max.broker.partitions`` when ``adding`` more partitions
        would take the broker past ``cap`` (internal topics count, but are never refused)."""
        if self.total_partitions + adding > cap:
            raise KafkaProtocolError(
                f"Adding {adding:,} partition(s) to the {self.total_partitions:,} this broker holds "
                f"would exceed max.broker.partitions={cap:,}.",
                ErrorCode.policy_violation,
            )

    def set_partitions(self, topic: TopicInfo, count: int) -> None:
        """Grow a topic to ``count`` partitions (CreatePartitions), and save."""
        self.total_partitions += count - topic.partitions
        topic.partitions = count
        self.save()

    @contextmanager
    def deferred_saves(self) -> Iterator[None]:
        """Within: changes are saved once, on the way out (also when it raises), so a
        request creating many topics writes the file once — before it is answered."""
        self._defer += 1
        try:
            yield
        finally:
            self._defer -= 1
            if not self._defer and self._dirty:
                self.save()

    def save(self) -> None:
        """Write the topics (an in-place change to a topic is saved, and counted, here)."""
        self._changed()
        if self.path is None:
            return
        if self._defer:
            self._dirty = True
            return
        self._dirty = False
        data = json.dumps(
            {"version": 1, "topics": [attrs.asdict(t, value_serializer=_json_value) for t in self]}, indent=1
        )
        write_text_atomically(self.path, data)  # temporary file, fsync, rename, directory fsync
