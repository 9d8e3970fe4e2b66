"""Share groups (KIP-932) in ``/metrics``, scraped from a broker process a ShareConsumer used.

A broker (``python -m trikafka --override metrics.port=0``) serves a share group driven by
confluent-kafka's ``ShareConsumer``: five records, three accepted, one released, one rejected;
another group's member holds a record past its 1 s lock so a second member gets it. The
scrapes, parsed by ``prometheus_client``'s parser, must carry Kafka's share-group series
(group coordinator ``share-group-count``/``group-count``/``share-group-rebalance-count``,
ShareGroupMetrics ``RecordAcknowledgementsPerSec`` and its histograms, SharePartitionMetrics
``InFlightMessageCount`` and ``AcquisitionLockTimeoutPerSec``, the BrokerTopicMetrics share
meters, the share coordinator's ``write-total``) with those numbers.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest

from tests.share.test_share_consumer import consumer, new_topic, poll_until, produce, set_group_configs
from tests.web.test_metrics_scrape import scrape, value
from trikafka.testing.process import BrokerProcess

pytestmark = pytest.mark.compat

TIMEOUT = 30
CONFIG = {
    "metrics.port": 0,
    "group.share.heartbeat.interval.ms": 500,
    "group.share.min.heartbeat.interval.ms": 500,
    "group.share.assignment.interval.ms": 0,
    "group.share.min.record.lock.duration.ms": 100,
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    overrides = [arg for key, v in CONFIG.items() for arg in ("--override", f"{key}={v}")]
    process = BrokerProcess("--in-memory", *overrides, cwd=tmp_path_factory.mktemp("share-metrics"))
    try:
        process.wait_ready()
        url = process.wait_for_output("metrics on").split("metrics on", 1)[1].strip()
        yield process, url
    finally:
        process.stop(15)


def test_share_group_counts_acknowledgements_and_in_flight(broker):
    from confluent_kafka import AcknowledgeType

    process, url = broker
    bootstrap = process.address
    topic, group = new_topic(bootstrap), "metrics-queue"
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce(bootstrap, topic, range(5))
    before = scrape(url)
    assert value(before, "kafka_server_sharegroupmetrics_recordacknowledgements_total", ackType="Accept") == 0
    c = consumer(bootstrap, group, topic, explicit=True, max_records=5, name="metrics-member")
    try:
        got = poll_until(c, lambda got: len(got) >= 5, "five records")
        kinds = [AcknowledgeType.ACCEPT] * 3 + [AcknowledgeType.RELEASE, AcknowledgeType.REJECT]
        for m, kind in zip(sorted(got, key=lambda m: m.offset()), kinds, strict=True):
            c.acknowledge(m, kind)
        c.commit_sync(TIMEOUT)
        live = scrape(url)  # the member is in the group
        assert value(live, "kafka_server_group_coordinator_metrics_share_group_count", state="Stable") == 1
        assert value(live, "kafka_server_group_coordinator_metrics_group_count", protocol="share") == 1
    finally:
        c.close()
    s = scrape(url)
    assert value(s, "kafka_server_group_coordinator_metrics_group_count", protocol="share") == 1
    assert value(s, "kafka_server_group_coordinator_metrics_share_group_count", state="Empty") == 1
    assert value(s, "kafka_server_group_coordinator_metrics_share_group_count", state="Stable") == 0
    acks = "kafka_server_sharegroupmetrics_recordacknowledgements_total"
    assert value(s, acks, ackType="Accept") == 3
    assert value(s, acks, ackType="Reject") == 1
    assert value(s, acks, ackType="Release") >= 1  # the client may release a prefetched one at close
    assert value(s, acks, ackType="Renew") == 0
    # Offsets 0-2 are done and behind the start offset; 3 (released) and 4 (rejected) remain.
    where = {"group": group, "topic": topic, "partition": "0"}
    assert value(s, "kafka_server_sharepartitionmetrics_inflightmessagecount", **where) == 2
    assert value(s, "kafka_server_sharepartitionmetrics_acquisitionlocktimeout_total", **where) == 0
    # BrokerTopicMetrics: each partition a ShareFetch named, each partition acknowledged.
    topic_metric = "kafka_server_brokertopicmetrics_{}_total"
    assert value(s, topic_metric.format("totalsharefetchrequests"), topic=topic) >= 1
    assert value(s, topic_metric.format("failedsharefetchrequests"), topic=topic) == 0
    assert value(s, topic_metric.format("totalshareacknowledgementrequests"), topic=topic) >= 1
    assert value(s, topic_metric.format("failedshareacknowledgementrequests"), topic=topic) == 0
    # ShareGroupMetrics histograms: at least the fetch that returned the five records.
    ratio = "kafka_server_sharegroupmetrics_requesttopicpartitionsfetchratio"
    assert value(s, ratio + "_count", group=group) >= 1
    assert value(s, ratio, group=group, quantile="0.999") == 100  # one partition, and it returned records
    assert value(s, "kafka_server_sharegroupmetrics_topicpartitionsacquiretimems_count", group=group) >= 1
    assert value(s, "kafka_server_group_coordinator_metrics_share_group_rebalance_count") >= 1
    assert value(s, "kafka_server_share_coordinator_metrics_write_total") == 0  # --in-memory: nothing written


def test_an_expired_acquisition_lock_is_counted(broker):
    from confluent_kafka import AcknowledgeType

    process, url = broker
    bootstrap = process.address
    topic, group = new_topic(bootstrap), "metrics-lock-expiry"
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest",
                                         "share.record.lock.duration.ms": "1000"})
    produce(bootstrap, topic, range(1))
    holder = consumer(bootstrap, group, topic, explicit=True, name="holder")
    other = consumer(bootstrap, group, topic, explicit=True, name="other")
    try:
        assert [m.delivery_count() for m in poll_until(holder, lambda got: got, "the record")] == [1]
        again = poll_until(other, lambda got: got, "the record after its lock expired")
        assert [m.delivery_count() for m in again] == [2]
        where = {"group": group, "topic": topic, "partition": "0"}
        s = scrape(url)
        assert value(s, "kafka_server_sharepartitionmetrics_acquisitionlocktimeout_total", **where) == 1
        assert value(s, "kafka_server_sharepartitionmetrics_inflightmessagecount", **where) == 1
        other.acknowledge(again[0], AcknowledgeType.ACCEPT)
        other.commit_sync(TIMEOUT)
    finally:
        holder.close()
        other.close()


def test_each_family_is_declared_once(broker):
    """The share series join families other code serves (``group-count``): one TYPE line each,
    or Prometheus refuses the scrape."""
    _, url = broker
    with urllib.request.urlopen(url, timeout=10) as reply:
        text = reply.read().decode()
    types = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
    assert "kafka_server_group_coordinator_metrics_share_group_count" in types
    assert len(types) == len(set(types)), sorted(t for t in types if types.count(t) > 1)
