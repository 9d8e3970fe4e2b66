"""Generated and shrunk scenarios (``trikafka.testing.strategies``): hypothesis finds the
at-least-once bug planted in an example consumer, shrinks its fault schedule to at most three
steps, and the printed example (the scenario's JSON) and ``@reproduce_failure`` blob replay it;
the correct consumer passes the same property.

Deterministic: the in-memory broker under trio's MockClock, the Trio client, hypothesis
derandomized with no example database; bounded so it stays a few seconds.
"""

from __future__ import annotations

import json
import re

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, Phase, given, reproduce_failure, settings

from trikafka.client import ConsumerRecord, TopicPartition, open_consumer, open_producer
from trikafka.testing import Scenario, open_test_broker
from trikafka.testing.strategies import scenarios

RECORDS = 6
INPUT = TopicPartition("in", 0)
# Fetch first: the simplest scenario (the first of everything) does not expose the bug, so
# hypothesis has to search for one that does, then shrink it.
APIS = ["Fetch", "Produce", "OffsetCommit"]
ERRORS = ["NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT", "UNKNOWN_TOPIC_OR_PARTITION"]
SCENARIOS = scenarios(max_steps=4, apis=APIS, errors=ERRORS, max_time=1.0, max_requests=6)
ATTEMPTS = 20  # restarts after crashes: more than every generated fault together can cause
SETTINGS = settings(
    max_examples=30, derandomize=True, database=None, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow], phases=[Phase.explicit, Phase.generate, Phase.shrink],
)  # fmt: skip


async def process(producer, record: ConsumerRecord, processed: list[bytes]) -> None:
    """The consumer's work: 100 ms (virtual) of it, then forward the record (a Produce that
    can fail), then note it done."""
    await trio.sleep(0.1)
    await producer.send("out", record.value)
    processed.append(record.value)


async def example_consumer(bootstrap, processed: list[bytes], *, commit_first: bool) -> None:
    """Consume ``in`` to its end, processing each record and committing its progress. With
    ``commit_first`` it commits a batch *before* processing it — the planted bug: a crash in
    between loses the batch, as the restarted consumer starts past it."""
    async with (
        open_consumer(bootstrap, group_id="app", enable_auto_commit=False, auto_offset_reset="earliest") as consumer,
        open_producer(bootstrap, retries=0, enable_idempotence=False, acks=1) as producer,
    ):
        consumer.assign([INPUT])
        while await consumer.position(INPUT) < RECORDS:
            batches = await consumer.getmany(timeout_ms=1000, max_records=3)
            if commit_first:
                await consumer.commit()
            for records in batches.values():
                for record in records:
                    await process(producer, record, processed)
            if not commit_first:
                await consumer.commit()


async def _lost(scenario: Scenario, commit_first: bool, fired: list[int]) -> list[bytes]:
    async with open_test_broker(num_partitions=1) as broker:
        async with open_producer(broker) as producer:
            for i in range(RECORDS):
                await producer.send("in", b"%d" % i)
            await producer.send("out", b"created")
        run = broker.apply_scenario(scenario)
        processed: list[bytes] = []
        for _ in range(ATTEMPTS):  # a crash restarts the consumer, from the committed offset
            try:
                with trio.move_on_after(60):
                    await example_consumer(broker, processed, commit_first=commit_first)
                    break
            except Exception:  # noqa: BLE001 - any crash: restart, as a supervisor would
                continue
        else:
            raise AssertionError(f"the consumer never reached the end in {ATTEMPTS} attempts under {scenario!r}")
        fired.append(len(run.fired))
        broker.cancel_scenario()
        broker.clear_faults()
        return [b"%d" % i for i in range(RECORDS) if b"%d" % i not in processed]


def lost(scenario: Scenario, *, commit_first: bool, fired: list[int] | None = None) -> list[bytes]:
    """The input records the consumer never processed under ``scenario`` (at-least-once: none);
    ``fired`` gets how many of its steps fired."""
    clock = trio.testing.MockClock(autojump_threshold=0)
    return trio.run(_lost, scenario, commit_first, [] if fired is None else fired, clock=clock)


def test_the_correct_consumer_processes_every_record_under_any_scenario():
    fired: list[int] = []

    @SETTINGS
    @given(SCENARIOS)
    def at_least_once(scenario):
        assert lost(scenario, commit_first=False, fired=fired) == []

    at_least_once()
    # not vacuous: schedules of several steps were tried, and faults fired in most of them
    assert len(fired) == SETTINGS.max_examples and max(fired) >= 3 and sum(map(bool, fired)) > len(fired) // 2


def _buggy_property(failing: list[Scenario] | None = None):
    @SETTINGS
    @given(SCENARIOS)
    def at_least_once(scenario):
        missing = lost(scenario, commit_first=True)
        if missing and failing is not None:
            failing.append(scenario)
        assert missing == []

    return at_least_once


def test_hypothesis_finds_the_planted_bug_shrinks_it_and_the_printed_failure_replays_it():
    failing: list[Scenario] = []
    with pytest.raises(AssertionError) as failed:
        _buggy_property(failing)()
    printed = "\n".join(getattr(failed.value, "__notes__", []))
    example = re.search(r"at_least_once\(\s*scenario=(Scenario\.from_json\('.*'\)),?\s*\)", printed, re.S)
    assert example is not None, printed
    smallest = eval(example[1], {"Scenario": Scenario})  # the falsifying example, as printed
    assert 1 <= len(smallest.steps) <= 3, smallest
    assert failing[0] != smallest and len(failing[0].steps) >= len(smallest.steps)  # it was shrunk
    print(f"first failing: {failing[0]!r}\nshrunk to:     {smallest!r}")
    replayed = Scenario.from_json(json.loads(json.dumps(smallest.to_json())))  # its JSON replays it
    assert lost(replayed, commit_first=True) == lost(smallest, commit_first=True) != []
    assert lost(replayed, commit_first=False) == []  # the correct consumer survives the same schedule

    blob = re.search(r"@reproduce_failure\('([^']+)', (b'[^']+')\)", printed)
    assert blob is not None, printed
    replay = reproduce_failure(blob[1], eval(blob[2]))(_buggy_property())  # hypothesis's own replay
    with pytest.raises(AssertionError, match=r"assert \[b'"):
        replay()
