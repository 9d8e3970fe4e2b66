"""Consumer groups and transactions: Kafka's two coordinators, each a pure state machine in
a thin Trio shell, in folders by concept.

* :mod:`.classic`: the classic group protocol — :mod:`.classic.group_membership` (JoinGroup,
  SyncGroup, Heartbeat, LeaveGroup; takes ``now_ms``, returns answers plus effects) with
  :mod:`.classic.rebalance` (its timer half) and :mod:`.classic.group_state` (the legal
  transitions).
* :mod:`.consumer`: KIP-848 consumer groups (ConsumerGroupHeartbeat, assignors,
  reconciliation, classic members of a consumer group).
* :mod:`.transactions`: :mod:`.transactions.transaction_machine` (decisions) in
  :mod:`.transactions.transaction_coordinator` (the shell: timeouts, markers).
* Shared by the group kinds, here at the top: :mod:`.group_coordinator` (the shell: timers on
  trio's clock, waiting requests), :mod:`.group_metadata_manager` (groups, committed offsets,
  expiry, replay of ``__consumer_offsets`` through :mod:`.offsets`), :mod:`.group_protocol`
  (the values and effects both machines give), :mod:`.group_migration` (between the kinds).
* :mod:`.ports`: the Protocols for what the coordinators need from the server, injected by
  the broker; :mod:`.timers`: the keyed timer queue and the Waiter both shells use.
"""

__all__: list[str] = []
