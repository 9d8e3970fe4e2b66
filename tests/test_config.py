"""BrokerConfig: Kafka's keys and defaults, both spellings, and errors that say what to do."""

from __future__ import annotations

import attrs
import pytest

from trikafka import BrokerConfig, ConfigError
from trikafka.config import ListenerSpec, config_keys, parse_listeners, read_properties_file
from trikafka.config.topics import format_value
from trikafka.security.config import SECURITY_KEYS

KAFKA_DEFAULTS = {
    "num.network.threads": 3,
    "num.io.threads": 8,
    "queued.max.requests": 500,
    "socket.request.max.bytes": 104857600,
    "connections.max.idle.ms": 600000,
    "socket.send.buffer.bytes": 102400,
    "socket.receive.buffer.bytes": 102400,
    "max.connections": 2**31 - 1,
    "max.connections.per.ip": 2**31 - 1,
    "node.id": 1,
}


def _attr(key: str) -> str:
    return key.replace(".", "_")


@pytest.mark.parametrize("key", sorted(KAFKA_DEFAULTS))
def test_defaults_are_kafkas(key):
    config = BrokerConfig()
    assert getattr(config, _attr(key)) == KAFKA_DEFAULTS[key]
    assert config.as_properties()[key] == str(KAFKA_DEFAULTS[key])


def test_other_defaults():
    config = BrokerConfig()
    assert config.listeners == (ListenerSpec("PLAINTEXT", "127.0.0.1", 9092),)
    assert config.advertised_listeners is None
    assert config.log_dirs is None  # embedded use keeps everything in memory
    assert config.cluster_id is None
    assert config.max_connections_per_ip_overrides == {}


def test_dotted_and_underscore_spellings_are_the_same_setting():
    dotted = BrokerConfig.from_mapping({"num.io.threads": "4", "queued.max.requests": 7})
    underscored = BrokerConfig.from_mapping({"num_io_threads": "4", "queued_max_requests": 7})
    keywords = BrokerConfig(num_io_threads=4, queued_max_requests=7)
    assert dotted == underscored == keywords
    assert dotted.num_io_threads == 4


def test_from_properties_overrides_win_in_either_spelling():
    config = BrokerConfig.from_properties(
        {"num.io.threads": "2", "num.network.threads": "2"}, num_io_threads=5
    )
    assert (config.num_io_threads, config.num_network_threads) == (5, 2)
    assert BrokerConfig.from_properties() == BrokerConfig()


