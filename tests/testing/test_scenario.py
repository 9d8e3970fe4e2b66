"""Fault scenarios as data (``trikafka.testing.Scenario``): JSON in and out, each trigger and
action on the in-memory broker under trio's MockClock, the cluster actions on an in-memory
cluster, the refusal of cluster actions on one broker, and the pytest mark."""

from __future__ import annotations

import dataclasses
import json

import pytest
import trio

from trikafka.errors import ErrorCode
from trikafka.testing import Scenario, ScenarioError, controls, open_test_broker

from .test_faults import create_topics, metadata, produce

NLF = "NOT_LEADER_OR_FOLLOWER"


def test_a_scenario_round_trips_through_json_text():
    scenario = (
        Scenario()
        .at(1.5).inject_error("Produce", ErrorCode.not_leader_or_follower, count=1, topic="t")
        .after(3, api="Fetch", client_id="app").hold("Fetch", seconds=2)
        .when("committed", group="g", topic="t", partition=0, at_least=5)
        .push_request_errors("OffsetCommit", [ErrorCode.coordinator_load_in_progress, ("NONE", 0.25)])
        .at(9).stop_broker(2)
    )  # fmt: skip
    text = json.dumps(scenario.to_json())
    again = Scenario.from_json(text)
    assert again == scenario and again.to_json() == json.loads(text)
    assert scenario.steps[0].action == {
        "do": "inject_error", "api": "Produce", "error": NLF, "count": 1, "topic": "t",
    }  # fmt: skip
    assert scenario.steps[2].action["errors"] == ["COORDINATOR_LOAD_IN_PROGRESS", ["NONE", 0.25]]
    assert Scenario.from_json(scenario.to_json()["steps"]) == scenario  # a bare list of steps too


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([{"trigger": {"at": -1}, "action": {"do": "release"}}], r"step 0: at=-1 must be a non-negative"),
        ([{"trigger": {"at": 1, "after": 2}, "action": {"do": "release"}}], r"exactly one of 'at', 'after', 'when'"),
        ([{"trigger": {"when": "lag"}, "action": {"do": "release"}}], r"when='lag' is not a predicate; predicates: "),
        ([{"trigger": {"when": "members", "group": "g"}, "action": {"do": "release"}}], r"\(members\): missing 'at_"),
        ([{"trigger": {"after": 1}, "action": {"do": "explode"}}], r"do='explode' is not an action; actions: "),
        ([{"trigger": {"after": 1}, "action": {"do": "inject_error", "api": "Produce"}}], r"missing 'error'"),
        (
            [{"trigger": {"after": 1}, "action": {"do": "inject_error", "api": "Produce", "error": "NOPE"}}],
            r"step 0: unknown error code 'NOPE'",
        ),
        ([{"trigger": {"after": 1, "api": "Nope"}, "action": {"do": "release"}}], r"step 0: unknown api 'Nope'"),
        ([{"trigger": {"at": 0}, "action": {"do": "hold", "count": 0}}], r"count=0 must be a positive"),
        ([{"trigger": {"at": 0}, "action": {"do": "hold", "cont": 1}}], r"unknown field 'cont'; allowed: api, count"),
        ([{"trigger": {"at": 0}, "action": {"do": "stop_broker", "broker": "2"}}], r"broker='2' is not an int"),
        ([{"at": 0}], r"step 0: a step is \{'trigger'"),
    ],
)
def test_a_bad_scenario_is_refused_naming_the_step_and_the_field(steps, message):
    with pytest.raises(ScenarioError, match=message):
        Scenario.from_json({"steps": steps})


def test_bad_json_and_shapes_are_refused():
    with pytest.raises(ScenarioError, match="a scenario is JSON"):
        Scenario.from_json("{not json")
    with pytest.raises(ScenarioError, match=r"a scenario is \{'steps': \[...\]\}, not keys \['stps'\]"):
        Scenario.from_json({"stps": []})


