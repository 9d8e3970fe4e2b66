"""Consumer groups and transactions: Kafka's two coordinators, each a pure state machine in
a thin Trio shell.

* Groups: :mod:`.group_membership` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup; takes
  ``now_ms``, returns answers plus effects) with :mod:`.rebalance` (its timer half) and
  :mod:`.group_state` (the legal transitions); :mod:`.group_metadata_manager` (groups,
  committed offsets, expiry, replay of ``__consumer_offsets`` through :mod:`.offsets`);
  :mod:`.group_coordinator` (the shell: timers on trio's clock, waiting requests).
* Transactions: :mod:`.transaction_machine` (decisions) in :mod:`.transaction_coordinator`
  (the shell: timeouts, markers), state in :mod:`.transaction_state`.
* :mod:`.ports`: the Protocols for what they need from the server, injected by the broker;
  :mod:`.timers`: the keyed timer queue and the Waiter both shells use.
"""

__all__: list[str] = []