def test_from_properties_reads_a_server_properties_file(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text(
        "# Kafka-style comments\n"
        "! and the other comment character\n"
        "\n"
        "node.id=3\n"
        "  num.io.threads = 16  \n"
        "listeners=PLAINTEXT://0.0.0.0:9093,CONTROLLER://localhost:9094\n"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
        "advertised.listeners: PLAINTEXT://broker-3.example:9093\n"
        "log.dirs=/var/lib/kafka/a,/var/lib/kafka/b\n"
        "max.connections.per.ip.overrides=10.0.0.1:5,gateway:100\n"
        "cluster.id=MkU3OEVBNTcwNTJENDM2Qg\n",
        encoding="utf-8",
    )
    config = BrokerConfig.from_properties(path, num_network_threads=6)
    assert config.node_id == 3
    assert config.num_io_threads == 16
    assert config.num_network_threads == 6
    assert config.listeners == (
        ListenerSpec("PLAINTEXT", "0.0.0.0", 9093),
        ListenerSpec("CONTROLLER", "localhost", 9094),
    )
    assert config.advertised_listeners == (ListenerSpec("PLAINTEXT", "broker-3.example", 9093),)
    assert config.log_dirs == ("/var/lib/kafka/a", "/var/lib/kafka/b")
    assert config.max_connections_per_ip_overrides == {"10.0.0.1": 5, "gateway": 100}
    assert config.cluster_id == "MkU3OEVBNTcwNTJENDM2Qg"
    # A string path works as well as a Path.
    assert BrokerConfig.from_properties(str(path)) == BrokerConfig.from_properties(path)


def test_properties_file_line_without_a_separator_names_the_line(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("node.id=1\nthis line is not a setting\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        read_properties_file(path)
    assert f"{path}:2" in str(info.value)
    assert "key=value" in str(info.value)


def test_properties_file_keeps_separators_inside_values(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("listeners=PLAINTEXT://[::1]:9092\ncluster.id=a=b:c\n", encoding="utf-8")
    assert read_properties_file(path) == {
        "listeners": "PLAINTEXT://[::1]:9092",
        "cluster.id": "a=b:c",
    }


# --- errors ----------------------------------------------------------------------------


def _error(**items) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_mapping(items)
    return info.value


def _says(error: ConfigError, *parts: str) -> None:
    message = str(error)
    for part in parts:
        assert part in message, f"{part!r} missing from {message!r}"


@pytest.mark.parametrize(
    ("key", "close"),
    [
        ("num.io.thread", "num.io.threads"),
        ("num_network_thread", "num.network.threads"),
        ("socket.request.max.byte", "socket.request.max.bytes"),
        ("listener", "listeners"),
    ],
)
def test_unknown_key_suggests_the_close_key(key, close):
    error = _error(**{key: "4"})
    _says(error, key, "unknown configuration key", f"did you mean {close!r}")
    assert error.key == key


def test_unknown_key_with_nothing_close():
    error = _error(**{"zzzz.qqqq": "1"})
    _says(error, "zzzz.qqqq", "unknown configuration key")
    assert "did you mean" not in str(error)


def test_unknown_key_in_with_overrides_suggests_too():
    with pytest.raises(ConfigError) as info:
        BrokerConfig().with_overrides(num_io_thread=2)
    _says(info.value, "num_io_thread", "did you mean 'num.io.threads'")


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("num.io.threads", "zero", "an integer in [1, 1024]"),
        ("num.io.threads", "4.5", "an integer in [1, 1024]"),
        ("num.io.threads", "", "an integer in [1, 1024]"),
        ("num.network.threads", "0", "an integer in [1, 1024]"),
        ("num.network.threads", "1025", "an integer in [1, 1024]"),
        ("queued.max.requests", "-1", "an integer in [1, 2147483647]"),
        ("socket.request.max.bytes", "2147483648", "an integer in [1, 2147483647]"),
        ("socket.receive.buffer.bytes", "-2", "an integer in [-1, 2147483647]"),
        ("node.id", "-1", "an integer in [0, 2147483647]"),
        ("connections.max.idle.ms", "0", "an integer in [1, "),
    ],
)
def test_bad_integer_names_key_value_and_range(key, value, allowed):
    error = _error(**{key: value})
    # The value appears as given (quoted) when it is not a number, as parsed when it is.
    _says(error, f"{key}=", value, allowed)
    if not value:
        _says(error, f"{key}=''")
    assert error.key == key
    assert error.allowed.startswith(allowed)


@pytest.mark.parametrize("value", [0, 2000, True, "4"])
def test_bad_integer_through_the_constructor(value):
    with pytest.raises(ConfigError) as info:
        BrokerConfig(num_io_threads=value)
    _says(info.value, "num.io.threads", repr(value), "an integer in [1, 1024]")


@pytest.mark.parametrize(
    ("value", "allowed"),
    [
        ("localhost:9092", "NAME://host:port"),
        ("PLAINTEXT://localhost", "no integer port"),
        ("PLAINTEXT://localhost:http", "no integer port"),
        ("PLAINTEXT://localhost:70000", "outside 0..65535"),
        ("PLAINTEXT://a:1,PLAINTEXT://b:2", "each listener name may appear once"),
        (" , ", "at least one"),
        ("PLAIN TEXT://a:1", "NAME://host:port"),
    ],
)
def test_bad_listeners(value, allowed):
    error = _error(listeners=value)
    _says(error, "listeners", repr(value.strip()), allowed)
    with pytest.raises(ConfigError):
        BrokerConfig(listeners=value)


def test_bad_advertised_listeners_name_their_own_key():
    error = _error(**{"advertised.listeners": "broker:9092"})
    _says(error, "advertised.listeners", "'broker:9092'", "NAME://host:port")


def test_listener_parsing():
    assert parse_listeners("plaintext://h:1, SSL://[::1]:2,INTERNAL://:0") == (
        ListenerSpec("PLAINTEXT", "h", 1),
        ListenerSpec("SSL", "::1", 2),
        ListenerSpec("INTERNAL", "", 0),
    )
    assert str(ListenerSpec("SSL", "::1", 2)) == "SSL://[::1]:2"
    assert str(ListenerSpec("PLAINTEXT", "h", 1)) == "PLAINTEXT://h:1"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1:100,hostName:200", {"127.0.0.1": 100, "hostName": 200}),
        ("::1:5", {"::1": 5}),
        ("a:0", {"a": 0}),
        (" a:1 , b:2 ,", {"a": 1, "b": 2}),
        ("", {}),
    ],
)
def test_connection_overrides(value, expected):
    config = BrokerConfig.from_mapping({"max.connections.per.ip.overrides": value})
    assert config.max_connections_per_ip_overrides == expected
    assert BrokerConfig(max_connections_per_ip_overrides=value) == config


