"""Confluent's documented curl examples (the REST Proxy quick start, v2 and v3), run as written.

Only the address changes: ``http://localhost:8082`` becomes the proxy's free port, and v3's
``<cluster-id>`` placeholder the broker's cluster id. Each command's output is checked
against what Confluent's docs show it answers.
"""

from __future__ import annotations

import json
import subprocess

from tests.rest.conftest import ProxyServer


def run(server: ProxyServer, command: str) -> str:
    command = command.replace("http://localhost:8082", server.url).replace("<cluster-id>", server.cluster_id)
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


def test_the_json_quick_start(proxy_server):
    produced = run(
        proxy_server,
        """curl -X POST -H "Content-Type: application/vnd.kafka.json.v2+json" \\
      --data '{"records":[{"value":{"foo":"bar"}}]}' "http://localhost:8082/topics/jsontest" """,
    )
    assert json.loads(produced) == {
        "offsets": [{"partition": 0, "offset": 0, "error_code": None, "error": None}],
        "key_schema_id": None,
        "value_schema_id": None,
    }
    created = run(
        proxy_server,
        """curl -X POST -H "Content-Type: application/vnd.kafka.v2+json" \\
      --data '{"name": "my_consumer_instance", "format": "json", "auto.offset.reset": "earliest"}' \\
      http://localhost:8082/consumers/my_json_consumer""",
    )
    assert json.loads(created) == {
        "instance_id": "my_consumer_instance",
        "base_uri": f"{proxy_server.url}/consumers/my_json_consumer/instances/my_consumer_instance",
    }
    assert run(
        proxy_server,
        """curl -X POST -H "Content-Type: application/vnd.kafka.v2+json" --data '{"topics":["jsontest"]}' \\
      http://localhost:8082/consumers/my_json_consumer/instances/my_consumer_instance/subscription""",
    ) == ""
    records = run(
        proxy_server,
        """curl -X GET -H "Accept: application/vnd.kafka.json.v2+json" \\
      http://localhost:8082/consumers/my_json_consumer/instances/my_consumer_instance/records""",
    )
    assert json.loads(records) == [
        {"topic": "jsontest", "key": None, "value": {"foo": "bar"}, "partition": 0, "offset": 0}
    ]
    assert run(
        proxy_server,
        """curl -X DELETE -H "Content-Type: application/vnd.kafka.v2+json" \\
      http://localhost:8082/consumers/my_json_consumer/instances/my_consumer_instance""",
    ) == ""
    gone = run(
        proxy_server,
        """curl -X GET -H "Accept: application/vnd.kafka.json.v2+json" \\
      http://localhost:8082/consumers/my_json_consumer/instances/my_consumer_instance/records""",
    )
    assert json.loads(gone)["error_code"] == 40403


def test_the_binary_quick_start(proxy_server):
    produced = run(
        proxy_server,
        """curl -X POST -H "Content-Type: application/vnd.kafka.binary.v2+json" \\
      -H "Accept: application/vnd.kafka.v2+json" \\
      --data '{"records":[{"value":"S2Fma2E="}]}' "http://localhost:8082/topics/binarytest" """,
    )
    assert json.loads(produced)["offsets"] == [{"partition": 0, "offset": 0, "error_code": None, "error": None}]
    run(
        proxy_server,
        """curl -X POST -H "Content-Type: application/vnd.kafka.v2+json" \\
      --data '{"name": "my_consumer_instance", "format": "binary", "auto.offset.reset": "earliest"}' \\
      http://localhost:8082/consumers/my_binary_consumer""",
    )
    run(
        proxy_server,
        """curl -X POST -H "Content-Type: application/vnd.kafka.v2+json" --data '{"topics":["binarytest"]}' \\
      http://localhost:8082/consumers/my_binary_consumer/instances/my_consumer_instance/subscription""",
    )
    records = run(
        proxy_server,
        """curl -X GET -H "Accept: application/vnd.kafka.binary.v2+json" \\
      http://localhost:8082/consumers/my_binary_consumer/instances/my_consumer_instance/records""",
    )
    assert json.loads(records) == [
        {"topic": "binarytest", "key": None, "value": "S2Fma2E=", "partition": 0, "offset": 0}
    ]
    run(
        proxy_server,
        """curl -X DELETE -H "Content-Type: application/vnd.kafka.v2+json" \\
      http://localhost:8082/consumers/my_binary_consumer/instances/my_consumer_instance""",
    )


