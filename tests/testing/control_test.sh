#!/bin/sh
# The control interface from a shell: curl against `python -m trikafka --control-listener`.
# Usage: control_test.sh CONTROL_URL BOOTSTRAP — exits non-zero at the first surprise.
set -eu
URL="$1"
BOOTSTRAP="$2"

expect() {  # expect STATUS METHOD PATH [JSON]
  status="$1"; method="$2"; path="$3"; data="${4:-}"
  if [ -n "$data" ]; then
    got=$(curl -s -o /tmp/trikafka-control.$$ -w '%{http_code}' -X "$method" -H 'Content-Type: application/json' -d "$data" "$URL$path")
  else
    got=$(curl -s -o /tmp/trikafka-control.$$ -w '%{http_code}' -X "$method" "$URL$path")
  fi
  body=$(cat /tmp/trikafka-control.$$); rm -f /tmp/trikafka-control.$$
  if [ "$got" != "$status" ]; then
    echo "FAIL: $method $path answered $got, expected $status: $body" >&2
    exit 1
  fi
  echo "$body"
}

# An injected error for the next Produce, seen by kcat as a failed delivery.
expect 201 POST /faults '{"kind": "error", "api": "Produce", "error": "INVALID_REQUIRED_ACKS", "count": 1}' | grep -q '"kind": "error"'
expect 200 GET /faults | grep -q '"api": "Produce"'
echo "one" | kcat -P -b "$BOOTSTRAP" -t shell-topic -X message.send.max.retries=0 2>/tmp/kcat-err.$$ || true
if ! grep -q -i "required acks" /tmp/kcat-err.$$; then
  echo "FAIL: kcat did not report the injected error:" >&2; cat /tmp/kcat-err.$$ >&2; exit 1
fi
rm -f /tmp/kcat-err.$$
expect 200 GET /faults | grep -q '"faults": \[\]'

# An error sequence: the first Produce refused, the next handled 10 ms later; then it is spent.
expect 201 POST /faults '{"kind": "sequence", "api": "Produce", "errors": ["INVALID_REQUIRED_ACKS", ["NONE", 10]]}' | grep -q '"kind": "sequence"'
echo "refused" | kcat -P -b "$BOOTSTRAP" -t shell-topic -X message.send.max.retries=0 2>/tmp/kcat-err.$$ || true
grep -q -i "required acks" /tmp/kcat-err.$$ || { echo "FAIL: the sequence's first error did not reach kcat" >&2; exit 1; }
rm -f /tmp/kcat-err.$$
echo "accepted" | kcat -P -b "$BOOTSTRAP" -t shell-topic
expect 200 GET /faults | grep -q '"faults": \[\]'
expect 400 POST /faults '{"kind": "sequence", "api": "Produce", "errors": "NONE"}' | grep -q "list of codes"

# The recorder saw kcat's requests; a record goes through now.
expect 200 POST /recorder/start > /dev/null
echo "two" | kcat -P -b "$BOOTSTRAP" -t shell-topic
expect 200 GET '/recorder?api=Produce' | grep -q '"topics": \["shell-topic"\]'
expect 200 GET '/wait/high-watermark?topic=shell-topic&partition=0&at_least=2&timeout_ms=10000' | grep -q '"reached": 2'
expect 408 GET '/wait/high-watermark?topic=shell-topic&partition=0&at_least=99&timeout_ms=50' | grep -q '"saw": "high watermark is 2"'

# Bad input is refused with a reason.
expect 400 POST /faults '{"kind": "error", "api": "Produse", "error": 6}' | grep -q "unknown api"
expect 400 POST /faults '{"kind": "teleport"}' | grep -q "kind"
expect 404 GET /nothing-here > /dev/null
expect 404 POST /brokers/1/stop | grep -q "start the broker with --brokers N"
expect 404 DELETE /faults/999 | grep -q "no fault #999"

# A hold, removed again.
id=$(expect 201 POST /faults '{"kind": "hold", "api": "Metadata", "count": 1}' | sed 's/.*"id": \([0-9]*\).*/\1/')
expect 200 POST "/faults/$id/release" | grep -q '"released": 0'
expect 200 DELETE /faults > /dev/null
echo "control interface OK"
