// Child process: the official RocketMQ 5 Node.js client (rocketmq-client-nodejs, pinned in
// package.json) against our gRPC door, for tests/proxy/test_official_node_client.py.
//
// `node driver.js '<json>'` runs one role and prints one JSON event per line:
//   {"role": "produce", "endpoints", "topic", "count" | "duration_s", "pause_s"}
//     -> "sent" {message_id, body (hex), tag, keys, properties, offset, t, began, acked} (the
//        wall-clock seconds the send began and was acknowledged) or "failed" {index, error, t}
//        per message, then "done".
//   {"role": "simple", "endpoints", "topic", "group", "count", "duration_s"}
//     -> a SimpleConsumer receives until `count` distinct messages are acknowledged or the
//        time is up: "received" {message_id, attempt, body}; it leaves the first message
//        unacknowledged once ("held": it must come back with attempt 2) and gives the second
//        a 60 s invisible duration before acking it with the new handle ("renewed"); "acked"
//        per ack; at the end one more receive must find nothing: "done" {leftover}.
//   {"role": "produce_types", "endpoints", "fifo_topic", "mixed_topic", "delay_ms"}
//     -> FIFO messages (3 message groups x 5, in order, to fifo_topic), 3 delay messages
//        (delay_ms ahead) and 6 transactions of one message each, 3 committed and 3 rolled
//        back (to mixed_topic): "sent" {kind, message_id, group?, index?, due_ms?, resolution?}.
//   {"role": "receive_all", "endpoints", "topic", "group", "count", "duration_s"}
//     -> a SimpleConsumer acks everything it receives: "received" {message_id, group, body,
//        attempt, at_ms} until `count` distinct ones or the time is up; then "done".
// Runs with its own HOME (the client logs to $HOME/logs/rocketmq/); NODE_PATH names the
// node_modules the test installed with `npm ci`.
'use strict';

const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

const args = JSON.parse(process.argv[2]);
const started = Date.now();
const emit = (event, fields) =>
  process.stdout.write(JSON.stringify({ event, t: (Date.now() - started) / 1000, ...fields }) + '\n');
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const said = (err) => String(err && err.message ? err.message : err);

// Shutting down tells every endpoint the client used that it is leaving; after a kill -9 one
// of them is gone, and the client's shutdown rejects for it: reported, not a failed run.
async function shutdown(client) {
  try {
    await client.shutdown();
  } catch (err) {
    emit('shutdown_error', { error: said(err) });
  }
}

async function produce() {
  const producer = new Producer({ endpoints: args.endpoints, namespace: '', requestTimeout: 5000 });
  await producer.startup();
  const until = args.duration_s ? started + args.duration_s * 1000 : Infinity;
  const count = args.count ?? Infinity;
  for (let i = 0; i < count && Date.now() < until; i++) {
    const body = Buffer.from(`node-${i}-${'x'.repeat(i % 7)}`);
    const tag = i % 2 ? 'odd' : 'even';
    const keys = [`key-${i}`];
    const began = Date.now() / 1000;
    try {
      const receipt = await producer.send({
        topic: args.topic,
        tag,
        keys,
        body,
        properties: new Map([['index', String(i)]]),
      });
      emit('sent', {
        message_id: receipt.messageId,
        body: body.toString('hex'),
        tag,
        keys,
        properties: { index: String(i) },
        offset: receipt.offset,
        began,
        acked: Date.now() / 1000,
      });
    } catch (err) {
      emit('failed', { index: i, error: said(err) });
    }
    if (args.pause_s) await sleep(args.pause_s * 1000);
  }
  await shutdown(producer);
  emit('done', {});
}

