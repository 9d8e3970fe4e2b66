"""The web console (``--ui``): cluster overview, topics, a record browser, consumer groups,
live request rates and the Schema Registry's schemas (record values decoded by them), as an
ASGI app the broker's HTTP server mounts (at ``/ui``).

``console_app(broker_or_cluster)`` builds it; :class:`ConsoleApp` is the app itself, for
other wiring (any ``open_reader`` and request counters).
"""

from trikafka.console.app import ConsoleApp
from trikafka.console.wiring import CLIENT_ID, console_app

__all__ = ["CLIENT_ID", "ConsoleApp", "console_app"]
