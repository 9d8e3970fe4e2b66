#!/usr/bin/env node
// kafkajs over TLS and SASL, for tests/compat/test_security_clients.py.
//
//   node secure.js --bootstrap H:P --topic T --count N [--ca FILE] [--mechanism plain|scram-sha-256|scram-sha-512
//                  --username U --password P]
//
// Produces N records ("kafkajs-<i>") and consumes them back in a consumer group from the
// beginning. Prints {"ok": true, "values": [...]} or {"ok": false, "error": {...}} on stdout.
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')
const { describeError } = require('./common')

function parseArgs(argv) {
  const options = {}
  for (let i = 0; i < argv.length; i += 2) options[argv[i].replace(/^--/, '')] = argv[i + 1]
  return options
}

async function main() {
  const options = parseArgs(process.argv.slice(2))
  const count = Number(options.count)
  const config = {
    clientId: 'trikafka-secure',
    brokers: [options.bootstrap],
    connectionTimeout: 5000,
    requestTimeout: 20000,
    retry: { retries: 0 },
    logLevel: logLevel.NOTHING,
  }
  if (options.ca) config.ssl = { ca: [fs.readFileSync(options.ca, 'utf-8')] }
  if (options.mechanism) {
    config.sasl = { mechanism: options.mechanism, username: options.username, password: options.password }
  }
  const kafka = new Kafka(config)
  const producer = kafka.producer({ allowAutoTopicCreation: true })
  await producer.connect()
  const messages = []
  for (let i = 0; i < count; i++) messages.push({ value: `kafkajs-${i}` })
  await producer.send({ topic: options.topic, messages })
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: `secure-${options.topic}` })
  await consumer.connect()
  await consumer.subscribe({ topic: options.topic, fromBeginning: true })
  const values = []
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only ${values.length} of ${count} records`)), 25000)
    consumer.run({
      eachMessage: async ({ message }) => {
        values.push(message.value.toString())
        if (values.length >= count) { clearTimeout(timer); resolve() }
      },
    }).catch(reject)
  })
  await consumer.disconnect()
  return values
}

main().then(
  values => { process.stdout.write(JSON.stringify({ ok: true, values }) + '\n'); process.exit(0) },
  error => { process.stdout.write(JSON.stringify({ ok: false, error: describeError(error) }) + '\n'); process.exit(0) },
)