@pytest.mark.parametrize(
    ("value", "allowed"),
    [
        ("hostA", "host:count"),
        ("hostA:many", "host:count"),
        (":5", "host:count"),
        ("hostA:-1", "negative limit"),
    ],
)
def test_bad_connection_overrides(value, allowed):
    error = _error(**{"max.connections.per.ip.overrides": value})
    _says(error, "max.connections.per.ip.overrides", repr(value), allowed)


def test_bad_overrides_mapping_through_the_constructor():
    with pytest.raises(ConfigError) as info:
        BrokerConfig(max_connections_per_ip_overrides={"a": -1})
    _says(info.value, "max.connections.per.ip.overrides", "host to count >= 0")


def test_bad_cluster_id():
    with pytest.raises(ConfigError) as info:
        BrokerConfig(cluster_id="  ")
    _says(info.value, "cluster.id", "non-empty")


# --- values ----------------------------------------------------------------------------


def test_frozen():
    config = BrokerConfig()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        config.num_io_threads = 4  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        config.listeners = ()  # type: ignore[misc]


def test_with_overrides_returns_a_new_config():
    config = BrokerConfig()
    changed = config.with_overrides(**{"num.io.threads": "2"}, num_network_threads=1)
    assert (changed.num_io_threads, changed.num_network_threads) == (2, 1)
    assert config.num_io_threads == 8


def test_log_dirs():
    assert BrokerConfig(log_dirs="/a,/b").log_dirs == ("/a", "/b")
    assert BrokerConfig(log_dirs="").log_dirs is None
    assert BrokerConfig.from_mapping({"log.dirs": "/data"}).log_dirs == ("/data",)


def test_bad_log_dirs_type_is_a_config_error():
    with pytest.raises(ConfigError) as info:
        BrokerConfig(log_dirs=5)
    _says(info.value, "log.dirs", "5")


def test_as_properties_round_trips():
    config = BrokerConfig.from_mapping(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://[::1]:9093",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            "max.connections.per.ip.overrides": "a:1,b:2",
            "log.dirs": "/a,/b",
            "num.io.threads": "3",
        }
    )
    properties = config.as_properties()
    assert BrokerConfig.from_mapping(
        {k: v for k, v in properties.items() if v != ""}
    ) == config


def test_config_keys_cover_every_field_with_a_doc():
    keys = {key: (default, doc) for key, default, doc in config_keys()}
    fields = {f.metadata["key"] for f in attrs.fields(BrokerConfig)} - {"security"}
    assert set(keys) == fields | set(SECURITY_KEYS)  # one field holds every security key
    assert set(KAFKA_DEFAULTS) <= set(keys)
    for key, (_default, doc) in keys.items():
        assert doc, key
    assert keys["num.io.threads"][0] == "8"


