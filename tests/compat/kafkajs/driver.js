#!/usr/bin/env node
// kafkajs side of trikafka's compatibility tests (tests/compat/test_produce_consume.py).
//
//   node driver.js produce --bootstrap H:P --topic T [--codec none|gzip|snappy|lz4]
//                          [--partitions N] [--create]          < messages.json
//   node driver.js consume --bootstrap H:P --topic T --count N [--partitions N]
//                          [--timeout-ms MS]
//
// Bytes travel as base64 both ways. produce reads a JSON array of
// {partition, key, value, headers: [[name, base64], ...]} from stdin, sends them all in one
// producer.send (one record batch per partition, compressed with the codec) and prints
// {"ok": true, "offsets": [[partition, offset], ...]} or {"ok": false, "error": {...}}.
//
// consume: kafkajs consumes only through consumer groups, which the broker does not have yet,
// so this reads with kafkajs's own cluster and broker objects (the ones its consumer runs on):
// Metadata, then Fetch from offset 0 of each partition until `count` records have arrived or
// the deadline passes. The records are decoded (and decompressed) by kafkajs itself. It prints
// {"ok": true, "records": [{partition, offset, key, value, headers}, ...]}.
//
// Logs go to stderr; stdout carries only the one JSON result.
'use strict'

const { Kafka, CompressionTypes, CompressionCodecs, logLevel, Partitioners } = require('kafkajs')
const { client: sharedClient, describeError } = require('./common')
const SnappyCodec = require('kafkajs-snappy')
const LZ4Codec = require('kafkajs-lz4')

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = new LZ4Codec().codec

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
}

function parseArgs(argv) {
  const [mode, ...rest] = argv
  const options = { mode }
  for (let i = 0; i < rest.length; i++) {
    const name = rest[i].replace(/^--/, '')
    if (name === 'create') {
      options.create = true
    } else {
      options[name] = rest[++i]
    }
  }
  return options
}

function client(options) {
  return sharedClient(options, { clientId: 'trikafka-compat', retries: 3 })
}


function readStdin() {
  return new Promise((resolve, reject) => {
    const chunks = []
    process.stdin.on('data', chunk => chunks.push(chunk))
    process.stdin.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    process.stdin.on('error', reject)
  })
}

const b64 = text => (text === null ? null : Buffer.from(text, 'base64'))
const toB64 = buffer => (buffer === null || buffer === undefined ? null : buffer.toString('base64'))

async function produce(options) {
  const kafka = client(options)
  const partitions = parseInt(options.partitions || '1', 10)
  if (options.create) {
    const admin = kafka.admin()
    await admin.connect()
    try {
      await admin.createTopics({
        topics: [{ topic: options.topic, numPartitions: partitions, replicationFactor: 1 }],
        waitForLeaders: true,
        timeout: 10000,
      })
    } finally {
      await admin.disconnect()
    }
  }
  const messages = JSON.parse(await readStdin()).map(m => ({
    partition: m.partition,
    key: b64(m.key),
    value: b64(m.value),
    headers: Object.fromEntries(m.headers.map(([name, value]) => [name, b64(value)])),
  }))
  const producer = kafka.producer({
    createPartitioner: Partitioners.DefaultPartitioner,
    allowAutoTopicCreation: true,
    retry: { retries: 2 },
  })
  await producer.connect()
  try {
    const metadata = await producer.send({
      topic: options.topic,
      acks: -1,
      timeout: 20000,
      compression: CODECS[options.codec || 'none'],
      messages,
    })
    return {
      ok: true,
      offsets: metadata.map(m => [m.partition, m.baseOffset, m.errorCode]),
    }
  } catch (error) {
    return { ok: false, error: describeError(error) }
  } finally {
    await producer.disconnect()
  }
}

// The symbol under which Kafka keeps its cluster factory (kafkajs's own, not exported).
function createCluster(kafka) {
  const symbol = Object.getOwnPropertySymbols(kafka).find(
    s => s.description === 'private:Kafka:createCluster'
  )
  if (symbol === undefined) throw new Error('kafkajs internals changed: no createCluster')
  return kafka[symbol]({ allowAutoTopicCreation: false })
}

async function consume(options) {
  const kafka = client(options)
  const count = parseInt(options.count, 10)
  const partitions = parseInt(options.partitions || '1', 10)
  const deadline = Date.now() + parseInt(options['timeout-ms'] || '20000', 10)
  const cluster = createCluster(kafka)
  await cluster.connect()
  try {
    await cluster.addTargetTopic(options.topic)
    const next = new Map()
    for (let p = 0; p < partitions; p++) next.set(p, '0')
    const records = []
    while (records.length < count) {
      if (Date.now() > deadline) {
        return { ok: false, error: { name: 'Timeout', message: `${records.length} of ${count}` }, records }
      }
      const leaders = cluster.findLeaderForPartitions(options.topic, [...next.keys()])
      for (const [nodeId, ids] of Object.entries(leaders)) {
        const broker = await cluster.findBroker({ nodeId })
        const response = await broker.fetch({
          maxWaitTime: 200,
          minBytes: 1,
          maxBytes: 16 * 1024 * 1024,
          topics: [
            {
              topic: options.topic,
              partitions: ids.map(p => ({
                partition: p,
                fetchOffset: next.get(p),
                maxBytes: 2 * 1024 * 1024,
              })),
            },
          ],
        })
        for (const topic of response.responses) {
          for (const partition of topic.partitions) {
            if (partition.errorCode !== 0) {
              return {
                ok: false,
                error: { name: 'FetchError', code: partition.errorCode, partition: partition.partition },
                records,
              }
            }
            for (const message of partition.messages) {
              // A fetch may return a batch that starts before the offset asked for.
              if (BigInt(message.offset) < BigInt(next.get(partition.partition))) continue
              records.push({
                partition: partition.partition,
                offset: message.offset,
                key: toB64(message.key),
                value: toB64(message.value),
                headers: Object.entries(message.headers).map(([name, value]) => [name, toB64(value)]),
              })
              next.set(partition.partition, (BigInt(message.offset) + 1n).toString())
            }
          }
        }
      }
    }
    return { ok: true, records }
  } finally {
    await cluster.disconnect()
  }
}

async function main() {
  const options = parseArgs(process.argv.slice(2))
  let result
  try {
    if (options.mode === 'produce') result = await produce(options)
    else if (options.mode === 'consume') result = await consume(options)
    else throw new Error(`unknown mode ${options.mode}`)
  } catch (error) {
    result = { ok: false, error: describeError(error) }
  }
  // Exit only once the result is written: stdout is a pipe, and process.exit would cut it.
  await new Promise(resolve => process.stdout.write(JSON.stringify(result) + '\n', resolve))
}

main().then(
  () => process.exit(0),
  error => {
    process.stderr.write(`${error.stack}\n`)
    process.exit(2)
  }
)
