"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, and DescribeCluster.

Config sources are Kafka's: a topic override is TOPIC_CONFIG; a value set at run time for one
broker (resource name ``"<node id>"``) is DYNAMIC_BROKER_CONFIG, for the cluster default
(``""``) DYNAMIC_DEFAULT_BROKER_CONFIG; a value the broker was started with (its
server.properties or flags) is STATIC_BROKER_CONFIG; the rest DEFAULT_CONFIG. Synonyms list
the chain a value comes from in that order, most specific first, as Kafka's do; ``read_only``
is true for a key whose update mode is read-only (``trikafka/config/update_modes.py``).
DescribeConfigs of the cluster default (BROKER ``""``) lists the default-level dynamic
configs only, as Kafka does.

AlterConfigs replaces a resource's whole set of overrides; IncrementalAlterConfigs applies
SET / DELETE / APPEND / SUBTRACT per key. Which broker keys may change at run time, what
trikafka does with them and where they are kept is ``server/dynamic_broker_config.py``.
"""

from __future__ import annotations

from typing import Any

import attrs

from trikafka.config import BrokerConfig
from trikafka.config.client_metrics import CLIENT_METRICS_RESOURCE
from trikafka.config.resources import ConfigResourceType
from trikafka.config.update_modes import READ_ONLY, update_mode
from trikafka.errors import ConfigError, ErrorCode, KafkaProtocolError
from trikafka.network.request_channel import Request
from trikafka.protocol.entities import build
from trikafka.protocol.registry import ApiKey
from trikafka.security.authorizer import AclOperation
from trikafka.security.authorizer import ResourceType as AclResource
from trikafka.security.config import SECURITY_KEYS, SENSITIVE
from trikafka.server.apis.broker_logger_resources import BROKER_LOGGER_RESOURCE, alter_loggers, logger_entries
from trikafka.server.apis.client_metrics_resources import (
    LIST_KEYS,
    alter_subscription,
    subscription_entries,
    subscription_overrides,
)
from trikafka.server.apis.group_config_resources import (
    GROUP_RESOURCE,
    alter_group_configs,
    group_config_entries,
    group_overrides,
)
from trikafka.server.dynamic_broker_config import INERT_BROKER_KEYS, applied, check_broker_overrides
from trikafka.server.kafka_apis import Answer, ApiFamily, errors_into, handles
from trikafka.server.replica.topic_config import (
    TOPIC_CONFIGS,
    format_value,
    parse_value,
    validate_topic_configs,
)

__all__ = ["ConfigApis", "ClusterApis", "topic_config_entries", "ConfigSource"]



class ConfigSource:
    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class OpType:
    SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


_CONFIG_TYPE = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7}
_DEFAULTS = BrokerConfig(listeners="PLAINTEXT://127.0.0.1:9092").as_properties()  # type: ignore[arg-type]  # converted


@attrs.frozen
class BrokerLevels:
    """Where a broker key's value can come from, for one answering broker: its own dynamic
    overrides, the cluster default's, and its static config."""

    own: dict[str, str]
    default: dict[str, str]
    static: dict[str, str]

    @classmethod
    def of(cls, context: Any, node: BrokerConfig | None = None, per_broker: bool = True) -> BrokerLevels:
        """``node``: the answering broker's config (its NODE_KEYS); ``per_broker`` False: the
        cluster default's view (no broker's own overrides)."""
        node = node or context.config
        store = context.dynamic_configs
        static = context.replicas.static_config.as_properties()
        static.update({key: value for key, value in node.as_properties().items() if key in NODE_KEYS})
        return cls(store.overrides(str(node.node_id)) if per_broker else {}, store.overrides(""), static)

    def synonyms(self, key: str, sensitive: bool = False) -> list[dict[str, Any]]:
        """Kafka's synonym chain of ``key``: DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
        STATIC_BROKER_CONFIG, DEFAULT_CONFIG — each level that has a value."""
        chain: list[tuple[str, int]] = []
        if key in self.own:
            chain.append((self.own[key], ConfigSource.DYNAMIC_BROKER_CONFIG))
        if key in self.default:
            chain.append((self.default[key], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
        kafka_default = _DEFAULTS.get(key)
        static = self.static.get(key)
        if static is not None and static != kafka_default:
            chain.append((static, ConfigSource.STATIC_BROKER_CONFIG))
        if kafka_default not in (None, ""):
            chain.append((kafka_default, ConfigSource.DEFAULT_CONFIG))
        return [{"name": key, "value": None if sensitive else value, "source": source} for value, source in chain]

    def source(self, key: str) -> int:
        chain = self.synonyms(key)
        return chain[0]["source"] if chain else ConfigSource.DEFAULT_CONFIG


def topic_config_entries(context: Any, topic: Any, keys: Any = None) -> list[dict[str, Any]]:
    replicas = context.replicas
    effective = replicas.effective_config(topic)
    levels = BrokerLevels.of(context)
    entries = []
    for name, definition in TOPIC_CONFIGS.items():
        if keys is not None and name not in keys:
            continue
        synonyms = []
        if name in topic.configs:
            synonyms.append({"name": name, "value": format_value(topic.configs[name]),
                             "source": ConfigSource.TOPIC_CONFIG})
        if definition.broker_key:
            synonyms += levels.synonyms(definition.broker_key)
        source = synonyms[0]["source"] if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(
            {
                "name": name,
                "value": format_value(effective[name]),
                "read_only": False,
                "config_source": source,
                "is_sensitive": False,
                "synonyms": synonyms,
                "config_type": _CONFIG_TYPE.get(definition.kind, 0),
                "documentation": definition.doc,
                "is_default": source == ConfigSource.DEFAULT_CONFIG,
            }
        )
    return entries


#: Keys each broker of an in-process cluster has of its own (the rest are the cluster's).
NODE_KEYS = ("node.id", "broker.rack", "listeners", "advertised.listeners", "log.dirs")


def _broker_entry(
    levels: BrokerLevels, key: str, doc: str | None, config_type: int, sensitive: bool = False
) -> dict[str, Any]:
    synonyms = levels.synonyms(key, sensitive)
    value = synonyms[0]["value"] if synonyms else None
    source = synonyms[0]["source"] if synonyms else ConfigSource.DEFAULT_CONFIG
    return {
        "name": key, "value": value if value != "" else None, "read_only": update_mode(key) == READ_ONLY,
        "config_source": source, "is_sensitive": sensitive, "synonyms": synonyms,
        "config_type": config_type, "documentation": doc, "is_default": source == ConfigSource.DEFAULT_CONFIG,
    }


def broker_config_entries(context: Any, keys: Any = None, node: BrokerConfig | None = None) -> list[dict[str, Any]]:
    """The answering broker's entries (``node``: its config): every key trikafka reads, then
    the dynamic keys stored for it that trikafka has no field for."""
    levels = BrokerLevels.of(context, node)
    config = context.replicas.config
    entries = []
    for field in attrs.fields(BrokerConfig):
        key = field.metadata["key"]
        if field.name == "security":  # one field, many keys
            for name, (_, _, doc) in SECURITY_KEYS.items():
                if keys is None or name in keys:
                    entries.append(_broker_entry(levels, name, doc, 0, sensitive=name in SENSITIVE))
            continue
        if keys is None or key in keys:
            config_type = 1 if isinstance(getattr(config, field.name), bool) else 0
            entries.append(_broker_entry(levels, key, field.metadata["doc"], config_type))
    entries += _stored_only_entries(levels, {**levels.default, **levels.own}, keys)
    return entries


def default_broker_config_entries(context: Any, keys: Any = None) -> list[dict[str, Any]]:
    """DescribeConfigs of BROKER ``""``: the cluster default's dynamic configs, as Kafka lists them."""
    levels = BrokerLevels.of(context, per_broker=False)
    known = set(levels.static)
    entries = []
    for key in sorted(levels.default):
        if keys is not None and key not in keys:
            continue
        if key in known:
            entries.append(_broker_entry(levels, key, None, 0, sensitive=key in SENSITIVE))
    return entries + _stored_only_entries(levels, levels.default, keys)


def _stored_only_entries(levels: BrokerLevels, stored: dict[str, str], keys: Any) -> list[dict[str, Any]]:
    """Dynamic keys trikafka has no field for (replication throttles, Kerberos …): as stored."""
    entries = []
    for key in sorted(set(stored) - set(levels.static)):
        if keys is not None and key not in keys:
            continue
        definition = INERT_BROKER_KEYS.get(key)
        config_type = _CONFIG_TYPE[definition.kind] if definition is not None else 0
        entries.append(_broker_entry(levels, key, definition.doc if definition else None, config_type,
                                     sensitive=_is_password(key)))
    return entries


def _is_password(key: str) -> bool:
    """Kafka's PASSWORD-typed keys (a listener-prefixed one too): described without a value."""
    return key.endswith((
        "password", "ssl.keystore.key", "ssl.truststore.certificates", "ssl.keystore.certificate.chain",
        "sasl.jaas.config",
    ))


def _append_or_subtract(items: list[str], value: str | None, append: bool) -> list[str]:
    for item in (value or "").split(","):
        item = item.strip()
        if not item:
            continue
        if append and item not in items:
            items.append(item)
        elif not append and item in items:
            items.remove(item)
    return items


class ConfigApis(ApiFamily):
    def _check_access(self, request: Request, resource: Any, operation: AclOperation) -> None:
        """DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, or on the cluster for a broker."""
        if resource.resource_type == ConfigResourceType.TOPIC:
            if not self.authorize(request, operation, AclResource.TOPIC, resource.resource_name):
                raise KafkaProtocolError("Topic authorization failed.", ErrorCode.topic_authorization_failed)
        elif resource.resource_type == GROUP_RESOURCE:
            if not self.authorize(request, operation, AclResource.GROUP, resource.resource_name):
                raise KafkaProtocolError("Group authorization failed.", ErrorCode.group_authorization_failed)
        elif resource.resource_type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER,
                                        ConfigResourceType.CLIENT_METRICS):
            if not self.authorize(request, operation, AclResource.CLUSTER):
                raise KafkaProtocolError("Cluster authorization failed.", ErrorCode.cluster_authorization_failed)

    def _check_broker_name(self, name: str) -> None:
        """Kafka's validateResourceNameIsCurrentNodeId (an empty name: the cluster default)."""
        if name != "":
            self._check_node_id(name)

    def _check_node_id(self, name: str) -> None:
        """Kafka's validateResourceNameIsCurrentNodeId."""
        node_id = self.context.config.node_id
        try:
            named = int(name)
        except ValueError:
            raise KafkaProtocolError(
                f"Node id must be an integer, but it is: {name}", ErrorCode.invalid_request
            ) from None
        if named != node_id:
            raise KafkaProtocolError(
                f"Unexpected broker id, expected {node_id}, but received {name}", ErrorCode.invalid_request
            )

    @handles(ApiKey.DESCRIBE_CONFIGS)
    async def handle_describe_configs_request(self, request: Request) -> Any:
        body = request.body
        results = []
        for resource in body.resources:
            keys = set(resource.configuration_keys) if resource.configuration_keys is not None else None
            result: dict[str, Any] = {
                "error_code": ErrorCode.none,
                "error_message": None,
                "resource_type": resource.resource_type,
                "resource_name": resource.resource_name,
                "configs": [],
            }
            with errors_into(result, message=True):
                self._check_access(request, resource, AclOperation.DESCRIBE_CONFIGS)
                if resource.resource_type == ConfigResourceType.TOPIC:
                    topic = self.replicas.topics.get(resource.resource_name)
                    if topic is None:
                        raise KafkaProtocolError(
                            f"Topic {resource.resource_name} does not exist", ErrorCode.unknown_topic_or_partition
                        )
                    entries = topic_config_entries(self.context, topic, keys)
                elif resource.resource_type == ConfigResourceType.BROKER:
                    self._check_broker_name(resource.resource_name)
                    if resource.resource_name == "":
                        entries = default_broker_config_entries(self.context, keys)
                    else:
                        entries = broker_config_entries(self.context, keys, self.context.config)
                elif resource.resource_type == BROKER_LOGGER_RESOURCE:
                    self._check_node_id(resource.resource_name)
                    entries = logger_entries(keys)
                elif resource.resource_type == GROUP_RESOURCE:
                    entries = group_config_entries(self.context, resource.resource_name, keys,
                                                   BrokerLevels.of(self.context).source)
                elif resource.resource_type == CLIENT_METRICS_RESOURCE:
                    entries = subscription_entries(self.context, resource.resource_name, keys)
                else:
                    raise KafkaProtocolError(
                        f"Unsupported resource type {resource.resource_type}", ErrorCode.invalid_request
                    )
                if not body.include_synonyms:
                    for entry in entries:
                        entry["synonyms"] = []
                if not getattr(body, "include_documentation", False):
                    for entry in entries:
                        entry["documentation"] = None
                result["configs"] = entries
            results.append(result)
        return Answer(throttle_time=0, results=results)

    def _alter(self, resource: Any, new_overrides: Any, validate_only: bool) -> None:
        """Apply a resource's complete new set of overrides."""
        if resource.resource_type == ConfigResourceType.TOPIC:
            try:
                typed = validate_topic_configs(new_overrides)
            except ConfigError as exc:
                raise KafkaProtocolError(str(exc), ErrorCode.invalid_config) from None
            self.replicas.alter_topic_config(resource.resource_name, typed, validate_only=validate_only)
        elif resource.resource_type == ConfigResourceType.BROKER:
            self._alter_broker(resource.resource_name, new_overrides, validate_only)
        elif resource.resource_type == GROUP_RESOURCE:
            alter_group_configs(self.context, resource.resource_name, new_overrides, validate_only)
        elif resource.resource_type == CLIENT_METRICS_RESOURCE:
            alter_subscription(self.context, resource.resource_name, new_overrides, validate_only)
        else:
            raise KafkaProtocolError(f"Unsupported resource type {resource.resource_type}", ErrorCode.invalid_request)

    def _current(self, resource: Any) -> dict[str, str]:
        if resource.resource_type == ConfigResourceType.TOPIC:
            topic = self.replicas.topics.get(resource.resource_name)
            if topic is None:
                raise KafkaProtocolError(
                    f"Topic {resource.resource_name} does not exist", ErrorCode.unknown_topic_or_partition
                )
            return {k: format_value(v) for k, v in topic.configs.items()}
        if resource.resource_type == GROUP_RESOURCE:
            return group_overrides(self.context, resource.resource_name)
        if resource.resource_type == CLIENT_METRICS_RESOURCE:
            return subscription_overrides(self.context, resource.resource_name)
        return self.context.dynamic_configs.overrides(resource.resource_name)

    def _alter_broker(self, name: str, new_overrides: dict[str, str | None], validate_only: bool) -> None:
        """A broker's (``name``: its node id) or the cluster default's (``""``) whole new set of
        dynamic overrides: checked as Kafka checks them, the topic defaults applied, then kept
        on disk before the answer (dynamic_broker_config.py)."""
        self._check_broker_name(name)
        static = self.replicas.static_config
        known = static.as_properties()
        check_broker_overrides(new_overrides, per_broker=name != "", known=known)
        cleaned = {k: v for k, v in new_overrides.items() if v is not None}
        store = self.context.dynamic_configs
        # The replicas follow the cluster default and their own broker's overrides (an
        # in-process cluster's replicas are one set, following its first broker's).
        own = str(static.node_id)
        levels = {"": store.overrides(""), own: store.overrides(own), name: cleaned}
        try:
            static.with_overrides(**{k: v for k, v in cleaned.items() if k in known})  # types, as at start
            self.replicas.alter_broker_config(applied({**levels[""], **levels[own]}), validate_only=validate_only)
        except ConfigError as exc:
            raise KafkaProtocolError(str(exc), ErrorCode.invalid_config) from None
        if not validate_only:
            store.replace(name, cleaned)

    @handles(ApiKey.ALTER_CONFIGS)
    async def handle_alter_configs_request(self, request: Request) -> Any:
        responses = []
        for resource in request.body.resources:
            response = self._resource_response(resource)
            with errors_into(response, message=True):
                self._check_access(request, resource, AclOperation.ALTER_CONFIGS)
                self._current(resource)  # existence check
                self._alter(resource, {c.name: c.value for c in resource.configs}, request.body.validate_only)
            responses.append(response)
        return Answer(throttle_time=0, responses=responses)

    @handles(ApiKey.INCREMENTAL_ALTER_CONFIGS)
    async def handle_incremental_alter_configs_request(self, request: Request) -> Any:
        responses = []
        for resource in request.body.resources:
            response = self._resource_response(resource)
            with errors_into(response, message=True):
                self._check_access(request, resource, AclOperation.ALTER_CONFIGS)
                if resource.resource_type == BROKER_LOGGER_RESOURCE:  # log levels, at once
                    self._check_node_id(resource.resource_name)
                    alter_loggers(resource.configs, request.body.validate_only)
                else:
                    overrides = self._current(resource)
                    for change in resource.configs:
                        self._apply_op(resource, overrides, change)
                    self._alter(resource, overrides, request.body.validate_only)
            responses.append(response)
        return Answer(throttle_time=0, responses=responses)

    def _apply_op(self, resource: Any, overrides: dict[str, str], change: Any) -> None:
        op, key, value = change.config_operation, change.name, change.value
        if op == OpType.SET:
            overrides[key] = value
        elif op == OpType.DELETE:
            overrides.pop(key, None)
        elif op in (OpType.APPEND, OpType.SUBTRACT):
            if resource.resource_type == CLIENT_METRICS_RESOURCE and key in LIST_KEYS:
                items = [item.strip() for item in (overrides.get(key) or "").split(",") if item.strip()]
                overrides[key] = ",".join(_append_or_subtract(items, value, op == OpType.APPEND))
                return
            definition = TOPIC_CONFIGS.get(key) if resource.resource_type == ConfigResourceType.TOPIC else None
            if definition is None or definition.kind != "list":
                raise KafkaProtocolError(
                    f"Config value append is not allowed for config key: {key}", ErrorCode.invalid_config
                )
            current = overrides.get(key)
            items = list(parse_value(definition, current)) if current else list(
                self.replicas.effective_config(self.replicas.topics.get(resource.resource_name))[key]  # type: ignore[arg-type]  # _current() refused a missing topic
            )
            overrides[key] = ",".join(_append_or_subtract(items, value, op == OpType.APPEND))
        else:
            raise KafkaProtocolError(f"Unknown config operation {op}", ErrorCode.invalid_request)

    @staticmethod
    def _resource_response(resource: Any) -> dict[str, Any]:
        return {
            "error_code": ErrorCode.none,
            "error_message": None,
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
        }


class ClusterApis(ApiFamily):
    """DescribeCluster: what Admin clients use in place of Metadata for the broker list."""

    @handles(ApiKey.DESCRIBE_CLUSTER)
    async def handle_describe_cluster_request(self, request: Request) -> Any:
        cache = self.context.metadata_cache
        endpoint_type = getattr(request.body, "endpoint_type", 1)
        if endpoint_type not in (1,):  # 1 = brokers; 2 = controllers, which we do not expose
            return build(
                request.spec.response_type,
                throttle_time=0,
                error_code=ErrorCode.unsupported_endpoint_type,
                error_message="The target broker only supports endpoint type BROKERS",
                endpoint_type=endpoint_type,
                cluster_id=cache.cluster_id,
                controller_id=-1,
                brokers=[],
                cluster_authorized_operations=-(2**31),
            )
        operations = -(2**31)  # not asked for
        if request.body.include_cluster_authorized_operations:
            operations = (
                self.authorized_operations(request, AclResource.CLUSTER)
                if self.authorize(request, AclOperation.DESCRIBE, AclResource.CLUSTER) else 0
            )
        return Answer(
            throttle_time=0,
            error_code=ErrorCode.none,
            error_message=None,
            endpoint_type=1,
            cluster_id=cache.cluster_id,
            controller_id=cache.controller_id,
            brokers=[
                {"broker_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack, "is_fenced": False}
                for b in cache.alive_brokers(request.listener_name)
            ],
            cluster_authorized_operations=operations,
        )
