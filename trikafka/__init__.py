"""trikafka: a Kafka-wire-compatible broker on Trio."""

from trikafka.broker import Broker, BrokerStatistics, open_broker
from trikafka.config import BrokerConfig
from trikafka.errors import ConfigError

__all__ = ["Broker", "BrokerConfig", "BrokerStatistics", "ConfigError", "open_broker"]
__version__ = "0.1.0"
