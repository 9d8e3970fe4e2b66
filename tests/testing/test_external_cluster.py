"""The same tests against an external cluster: the plugin's own tests, run by pytest in a
subprocess with ``--kafka-bootstrap`` (and ``TRIKAFKA_BOOTSTRAP``) pointing at a second
``python -m trikafka`` process. What the Kafka protocol can answer passes there; what needs
trikafka's own broker is skipped with a reason naming the option."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import trio

from trikafka.client import open_admin
from trikafka.testing.process import broker_process

pytestmark = pytest.mark.compat

ROOT = Path(__file__).resolve().parents[2]
HELPERS = "tests/testing/test_topic_helpers.py"
PLUGIN = "tests/testing/test_plugin.py"
EXAMPLE = "examples/pytest_any_cluster.py"  # the one docs/testing/external-cluster.md shows

#: Run against the external cluster, and what each must come out as.
PASS = [
    f"{HELPERS}::test_every_handle_has_the_helpers_with_one_signature",
    f"{HELPERS}::test_the_trio_handle_in_real_time",
    f"{HELPERS}::test_what_produce_wrote_a_real_consumer_reads_and_read_sees_what_it_wrote",
    f"{HELPERS}::test_aio_helpers_and_read_refused_inside_a_loop",
    f"{HELPERS}::test_a_blocking_read_from_a_plain_test_is_fine",
    f"{PLUGIN}::test_group_and_commit_waits_with_confluent_kafka",
    f"{EXAMPLE}::test_orders_are_consumed_and_committed",
]
SKIP = {
    f"{HELPERS}::test_create_produce_and_read_back_in_virtual_time": "virtual time (the MockClock of autojump_clock)",
    f"{HELPERS}::test_read_with_max_records_waits_for_them_and_says_what_it_saw": "virtual time",
    f"{HELPERS}::test_a_cluster_handle_creates_replicated_topics": "kafka_cluster(brokers=3)",
    f"{HELPERS}::test_a_refusal_the_cluster_answers_is_the_clients_error_naming_the_topic": "inject_error()",
    f"{PLUGIN}::test_mark_sets_broker_config": "@pytest.mark.trikafka(config=)",
    f"{PLUGIN}::test_each_test_gets_a_fresh_broker_and_no_thread_outlives_it": "recorded()",
    f"{PLUGIN}::test_transaction_state_wait_with_a_transactional_producer": "wait_for_transaction_state()",
    f"{PLUGIN}::test_faults_over_threads_are_the_brokers_faults": "inject_error()",
    f"{PLUGIN}::test_kafka_cluster_of_one": ".brokers",
    f"{EXAMPLE}::test_a_produce_retried_after_a_leader_change": "inject_error()",
}


def _run_pytest(tests: list[str], tmp_path: Path, *, option: str | None = None, env: dict[str, str] | None = None):
    report = tmp_path / f"report-{len(list(tmp_path.iterdir()))}.xml"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-rs",
               f"--junitxml={report}", *([option] if option else []), *tests]  # fmt: skip
    child_env = {k: v for k, v in os.environ.items() if k != "TRIKAFKA_BOOTSTRAP"}
    result = subprocess.run(
        command, cwd=ROOT, env={**child_env, **(env or {})}, capture_output=True, text=True, timeout=600
    )
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        # a parametrized test counts once: its worst outcome
        name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name', '').partition('[')[0]}"
        skipped = case.find("skipped")
        failed = case.find("failure") if case.find("failure") is not None else case.find("error")
        if failed is not None:
            outcomes[name] = ("failed", failed.get("message", ""))
        elif skipped is not None and outcomes.get(name, ("",))[0] != "failed":
            outcomes[name] = ("skipped", f"{skipped.get('message', '')} {skipped.text or ''}")
        else:
            outcomes.setdefault(name, ("passed", ""))
    return result, outcomes


async def _topics(bootstrap: str) -> set[str]:
    async with open_admin(bootstrap) as admin:
        return set(await admin.list_topics())


def test_the_plugins_own_tests_against_a_trikafka_process_given_as_the_external_cluster(tmp_path):
    with broker_process("--in-memory", cwd=tmp_path) as external:
        result, outcomes = _run_pytest([*PASS, *SKIP], tmp_path, option=f"--kafka-bootstrap={external.address}")
        seen = trio.run(_topics, external.address)
        assert external.stop() == 0
    shown = f"{result.stdout}\n{result.stderr}\n--- external broker:\n{external.output[-3000:]}"
    assert f"broker fixtures on the external cluster {external.address}" in result.stdout, shown
    for test in PASS:
        assert outcomes.get(test, ("missing",))[0] == "passed", (test, outcomes.get(test), shown)
    for test, what in SKIP.items():
        outcome, reason = outcomes.get(test, ("missing", ""))
        assert outcome == "skipped", (test, outcome, reason, shown)
        assert what in reason and "--kafka-bootstrap" in reason and external.address in reason, (test, reason)
    assert result.returncode == 0, shown
    # -rs points at the test's line that asked for a fault, not at the handle's code
    skipped_at = rf"SKIPPED \[1\] {EXAMPLE}:\d+: inject_error\(\) needs trikafka's own broker"
    assert re.search(skipped_at, result.stdout), shown
    # the tests ran on the external cluster: what they created is there
    assert {"payments", "trio-real", "aio-topic", "plain", "clicks"} <= seen, seen


def test_the_environment_variable_and_a_wrong_address(tmp_path):
    selection = [PASS[2], f"{PLUGIN}::test_faults_over_threads_are_the_brokers_faults"]
    with broker_process("--in-memory", cwd=tmp_path) as external:
        result, outcomes = _run_pytest(selection, tmp_path, env={"TRIKAFKA_BOOTSTRAP": external.address})
        assert external.stop() == 0
    assert [outcomes.get(t, ("missing",))[0] for t in selection] == ["passed", "skipped"], result.stdout
    assert "TRIKAFKA_BOOTSTRAP" in outcomes[selection[1]][1]

    wrong = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--kafka-bootstrap=http://x", PASS[0]],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert wrong.returncode != 0 and "--kafka-bootstrap='http://x': give HOST:PORT" in wrong.stderr, wrong.stderr
