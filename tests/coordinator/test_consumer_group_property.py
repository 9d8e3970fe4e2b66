"""Property: whatever members do, no partition ever has two owners (KIP-848's revoke before
assign), and once everyone heartbeats honestly the group settles on the target.

The pure machine is driven directly (no trio, no clock): members join, heartbeat reporting
what they own (or report nothing, or hold back a revocation), and leave (giving everything
up first, as clients do). A member owns what it was told, and keeps what it was told to revoke
until it chooses to let go: "stubborn" and "quiet" members hold on, "heartbeat" lets go.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from trikafka.config import BrokerConfig
from trikafka.coordinator.consumer.consumer_group_machine import ConsumerGroupMachine
from trikafka.coordinator.consumer.consumer_group_protocol import ConsumerGroupHeartbeat
from trikafka.coordinator.group_metadata_manager import GroupMetadataManager
from trikafka.errors import ErrorCode
from trikafka.server.wiring import group_settings

TOPICS = {"t": 5, "u": 3}
MEMBERS = ["m0", "m1", "m2", "m3"]
steps = st.lists(
    st.tuples(st.sampled_from(MEMBERS), st.sampled_from(["heartbeat", "quiet", "stubborn", "leave"])),
    max_size=60,
)


class Client:
    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.epoch = 0
        self.owned: dict[str, frozenset[int]] = {}  # what it consumes
        self.told: dict[str, frozenset[int]] = {}  # its last assignment
        self.joined = False

    def request(self, epoch: int, owned) -> ConsumerGroupHeartbeat:
        joining = epoch == 0
        return ConsumerGroupHeartbeat(
            group_id="g", member_id=self.member_id, member_epoch=epoch,
            rebalance_timeout_ms=60_000 if joining else -1,
            subscribed_topic_names=tuple(TOPICS) if joining else None, owned=owned,
        )


@settings(max_examples=150, deadline=None)
@given(steps, st.sampled_from(["uniform", "range"]))
def test_no_partition_has_two_owners(script, assignor):
    config = group_settings(BrokerConfig(group_consumer_assignors=(assignor,)))
    machine = ConsumerGroupMachine(config, None, lambda: TOPICS, GroupMetadataManager(config, None))
    clients = {m: Client(m) for m in MEMBERS}

    def heartbeat(client: Client, report: bool, keep: bool) -> None:
        """Report what it owns (or nothing); then own what it is told — and, if ``keep``,
        also what it was told to revoke (it has not let go of it yet)."""
        epoch = client.epoch if client.joined else 0
        owned = (client.owned if report else None) if client.joined else {}
        result = machine.heartbeat(client.request(epoch, owned), 0).value
        assert result.error_code == ErrorCode.none, result
        client.joined, client.epoch = True, result.member_epoch
        if result.assignment is not None:
            client.told = dict(result.assignment)
        owned = dict(client.told)
        if keep:
            for topic, partitions in client.owned.items():
                owned[topic] = owned.get(topic, frozenset()) | partitions
        client.owned = owned

    def check() -> None:
        seen: set[tuple[str, int]] = set()
        for client in clients.values():
            for topic, partitions in client.owned.items():
                for partition in partitions:
                    assert (topic, partition) not in seen, f"{topic}-{partition} has two owners"
                    seen.add((topic, partition))

    for member, action in script:
        client = clients[member]
        if action == "leave":
            if client.joined:
                result = machine.heartbeat(client.request(-1, None), 0).value
                assert result.member_epoch == -1
                clients[member] = Client(member)
        else:
            heartbeat(client, report=action != "quiet", keep=action != "heartbeat")
        check()
    # Everyone heartbeats honestly: the group converges to its target, every partition owned.
    active = [c for c in clients.values() if c.joined]
    for _ in range(4):
        for client in active:
            heartbeat(client, report=True, keep=False)
            check()
    if active:
        group = machine.groups["g"]
        assert group.state.value == "Stable"
        owned = {(t, p) for c in active for t, ps in c.owned.items() for p in ps}
        assert owned == {(t, p) for t, n in TOPICS.items() for p in range(n)}
