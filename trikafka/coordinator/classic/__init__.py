"""The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) as a pure state
machine: :mod:`.group_membership` with its timer half :mod:`.rebalance`, the group values
(:mod:`.group_metadata`), the legal state transitions (:mod:`.group_state`), and the embedded
consumer protocol's bytes (:mod:`.consumer_protocol_bytes`)."""

__all__: list[str] = []
