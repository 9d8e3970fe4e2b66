"""The cluster state machine's rules, event by event (trikafka/cluster/state.py)."""

from __future__ import annotations

import pytest

from trikafka.cluster.cluster import Cluster
from trikafka.cluster.state import OFFSETS_TOPIC, ClusterState, java_hash_code
from trikafka.config import BrokerConfig
from trikafka.server.replica.cluster_view import GROUP_KEY, TRANSACTION_KEY


def test_java_hash_code_matches_java():
    # Values of String.hashCode() printed by jshell.
    assert java_hash_code("") == 0
    assert java_hash_code("hello") == 99162322
    assert java_hash_code("my-group") == -1906497762
    assert java_hash_code("polygenelubricants") == -2147483648  # Integer.MIN_VALUE
    assert java_hash_code("\U0001d11e") == 1772394  # a surrogate pair counts as two chars


def test_coordinators_follow_kafkas_partition_for():
    state = ClusterState([1, 2, 3], offsets_partitions=50)
    assert state.coordinator_partition(GROUP_KEY, "polygenelubricants") == (OFFSETS_TOPIC, 0)
    assert state.coordinator_partition(GROUP_KEY, "hello") == (OFFSETS_TOPIC, 99162322 % 50)
    topic, partition = state.coordinator_partition(TRANSACTION_KEY, "hello")
    assert topic == "__transaction_state" and partition == 99162322 % 50
    assert state.coordinator(GROUP_KEY, "hello") == state.leadership(OFFSETS_TOPIC, 22).leader


def test_replicas_are_placed_round_robin_over_live_brokers():
    state = ClusterState([1, 2, 3])
    state.assign("t", range(4), 2)
    assert [state.leadership("t", p).replicas for p in range(4)] == [(1, 2), (2, 3), (3, 1), (1, 2)]
    state.assign("t", range(4, 5))  # new partitions keep the topic's factor
    assert state.leadership("t", 4).replicas == (2, 3)
    with pytest.raises(ValueError, match="replication factor 4"):
        state.assign("u", range(1), 4)
    state.stop_broker(2)
    state.assign("v", range(2), 2)
    assert [state.leadership("v", p).replicas for p in range(2)] == [(1, 3), (3, 1)]


def test_stopping_a_leader_elects_the_next_in_sync_replica_and_bumps_the_epoch():
    state = ClusterState([1, 2, 3])
    state.assign("t", range(1), 3)
    before = state.version
    state.stop_broker(1)
    lead = state.leadership("t", 0)
    assert (lead.leader, lead.leader_epoch, lead.isr, lead.offline) == (2, 1, (2, 3), (1,))
    assert state.version > before
    state.start_broker(1)  # back, but not in sync until it caught up
    assert state.leadership("t", 0).isr == (2, 3)
    state.expand_isr("t", 0, [1])
    assert state.leadership("t", 0).isr == (1, 2, 3)
    with pytest.raises(ValueError, match="already running"):
        state.start_broker(1)
    with pytest.raises(ValueError, match=r"no broker 4 in this cluster \(brokers \[1, 2, 3\]\)"):
        state.stop_broker(4)


def test_the_last_in_sync_replica_keeps_its_seat_and_leads_again():
    state = ClusterState([1, 2])
    state.assign("t", range(1), 2)
    state.shrink_isr("t", 0, [1])
    state.stop_broker(1)
    lead = state.leadership("t", 0)
    assert (lead.leader, lead.isr) == (-1, (1,))
    state.stop_broker(2)
    state.start_broker(2)  # not in sync: no unclean election
    assert state.leadership("t", 0).leader == -1
    state.start_broker(1)
    assert state.leadership("t", 0).leader == 1


def test_illegal_moves_are_refused_naming_what_is_allowed():
    state = ClusterState([1, 2, 3])
    state.assign("t", range(1), 2)
    with pytest.raises(ValueError, match=r"live in-sync replica \(ISR \[1, 2\]"):
        state.move_leader("t", 0, 3)
    with pytest.raises(ValueError, match="holding the leader 1"):
        state.shrink_isr("t", 0, [2])
    with pytest.raises(ValueError, match="cannot join the ISR"):
        state.expand_isr("t", 0, [3])
    with pytest.raises(KeyError, match="no partition nope-0"):
        state.move_leader("nope", 0, 1)
    state.move_leader("t", 0, 2)
    assert state.leadership("t", 0).leader_epoch == 1
    state.move_leader("t", 0, 2)  # already there: no new epoch
    assert state.leadership("t", 0).leader_epoch == 1


def test_brokers_after_the_first_take_the_following_ports():
    config = BrokerConfig.from_mapping({
        "listeners": "PLAINTEXT://127.0.0.1:19092,SSL_LIKE://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL_LIKE:PLAINTEXT",
    })
    cluster = Cluster(config, 3)
    listeners = {n: [str(s) for s in c.listeners] for n, c in cluster.node_configs.items()}
    assert listeners == {
        1: ["PLAINTEXT://127.0.0.1:19092", "SSL_LIKE://127.0.0.1:0"],
        2: ["PLAINTEXT://127.0.0.1:19093", "SSL_LIKE://127.0.0.1:0"],
        3: ["PLAINTEXT://127.0.0.1:19094", "SSL_LIKE://127.0.0.1:0"],
    }
    assert [c.node_id for c in cluster.node_configs.values()] == [1, 2, 3]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="positive number of brokers"):
        Cluster(BrokerConfig(), 0)
    with pytest.raises(ValueError, match="allowed values are tcp, memory"):
        Cluster(BrokerConfig(), 2, transport="udp")