@pytest.mark.parametrize(
    "items, retention_ms, roll_ms",
    [
        ({"log.retention.hours": "168"}, 604_800_000, 604_800_000),
        ({"log.retention.hours": "168", "log.retention.minutes": "5"}, 300_000, 604_800_000),
        ({"log.retention.minutes": "5", "log.retention.ms": "1000"}, 1000, 604_800_000),
        ({"log_retention_hours": "-1"}, -1, 604_800_000),
        ({"log.roll.hours": "2"}, 604_800_000, 7_200_000),
        ({"log.roll.hours": "2", "log.roll.ms": "60000"}, 604_800_000, 60_000),
    ],
)
def test_kafkas_hour_and_minute_aliases(items, retention_ms, roll_ms):
    """Kafka's precedence: the ms key, then minutes, then hours; negative retention is -1."""
    config = BrokerConfig.from_mapping(items)
    assert (config.log_retention_ms, config.log_roll_ms) == (retention_ms, roll_ms)


def test_aliases_work_as_overrides_and_are_checked():
    assert BrokerConfig().with_overrides(log_retention_hours=1).log_retention_ms == 3_600_000
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_mapping({"log.roll.hours": "0"})
    assert "log.roll.hours" in str(info.value) and "'0'" in str(info.value)
    with pytest.raises(ConfigError, match="log.retention.hours='x'"):
        BrokerConfig.from_mapping({"log.retention.hours": "x", "log.retention.ms": "5"})
    with pytest.raises(ConfigError, match="did you mean 'log.retention.hours'"):
        BrokerConfig.from_mapping({"log.retention.hour": "1"})


# --- the one topic-config table ------------------------------------------------------------


def test_the_topic_table_of_the_docs_is_generated_from_the_table() -> None:
    import importlib.util
    from pathlib import Path

    from trikafka.config.topics import readme_table

    root = Path(__file__).parent.parent
    spec = importlib.util.spec_from_file_location("generated", root / "docs" / "hooks" / "generated.py")
    generated = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generated)
    page = generated.expand((root / "docs" / "configuration.md").read_text())
    assert readme_table() in page


def test_log_config_broker_config_and_admin_apis_share_one_table() -> None:
    from trikafka.config.topics import TOPIC_CONFIGS
    from trikafka.log.config import TOPIC_CONFIG_KEYS, LogConfig
    from trikafka.server.replica.topic_config import resolve_topic_config

    assert set(TOPIC_CONFIG_KEYS) == set(TOPIC_CONFIGS)
    log_defaults = LogConfig().to_properties()
    broker = BrokerConfig()
    broker_props = broker.as_properties()
    effective = resolve_topic_config({}, broker)
    for key, definition in TOPIC_CONFIGS.items():
        default = log_defaults[key]
        assert default == format_value(definition.default), key
        assert format_value(effective[key]) == default, key
        if definition.broker_key:
            assert broker_props[definition.broker_key] == default, key


@pytest.mark.parametrize(
    ("key", "bad"),
    [("segment.bytes", "13"), ("retention.ms", "-2"), ("cleanup.policy", "forever"), ("preallocate", "maybe")],
)
def test_one_range_refused_everywhere(key: str, bad: str) -> None:
    from trikafka.config.topics import TOPIC_CONFIGS
    from trikafka.log.config import LogConfig
    from trikafka.server.replica.topic_config import validate_topic_configs

    with pytest.raises(ConfigError, match=key):
        validate_topic_configs({key: bad})
    with pytest.raises(ConfigError, match=key):
        LogConfig.from_properties({key: bad})
    broker_key = TOPIC_CONFIGS[key].broker_key
    if broker_key:
        with pytest.raises(ConfigError, match=broker_key):
            BrokerConfig.from_mapping({broker_key: bad})
