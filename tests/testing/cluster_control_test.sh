#!/bin/sh
# The cluster routes of the control interface from a shell, with curl and kcat, against
# `python -m trikafka --brokers 3 --override default.replication.factor=3 --override
# min.insync.replicas=2 --control-listener 127.0.0.1:0`: lose a broker, fail over, bring it
# back, move a leader and a coordinator, shrink and expand an ISR, set a round-trip time.
# Usage: cluster_control_test.sh CONTROL_URL — exits non-zero at the first surprise.
set -eu
URL="$1"
OUT=/tmp/trikafka-cluster-control.$$
trap 'rm -f $OUT $OUT.err' EXIT

expect() {  # expect STATUS METHOD PATH [JSON]: the body on stdout
  status="$1"; method="$2"; path="$3"; data="${4:-}"
  if [ -n "$data" ]; then
    got=$(curl -s -o $OUT -w '%{http_code}' -X "$method" -H 'Content-Type: application/json' -d "$data" "$URL$path")
  else
    got=$(curl -s -o $OUT -w '%{http_code}' -X "$method" "$URL$path")
  fi
  if [ "$got" != "$status" ]; then
    echo "FAIL: $method $path answered $got, expected $status: $(cat $OUT)" >&2
    exit 1
  fi
  cat $OUT
}
fail() { echo "FAIL: $*" >&2; exit 1; }
field() { sed -n "s/.*\"$1\": \([^,}]*\).*/\1/p"; }  # the first value of a JSON field
produce() {  # produce N FIRST: N records, acks=all, no retries
  seq "$2" $(($2 + $1 - 1)) | kcat -P -b "$BOOTSTRAP" -t failover -X acks=all -X message.send.max.retries=0 -X enable.idempotence=false 2>$OUT.err
}

brokers=$(expect 200 GET /brokers)
echo "$brokers" | grep -q '"id": 3, "alive": true' || fail "not three live brokers: $brokers"
BOOTSTRAP=$(echo "$brokers" | grep -o '"address": "[^"]*"' | sed 's/"address": "\(.*\)"/\1/' | paste -sd, -)

# Ten records on a topic replicated to all three; its leader is then stopped.
produce 10 1 || fail "produce: $(cat $OUT.err)"
[ "$(kcat -L -b "$BOOTSTRAP" | grep -c '^  broker ')" = 3 ] || fail "kcat does not see 3 brokers"
first=$(expect 200 GET /partitions/failover/0 | field leader)
expect 200 POST "/brokers/$first/stop" | grep -q '"alive": false' || fail "broker $first still alive"
expect 400 POST "/brokers/$first/stop" | grep -q "not running"
[ "$(kcat -L -b "$BOOTSTRAP" | grep -c '^  broker ')" = 2 ] || fail "kcat still sees the stopped broker"
second=$(expect 200 GET /partitions/failover/0 | field leader)
[ "$second" != "$first" ] && [ "$second" != -1 ] || fail "no failover from broker $first: leader $second"

# Two in-sync replicas left (min.insync.replicas=2): writes go on; nothing was lost.
produce 10 11 || fail "produce after the failover: $(cat $OUT.err)"
[ "$(kcat -C -b "$BOOTSTRAP" -t failover -o beginning -e -q | wc -l)" = 20 ] || fail "not 20 records after the failover"

# The broker comes back, catches up and rejoins the ISR; the leader moves back to it.
expect 200 POST "/brokers/$first/start" | grep -q '"alive": true' || fail "broker $first did not start"
expect 400 POST "/brokers/$first/start" | grep -q "already running"
expect 200 GET /partitions/failover/0 | grep -q '"isr": \[[0-9], [0-9], [0-9]\]' || fail "the ISR is not whole again"
expect 200 POST /partitions/failover/0/leader "{\"to\": $first}" | grep -q "\"leader\": $first," || fail "the leader did not move"
[ "$(kcat -C -b "$BOOTSTRAP" -t failover -o beginning -e -q | wc -l)" = 20 ] || fail "not 20 records on the old leader"

# An ISR of one: acks=all writes are refused (NOT_ENOUGH_REPLICAS) until it expands again.
expect 200 POST /partitions/failover/0/isr/shrink "{\"to\": [$first]}" | grep -q "\"isr\": \[$first\]" || fail "the ISR did not shrink"
if produce 1 21; then fail "acks=all went through an ISR of 1"; fi
grep -qi "not enough in-sync replicas" $OUT.err || fail "kcat did not report NOT_ENOUGH_REPLICAS: $(cat $OUT.err)"
expect 200 POST /partitions/failover/0/isr/expand | grep -q '"isr": \[[0-9], [0-9], [0-9]\]' || fail "the ISR did not expand"
produce 1 21 || fail "produce after the ISR expanded: $(cat $OUT.err)"

# A group's coordinator moves to broker 2: kcat's consumer group joins there.
expect 200 POST /coordinators '{"key": "shell-group", "to": 2, "key_type": "group"}' | grep -q '"leader": 2,' || fail "the coordinator did not move"
expect 200 POST "/recorder/start?broker=2" > /dev/null
timeout 60 kcat -b "$BOOTSTRAP" -G shell-group -o beginning -e -q failover > $OUT.err 2>&1 || true
expect 200 GET "/recorder?api=JoinGroup&broker=2" | grep -q '"groups": \["shell-group"\]' || fail "kcat's JoinGroup did not reach broker 2"

# A round-trip time on broker 3: a latency fault on every request, until set back to 0.
expect 200 POST /brokers/3/rtt '{"rtt_ms": 250}' | grep -q '"rtt_ms": 250' || fail "no rtt on broker 3"
expect 200 GET "/faults?broker=3" | grep -q '"description": "latency any API 250 ms"' || fail "no latency fault on broker 3"
[ "$(kcat -L -b "$BOOTSTRAP" | grep -c '^  broker ')" = 3 ] || fail "kcat does not see 3 brokers with an rtt"
expect 200 POST /brokers/3/rtt '{"rtt_ms": 0}' | grep -q '"rtt_ms": 0' || fail "the rtt stayed"

# Bad input is refused with a reason.
expect 404 POST /brokers/9/stop | grep -q "no broker 9"
expect 404 GET /partitions/nothing/0 | grep -q "no partition nothing-0"
expect 400 POST /partitions/failover/0/leader '{"to": "two"}' | grep -q "is not an int"
expect 400 POST /brokers/1/rtt '{"rtt_ms": -5}' | grep -q "non-negative"
echo "cluster controls OK"
