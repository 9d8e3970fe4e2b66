"""A Confluent-compatible Schema Registry's core: schemas, compatibility, the ``_schemas`` store.

Pure of I/O but for the log partition it is handed (like the coordinators): the HTTP routes
are an edge (:mod:`trikafka.web.schema_registry`), the broker wires a
:class:`~trikafka.registry.service.SchemaRegistry` over ``_schemas`` partition 0
(:mod:`trikafka.server.wiring`). See docs/schema-registry.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trikafka.lazy_exports import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from trikafka.registry.errors import RegistryError
    from trikafka.registry.service import SchemaRegistry
    from trikafka.registry.store import SCHEMAS_TOPIC

__all__ = ["SCHEMAS_TOPIC", "RegistryError", "SchemaRegistry"]

#: name → its module, imported when the name is first looked up (PEP 562): a broker builds
#: its registry on first use, so importing one module of the package must not import the rest.
_LAZY = {
    "RegistryError": "trikafka.registry.errors",
    "SchemaRegistry": "trikafka.registry.service",
    "SCHEMAS_TOPIC": "trikafka.registry.store",
}


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals())
