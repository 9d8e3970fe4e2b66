"""A Confluent-compatible Schema Registry's core: schemas, compatibility, the ``_schemas`` store.

Pure of I/O but for the log partition it is handed (like the coordinators): the HTTP routes
are an edge (:mod:`trikafka.web.schema_registry`), the broker wires a
:class:`~trikafka.registry.service.SchemaRegistry` over ``_schemas`` partition 0
(:mod:`trikafka.server.wiring`). See docs/schema-registry.md.
"""

from trikafka.registry.errors import RegistryError
from trikafka.registry.service import SchemaRegistry
from trikafka.registry.store import SCHEMAS_TOPIC

__all__ = ["SCHEMAS_TOPIC", "RegistryError", "SchemaRegistry"]
