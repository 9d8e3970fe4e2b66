"""The broker's configuration: ``BrokerConfig`` and the tables it is built from, as pure data
and validation.

- :mod:`~trikafka.config.broker`: ``BrokerConfig`` (every broker key trikafka reads, with its
  validator), ``server.properties`` loading, listeners;
- :mod:`~trikafka.config.fields`: the field definitions and validators ``BrokerConfig`` is built from;
- :mod:`~trikafka.config.topics`: every topic key, its default, type and range;
- :mod:`~trikafka.config.groups`, :mod:`~trikafka.config.share`: the ``group.consumer.*`` and
  share-group keys and their cross-key rules; :mod:`~trikafka.config.racks`: rack-aware fetching;
- :mod:`~trikafka.config.client_metrics`: KIP-714 subscriptions' keys;
- :mod:`~trikafka.config.resources`: Kafka's config resource types (``ConfigResourceType``);
- :mod:`~trikafka.config.kafka_keys`: every key of Kafka's broker configuration (accepted
  without effect where trikafka has nothing to apply);
- :mod:`~trikafka.config.kafka_versions`: ``kafka.version``'s profiles over the generated
  :mod:`~trikafka.config.kafka_versions_data`;
- :mod:`~trikafka.config.properties`: ``.properties`` files and Kafka's time-unit aliases;
- :mod:`~trikafka.config.dev`: the dev defaults every development entry point applies;
- :mod:`~trikafka.config.served`: what of Kafka's API the broker does not serve.

``BrokerConfig`` and the other names below are re-exported here and imported on first use, so
``import trikafka.config.topics`` does not build the broker's config class.
"""

from typing import TYPE_CHECKING

from trikafka.lazy_exports import lazy_exports as _lazy_exports

_LAZY = {
    "BrokerConfig": "trikafka.config.broker",
    "ListenerSpec": "trikafka.config.broker",
    "TIME_ALIASES": "trikafka.config.broker",
    "changed_from_defaults": "trikafka.config.broker",
    "config_keys": "trikafka.config.broker",
    "parse_listeners": "trikafka.config.broker",
    "read_properties_file": "trikafka.config.broker",
}

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time, __getattr__ below
    from trikafka.config.broker import (
        TIME_ALIASES,
        BrokerConfig,
        ListenerSpec,
        changed_from_defaults,
        config_keys,
        parse_listeners,
        read_properties_file,
    )

__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals())

__all__ = [
    "TIME_ALIASES",
    "BrokerConfig",
    "ListenerSpec",
    "changed_from_defaults",
    "config_keys",
    "parse_listeners",
    "read_properties_file",
]
