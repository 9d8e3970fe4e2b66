"""``python -m trikafka rest``: the proxy's address and a curl line that works as printed."""

from __future__ import annotations

import json
import socket
import subprocess
import sys


def trikafka(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trikafka", *args], capture_output=True, text=True, timeout=60)


def test_it_prints_the_address_and_a_curl_line_that_produces(proxy_server):
    done = trikafka("rest", "--url", proxy_server.url, "--topic", "from-the-command")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (
        f"HTTP proxy (Confluent REST Proxy API v2 and v3) at {proxy_server.url}, cluster {proxy_server.cluster_id}"
    )
    curl = lines[2].strip()
    assert curl.startswith("curl -X POST")
    produced = subprocess.run(["bash", "-c", curl], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(produced.stdout)["offsets"][0]["offset"] == 0

    as_json = json.loads(trikafka("rest", "--url", proxy_server.url, "--json").stdout)
    assert as_json["url"] == proxy_server.url and as_json["cluster_id"] == proxy_server.cluster_id


def test_no_proxy_there_is_exit_1_naming_the_address():
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = trikafka("rest", "--url", f"http://127.0.0.1:{port}", "--timeout", "5")
    assert done.returncode == 1
    assert f"no HTTP proxy answers at http://127.0.0.1:{port}" in done.stderr
    assert "rest.proxy.port" in done.stderr
