"""KIP-848 consumer groups: the values (:mod:`.consumer_group`), the sans-IO
ConsumerGroupHeartbeat machine (:mod:`.consumer_group_machine`), the server-side assignors,
reconciliation, the classic-protocol members of a consumer group, the member-epoch offset
checks and the records in ``__consumer_offsets``."""

__all__: list[str] = []
