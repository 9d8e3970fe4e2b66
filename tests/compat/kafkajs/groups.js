#!/usr/bin/env node
// kafkajs side of trikafka's consumer-group compatibility tests (tests/compat/test_groups.py).
//
//   node groups.js consume --bootstrap H:P --topic T --group G
//                          [--session-ms 6000] [--heartbeat-ms 500] [--rebalance-ms 15000]
//   node groups.js committed --bootstrap H:P --topic T --group G
//
// consume: one member of group G, subscribed to T from the earliest offset, through kafkajs's
// public consumer API (consumer.subscribe + consumer.run with eachMessage and autoCommit, so
// kafkajs itself resolves and commits offsets, and commits again when it sees a rebalance).
// It prints one JSON object per line on stdout:
//   {"event": "assigned", "memberId": M, "leaderId": L, "partitions": [p, ...]}  (GROUP_JOIN:
//       after every JoinGroup + SyncGroup, the member's new assignment of T)
//   {"event": "message", "partition": p, "offset": "o", "key": "..."}
//   {"event": "crash", "error": {...}}                  (kafkajs gave up; the consumer is dead)
//   {"event": "stopped"}                                (after a clean consumer.disconnect())
// A line "stop" on stdin, or stdin's end, stops it: consumer.disconnect() stops fetching,
// commits the resolved offsets and sends LeaveGroup; then "stopped" is printed and it exits 0.
//
// committed: the group's committed offsets of T, from admin.fetchOffsets (OffsetFetch):
//   {"ok": true, "offsets": [[partition, "offset"], ...]}  (offset "-1": nothing committed)
//
// Logs go to stderr; stdout carries only the JSON lines.
'use strict'

const readline = require('readline')
const { Kafka, logLevel } = require('kafkajs')
const { client: sharedClient, describeError } = require('./common')

function parseArgs(argv) {
  const [mode, ...rest] = argv
  const options = { mode }
  for (let i = 0; i < rest.length; i += 2) {
    options[rest[i].replace(/^--/, '')] = rest[i + 1]
  }
  return options
}

function client(options) {
  return sharedClient(options, { clientId: 'trikafka-compat-groups', retries: 5 })
}


// Lines must reach the pipe in order and before the process exits.
function emit(object) {
  return new Promise(resolve => process.stdout.write(JSON.stringify(object) + '\n', resolve))
}

async function consume(options) {
  const kafka = client(options)
  const consumer = kafka.consumer({
    groupId: options.group,
    sessionTimeout: parseInt(options['session-ms'] || '6000', 10),
    heartbeatInterval: parseInt(options['heartbeat-ms'] || '500', 10),
    rebalanceTimeout: parseInt(options['rebalance-ms'] || '15000', 10),
    maxWaitTimeInMs: 100,
    retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 1000 },
  })
  const { GROUP_JOIN, CRASH } = consumer.events
  consumer.on(GROUP_JOIN, ({ payload }) => {
    emit({
      event: 'assigned',
      memberId: payload.memberId,
      leaderId: payload.leaderId,
      partitions: [...(payload.memberAssignment[options.topic] || [])].sort((a, b) => a - b),
    })
  })
  consumer.on(CRASH, ({ payload }) => {
    emit({ event: 'crash', restart: payload.restart, error: describeError(payload.error) })
  })

  let stopping = null
  const stop = () => {
    if (stopping === null) {
      stopping = consumer.disconnect().then(() => emit({ event: 'stopped' }))
    }
    return stopping
  }
  const commands = readline.createInterface({ input: process.stdin })
  const stdinClosed = new Promise(resolve => commands.on('close', resolve))
  commands.on('line', line => {
    if (line.trim() === 'stop') stop()
  })

  await consumer.connect()
  await consumer.subscribe({ topics: [options.topic], fromBeginning: true })
  await consumer.run({
    autoCommit: true,
    eachMessage: async ({ partition, message }) => {
      await emit({
        event: 'message',
        partition,
        offset: message.offset,
        key: message.key === null ? null : message.key.toString('utf8'),
      })
    },
  })
  await stdinClosed
  await stop()
}

async function committed(options) {
  const admin = client(options).admin()
  await admin.connect()
  try {
    const [topic] = await admin.fetchOffsets({ groupId: options.group, topics: [options.topic] })
    return {
      ok: true,
      offsets: topic.partitions
        .map(p => [p.partition, p.offset])
        .sort((a, b) => a[0] - b[0]),
    }
  } catch (error) {
    return { ok: false, error: describeError(error) }
  } finally {
    await admin.disconnect()
  }
}

async function main() {
  const options = parseArgs(process.argv.slice(2))
  if (options.mode === 'consume') {
    await consume(options)
  } else if (options.mode === 'committed') {
    await emit(await committed(options))
  } else {
    throw new Error(`unknown mode ${options.mode}`)
  }
}

main().then(
  () => process.exit(0),
  error => {
    process.stderr.write(`${error.stack}\n`)
    emit({ event: 'crash', error: describeError(error) }).then(() => process.exit(2))
  }
)