async def test_steps_fire_in_order_at_their_virtual_times(trikafka_broker, autojump_clock):
    scenario = Scenario().at(5).inject_error("Metadata", "REQUEST_TIMED_OUT", count=1).at(2).release()
    run = trikafka_broker.apply_scenario(scenario)
    status = await trikafka_broker.wait_for_scenario()
    assert [(f["step"], f["at"]) for f in run.fired] == [(0, 5.0), (1, 5.0)]  # at 2: due once step 0 fired
    assert status["complete"] and status["done"] and status["error"] is None
    async with trikafka_broker.client() as client:
        answer = await client.request(metadata())
        assert answer.topics == ()  # a top-level error has no per-topic answer to carry it
    assert trikafka_broker.active_faults() == []  # count=1: spent
    assert trikafka_broker.scenario_status() == run.to_json()


async def test_after_the_nth_matching_request(trikafka_broker, autojump_clock):
    scenario = Scenario().after(2, api="Produce", topic="t").inject_error("Produce", NLF, count=1)
    run = Scenario.run(scenario, trikafka_broker)
    async with trikafka_broker.client() as client:
        await client.request(create_topics("t", "u"))
        codes = []
        for topic in ("u", "t", "u", "t", "t", "t"):
            answer = await client.request(produce(topic, 0, b"x"))
            codes.append(answer.responses[0].partition_responses[0].error_code)
    # the 2nd Produce to t fires the step; the next Produce (to any topic) gets the error once
    assert codes == [ErrorCode.none] * 4 + [ErrorCode.not_leader_or_follower, ErrorCode.none]
    assert run.complete and run.fired[0]["faults"]
    assert trikafka_broker.high_watermark("t", 0) == 3


async def test_when_a_predicate_on_broker_state_holds(trikafka_broker, autojump_clock):
    scenario = (
        Scenario()
        .when("high_watermark", topic="t", partition=0, at_least=3).add_latency(7.0, api="Produce", count=1)
        .after(1, api="Metadata").hold("Metadata", seconds=4)
    )  # fmt: skip
    run = trikafka_broker.apply_scenario(scenario)
    async with trikafka_broker.client() as client:
        await client.request(create_topics("t"))
        start = trio.current_time()
        for _ in range(3):
            await client.request(produce("t", 0, b"x"))
        assert trio.current_time() == start and run.fired[0]["step"] == 0
        await client.request(produce("t", 0, b"late"))
        assert trio.current_time() - start == 7.0
        await client.request(metadata())  # fires step 1: the hold starts after this request
        held_from = trio.current_time()
        await client.request(metadata())  # held 4 s, then released
        assert trio.current_time() - held_from == 4.0
    assert run.complete


async def test_a_hold_without_seconds_waits_for_a_release_step(autojump_clock):
    async with open_test_broker() as tb:
        run = tb.apply_scenario(Scenario().at(0).hold("Metadata").at(30).release())
        async with tb.client() as client:
            start = trio.current_time()
            await client.request(metadata())
            assert trio.current_time() - start == 30.0
        assert run.complete


async def test_a_single_broker_refuses_cluster_actions_before_anything_runs(trikafka_broker):
    scenario = Scenario().at(0).inject_error("Metadata", NLF).at(1).stop_broker(2)
    with pytest.raises(ScenarioError, match=r"step 1 \(at 1: stop_broker broker=2\): stop_broker needs a cluster"):
        trikafka_broker.apply_scenario(scenario)
    with pytest.raises(ScenarioError, match=r"step 0 .*: a 'broker' argument needs a cluster"):
        trikafka_broker.apply_scenario(Scenario().at(0).release(broker=1))
    assert trikafka_broker.active_faults() == [] and trikafka_broker.scenario_status() is None


async def test_a_wait_says_which_step_it_waits_on(trikafka_broker, autojump_clock):
    trikafka_broker.apply_scenario(Scenario().at(1).release().after(5, api="Fetch").clear_faults())
    with pytest.raises(TimeoutError, match=r"1 of 2 step\(s\) fired; waiting on step 1 \(after 5 api=Fetch"):
        await trikafka_broker.wait_for_scenario(timeout=3)


async def test_a_step_the_cluster_refuses_ends_the_run_with_its_reason(autojump_clock):
    from trikafka.cluster import open_cluster

    async with open_cluster(brokers=3, transport="memory") as cluster:
        handle = controls(cluster)
        handle.apply_scenario(Scenario().at(1).start_broker(2))  # broker 2 is running
        with pytest.raises(RuntimeError, match=r"did not complete: 0 of 1 step\(s\) fired; it failed: step 0"):
            await handle.wait_for_scenario()