def test_the_avro_quick_start(proxy_server):
    produced = run(
        proxy_server,
        """curl -X POST -H "Content-Type: application/vnd.kafka.avro.v2+json" \\
      -H "Accept: application/vnd.kafka.v2+json" \\
      --data '{"value_schema": "{\\"type\\": \\"record\\", \\"name\\": \\"User\\", \\"fields\\": [{\\"name\\": \\"name\\", \\"type\\": \\"string\\"}]}", "records": [{"value": {"name": "testUser"}}]}' \\
      "http://localhost:8082/topics/avrotest" """,  # noqa: E501 - the command exactly as Confluent's docs give it
    )
    answer = json.loads(produced)
    assert answer["offsets"] == [{"partition": 0, "offset": 0, "error_code": None, "error": None}]
    assert isinstance(answer["value_schema_id"], int) and answer["key_schema_id"] is None
    run(
        proxy_server,
        """curl -X POST  -H "Content-Type: application/vnd.kafka.v2+json" \\
      --data '{"name": "my_consumer_instance", "format": "avro", "auto.offset.reset": "earliest"}' \\
      http://localhost:8082/consumers/my_avro_consumer""",
    )
    run(
        proxy_server,
        """curl -X POST -H "Content-Type: application/vnd.kafka.v2+json" --data '{"topics":["avrotest"]}' \\
      http://localhost:8082/consumers/my_avro_consumer/instances/my_consumer_instance/subscription""",
    )
    records = run(
        proxy_server,
        """curl -X GET -H "Accept: application/vnd.kafka.avro.v2+json" \\
      http://localhost:8082/consumers/my_avro_consumer/instances/my_consumer_instance/records""",
    )
    assert json.loads(records) == [
        {"topic": "avrotest", "key": None, "value": {"name": "testUser"}, "partition": 0, "offset": 0}
    ]
    run(
        proxy_server,
        """curl -X DELETE -H "Content-Type: application/vnd.kafka.v2+json" \\
      http://localhost:8082/consumers/my_avro_consumer/instances/my_consumer_instance""",
    )


def test_topics_and_brokers(proxy_server):
    run(
        proxy_server,
        """curl -X POST -H "Content-Type: application/vnd.kafka.json.v2+json" \\
      --data '{"records":[{"value":{"foo":"bar"}}]}' "http://localhost:8082/topics/listed" """,
    )
    assert "listed" in json.loads(run(proxy_server, 'curl "http://localhost:8082/topics"'))
    topic = json.loads(run(proxy_server, 'curl "http://localhost:8082/topics/listed"'))
    assert topic["name"] == "listed" and topic["partitions"][0]["leader"] == 1
    assert topic["configs"]["cleanup.policy"] == "delete"
    assert json.loads(run(proxy_server, 'curl "http://localhost:8082/brokers"')) == {"brokers": [1]}
    offsets = json.loads(run(proxy_server, 'curl "http://localhost:8082/topics/listed/partitions/0/offsets"'))
    assert offsets == {"beginning_offset": 0, "end_offset": 1}


def test_the_v3_examples(proxy_server):
    clusters = json.loads(run(proxy_server, 'curl -X GET -H "Accept: application/json" http://localhost:8082/v3/clusters'))
    assert clusters["kind"] == "KafkaClusterList"
    assert clusters["data"][0]["cluster_id"] == proxy_server.cluster_id
    created = json.loads(
        run(
            proxy_server,
            """curl -X POST -H "Content-Type: application/json" \\
  --data '{"topic_name": "my-topic"}' http://localhost:8082/v3/clusters/<cluster-id>/topics""",
        )
    )
    assert created["kind"] == "KafkaTopic" and created["topic_name"] == "my-topic"
    produced = json.loads(
        run(
            proxy_server,
            """curl -X POST -H "Content-Type: application/json" \\
  -d '{"value": {"type": "JSON", "data": "Hello World!"}}' \\
  http://localhost:8082/v3/clusters/<cluster-id>/topics/my-topic/records""",
        )
    )
    assert produced["error_code"] == 200 and produced["offset"] == 0
    assert produced["value"] == {"type": "JSON", "size": 14}
    topics = json.loads(run(proxy_server, "curl http://localhost:8082/v3/clusters/<cluster-id>/topics"))
    assert "my-topic" in [t["topic_name"] for t in topics["data"]]
    assert (
        run(
            proxy_server,
            "curl -X DELETE http://localhost:8082/v3/clusters/<cluster-id>/topics/my-topic",
        )
        == ""
    )
    gone = json.loads(run(proxy_server, "curl http://localhost:8082/v3/clusters/<cluster-id>/topics/my-topic"))
    assert gone["error_code"] == 40401


def test_the_v3_streaming_example(proxy_server):
    """Confluent's streaming mode: several records in one chunked request, answered in order."""
    run(
        proxy_server,
        """curl -X POST -H "Content-Type: application/json" \\
  --data '{"topic_name": "stream-topic", "partitions_count": 1}' http://localhost:8082/v3/clusters/<cluster-id>/topics""",
    )
    out = run(
        proxy_server,
        """printf '%s\\n' '{"value": {"type": "JSON", "data": 1}}' '{"value": {"type": "BINARY", "data": "!!"}}' \\
  '{"value": {"type": "STRING", "data": "three"}}' | \\
curl -X POST -H "Content-Type: application/json" -H "Transfer-Encoding: chunked" -T - \\
  http://localhost:8082/v3/clusters/<cluster-id>/topics/stream-topic/records""",
    )
    answers = [json.loads(line) for line in out.splitlines()]
    assert [a["error_code"] for a in answers] == [200, 42203, 200]
    assert [a.get("offset") for a in answers] == [0, None, 1]
