// Helpers shared by driver.js and groups.js: one kafkajs client setup, one error shape.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const stderrLogger = () => ({ namespace, label, log }) => {
  const { message, ...extra } = log
  process.stderr.write(`[kafkajs ${label}] ${namespace}: ${message} ${JSON.stringify(extra)}\n`)
}

function client(options, { clientId, retries }) {
  return new Kafka({
    clientId,
    brokers: [options.bootstrap],
    connectionTimeout: 5000,
    requestTimeout: 20000,
    retry: { retries, initialRetryTime: 100, maxRetryTime: 1000 },
    logLevel: logLevel.WARN,
    logCreator: stderrLogger,
  })
}

function describeError(error) {
  return {
    name: error.name,
    type: error.type || null,
    code: error.code === undefined ? null : error.code,
    message: error.message,
    retriable: error.retriable === undefined ? null : error.retriable,
  }
}

module.exports = { client, describeError }