async function simple() {
  const consumer = new SimpleConsumer({
    endpoints: args.endpoints,
    namespace: '',
    consumerGroup: args.group,
    subscriptions: new Map([[args.topic, '*']]),
    awaitDuration: 2000,
    requestTimeout: 5000,
  });
  await consumer.startup();
  const acked = new Set();
  let held = null;
  let renewed = null;
  const until = started + (args.duration_s ?? 40) * 1000;
  while (acked.size < args.count && Date.now() < until) {
    let messages;
    try {
      messages = await consumer.receive(16, 2000);
    } catch (err) {
      emit('receive_error', { error: said(err) });
      await sleep(200);
      continue;
    }
    for (const message of messages) {
      emit('received', {
        message_id: message.messageId,
        attempt: message.deliveryAttempt,
        body: message.body.toString('hex'),
      });
      if (held === null) {
        held = message.messageId; // not acked now: it comes back after 2 s
        emit('held', { message_id: held });
        continue;
      }
      if (renewed === null && message.messageId !== held) {
        renewed = message.messageId;
        await consumer.changeInvisibleDuration(message, 60000);
        emit('renewed', { message_id: renewed });
      }
      try {
        await consumer.ack(message);
        acked.add(message.messageId);
        emit('acked', { message_id: message.messageId });
      } catch (err) {
        emit('failed', {
          message_id: message.messageId,
          error: said(err),
        });
      }
    }
  }
  let leftover = 0;
  try {
    leftover = (await consumer.receive(16, 2000)).length;
  } catch (err) {
    emit('receive_error', { error: said(err) });
  }
  await shutdown(consumer);
  emit('done', { leftover });
}

async function produceTypes() {
  const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');
  const producer = new Producer({
    endpoints: args.endpoints,
    namespace: '',
    requestTimeout: 5000,
    // nothing is left open here: a check-back would be a bug, answered ROLLBACK
    checker: { check: async () => TransactionResolution.ROLLBACK },
  });
  await producer.startup();
  for (let i = 0; i < 5; i++) {
    for (const group of ['ga', 'gb', 'gc']) {
      const receipt = await producer.send({
        topic: args.fifo_topic, messageGroup: group, body: Buffer.from(`${group}-${i}`),
      });
      emit('sent', { kind: 'fifo', message_id: receipt.messageId, group, index: i });
    }
  }
  for (let i = 0; i < 3; i++) {
    const due = Date.now() + args.delay_ms;
    const receipt = await producer.send({
      topic: args.mixed_topic, deliveryTimestamp: new Date(due), body: Buffer.from(`delay-${i}`),
    });
    emit('sent', { kind: 'delay', message_id: receipt.messageId, due_ms: due });
  }
  for (let i = 0; i < 6; i++) {
    const commit = i % 2 === 0;
    const transaction = producer.beginTransaction();
    const receipt = await producer.send(
      { topic: args.mixed_topic, body: Buffer.from(`txn-${i}`) }, transaction,
    );
    if (commit) await transaction.commit();
    else await transaction.rollback();
    emit('sent', {
      kind: 'transaction', message_id: receipt.messageId,
      resolution: commit ? 'commit' : 'rollback',
    });
  }
  await shutdown(producer);
  emit('done', {});
}

async function receiveAll() {
  const consumer = new SimpleConsumer({
    endpoints: args.endpoints,
    namespace: '',
    consumerGroup: args.group,
    subscriptions: new Map([[args.topic, '*']]),
    awaitDuration: 2000,
    requestTimeout: 5000,
  });
  await consumer.startup();
  const seen = new Set();
  const until = started + (args.duration_s ?? 40) * 1000;
  while (seen.size < args.count && Date.now() < until) {
    let messages;
    try {
      messages = await consumer.receive(16, 10000);
    } catch (err) {
      emit('receive_error', { error: said(err) });
      await sleep(200);
      continue;
    }
    for (const message of messages) {
      emit('received', {
        message_id: message.messageId, group: message.messageGroup ?? null,
        body: message.body.toString(), attempt: message.deliveryAttempt, at_ms: Date.now(),
      });
      await consumer.ack(message);
      seen.add(message.messageId);
    }
  }
  await shutdown(consumer);
  emit('done', { distinct: seen.size });
}

const roles = { produce, simple, produce_types: produceTypes, receive_all: receiveAll };
roles[args.role]()
  .then(() => process.exit(0))
  .catch((err) => {
    emit('startup_failed', { error: String(err && err.stack ? err.stack : err) });
    process.exit(1);
  });