async def test_cluster_actions_stop_start_and_move(autojump_clock):
    from trikafka.client import open_connection
    from trikafka.cluster import open_cluster

    async with open_cluster(brokers=3, transport="memory") as cluster:
        async with open_connection(await cluster.connect(), "scenario") as client:
            created = create_topics("t")
            topics = [dataclasses.replace(t, replication_factor=3) for t in created.topics]
            await client.request(dataclasses.replace(created, topics=topics))
        first = cluster.leader("t", 0)
        other = next(i for i in cluster.state.node_ids if i != first)
        scenario = (
            Scenario()
            .at(1).move_leader("t", 0, other)
            .at(2).stop_broker(first)
            .when("high_watermark", topic="t", partition=0, at_least=1).start_broker(first)
        )  # fmt: skip
        handle = controls(cluster)
        handle.apply_scenario(scenario)
        with pytest.raises(TimeoutError, match=r"2 of 3 step\(s\) fired; waiting on step 2 \(when high_watermark"):
            await handle.wait_for_scenario(timeout=5)
        assert cluster.leader("t", 0) == other and first not in cluster.state.alive
        async with open_connection(await cluster.connect(other), "scenario") as client:
            answer = await client.request(produce("t", 0, b"x"))
            assert answer.responses[0].partition_responses[0].error_code == ErrorCode.none
        status = await handle.wait_for_scenario()
        assert [f["at"] for f in status["fired"]] == [1.0, 2.0, 5.0] and first in cluster.state.alive


async def test_a_cancelled_run_says_so(trikafka_broker, autojump_clock):
    run = trikafka_broker.apply_scenario(Scenario().at(1).release().at(60).clear_faults())
    await trio.sleep(2)
    run.cancel()
    await run.wait()
    assert run.done and not run.complete and [f["step"] for f in run.fired] == [0]
    with pytest.raises(RuntimeError, match=r"1 of 2 step\(s\) fired; the run was cancelled"):
        await trikafka_broker.wait_for_scenario()
    again = trikafka_broker.apply_scenario(Scenario().at(0).release())  # a new run replaces it
    await again.wait()
    assert trikafka_broker.scenario_status()["complete"]


async def test_request_triggers_count_on_every_broker_of_a_cluster(autojump_clock):
    from trikafka.client import open_connection
    from trikafka.cluster import open_cluster

    async with open_cluster(brokers=2, transport="memory") as cluster:
        run = controls(cluster).apply_scenario(Scenario().after(2, api="Metadata").inject_error("Metadata", NLF))
        for node_id in cluster.state.node_ids:
            async with open_connection(await cluster.connect(node_id), "c") as client:
                await client.request(metadata())
        await run.wait()
        assert run.complete and len(run.fired[0]["faults"]) == 2  # cluster-wide: one per broker


async def test_request_triggers_and_faults_reach_a_broker_started_again(autojump_clock):
    from trikafka.client import open_connection
    from trikafka.cluster import open_cluster

    async with open_cluster(brokers=2, transport="memory") as cluster:
        last = max(cluster.state.node_ids)
        scenario = (
            Scenario()
            .at(1).stop_broker(last)
            .at(2).start_broker(last)
            .after(2, api="Metadata").inject_error("Metadata", NLF, count=1)
            .at(3).move_coordinator("billing", last, key_type="group")
        )  # fmt: skip
        handle = controls(cluster)
        run = handle.apply_scenario(scenario)
        await trio.sleep(2.5)
        assert [f["action"] for f in run.fired] == ["stop_broker", "start_broker"]
        async with open_connection(await cluster.connect(last), "c") as client:
            await client.request(metadata())
            await client.request(metadata())  # the 2nd Metadata, at the restarted broker
            await client.request(metadata())
        status = await handle.wait_for_scenario()
        assert [f["action"] for f in status["fired"]][2:] == ["inject_error", "move_coordinator"]
        assert cluster.nodes[last].path.metrics.injected_faults[("Metadata", "error")] == 1  # the new node's
        assert cluster.state.leadership(*cluster.state.coordinator_partition(0, "billing")).leader == last
