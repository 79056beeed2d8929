'use strict';
/*
 * Drive the real Node.js RocketMQ client ali-ons (npm `ali-ons`, pinned in package.json) from
 * one JSON command, as tests/interop/rocketmq_driver.py drives the C++ client. Run it in a child
 * process with its own HOME (test_alions_client.py does): the client's log goes to
 * $HOME/ali-ons.log. Only ali-ons's public API is used (Producer, Consumer, Message), so what
 * happens is what any user of the client would see; the one addition is an observer of the
 * broker's error answers (below), which records them and changes nothing.
 *
 *     node driver.js '{"action": "produce", "namesrv": "127.0.0.1:9876", ...}'
 *
 * Commands (a JSON object on argv[2]):
 *
 * produce: namesrv, topic, group, count, optional prefix (bodies are `<prefix>-<i>`, each also
 * its message's key), tags (default TagA), credentials ([accessKeyId, accessKeySecret]: the
 * client signs every request; also for consume), send_timeout_ms (default 3000), retries
 * (retryTimesWhenSendFailed, default 2). Prints one line per acknowledged message:
 * {"event": "sent", "body", "msg_id", "offset", "queue_id", "status"}, or
 * {"event": "send_failed", "body", "error"} for a send the client gave up on.
 *
 * consume: namesrv, topic, group, count, timeout_s, optional expression (tags), consume_from
 * (ali-ons's consumeFromWhere; its default is CONSUME_FROM_LAST_OFFSET), fail_once (bodies
 * whose first delivery the listener answers Consumer.ACTION_RETRY: the client sends them back
 * for a later retry). Prints one line per message its push consumer hands the listener:
 * {"event": "received", "topic", "queue_id", "queue_offset", "body", "msg_id", "origin_msg_id",
 * "reconsume_times", "tags", "keys"} ("rejected" for a first delivery failed on purpose) until
 * count lines or timeout_s.
 *
 * Both print {"event": "response_error", "request_code", "code", "remark"} for every error
 * answer of a NameServer or broker the client reads, and {"event": "client_error", "error"} for
 * what the client emits as 'error'; they end with {"event": "done", ...} (after
 * {"event": "close_failed", "error"} if close() failed, e.g. UNREGISTER_CLIENT refused) and exit
 * 0, or print {"event": "error", "error"} and exit 1.
 */

const fs = require('fs');
const path = require('path');
const util = require('util');
const { Producer, Consumer, Message } = require('ali-ons');
const MQClientAPI = require('ali-ons/lib/mq_client_api');

const CLOSE_MS = 5000;
const SETTLE_MS = 200;

function emit(event, fields) {
  process.stdout.write(JSON.stringify(Object.assign({ event }, fields)) + '\n');
}

// The client's log (ali-ons logs through options.logger): $HOME/ali-ons.log.
const logFile = path.join(process.env.HOME || '.', 'ali-ons.log');
function logLine(level, args) {
  const text = args.map(a => (a instanceof Error ? a.stack : a));
  fs.appendFileSync(logFile, `${new Date().toISOString()} ${level} ${util.format(...text)}\n`);
}
const logger = {
  debug() {},
  info(...args) { logLine('INFO', args); },
  warn(...args) { logLine('WARN', args); },
  error(...args) { logLine('ERROR', args); },
};

// Every error answer (a response code ali-ons does not handle itself) goes through this one
// method, which throws an MQClientException; observe it, then let it throw as before. The
// producer swallows a NO_PERMISSION refusal into "Send [n] times, still failed", so this is
// where the broker's code and remark can be seen.
const defaultHandler = MQClientAPI.prototype._defaultHandler;
MQClientAPI.prototype._defaultHandler = function(request, response) {
  emit('response_error', { request_code: request.code, code: response.code, remark: response.remark });
  return defaultHandler.call(this, request, response);
};

function clientOptions(command) {
  const options = {
    nameSrv: command.namesrv,
    // ali-ons asserts an httpclient (urllib in its README); it is used only to look up the
    // NameServers from onsAddr, never when nameSrv is given.
    httpclient: {
      request() {
        throw new Error('no HTTP: nameSrv is given');
      },
    },
    logger,
    instanceName: `driver-${process.pid}`,
  };
  if (command.credentials) {
    options.accessKeyId = command.credentials[0];
    options.accessKeySecret = command.credentials[1];
  }
  return options;
}

function withTimeout(promise, ms) {
  return Promise.race([ promise, new Promise(resolve => setTimeout(resolve, ms)) ]);
}

// close() given CLOSE_MS; its failure (e.g. UNREGISTER_CLIENT refused on an ACL cluster) is an
// event, not the run's error.
async function close(client) {
  try {
    await withTimeout(client.close(), CLOSE_MS);
  } catch (err) {
    emit('close_failed', { error: errorText(err) });
  }
}

function errorText(err) {
  return `${err.name}: ${err.message}`;
}

async function produce(command) {
  const count = Number(command.count);
  const prefix = command.prefix || 'm';
  const producer = new Producer(Object.assign(clientOptions(command), {
    producerGroup: command.group,
    sendMsgTimeout: Number(command.send_timeout_ms || 3000),
    retryTimesWhenSendFailed: Number(command.retries === undefined ? 2 : command.retries),
  }));
  producer.on('error', err => emit('client_error', { error: errorText(err) }));
  let acked = 0;
  try {
    await producer.ready();
    for (let i = 0; i < count; i++) {
      const body = `${prefix}-${i}`;
      const msg = new Message(command.topic, command.tags || 'TagA', body);
      msg.keys = [ body ];
      try {
        const result = await producer.send(msg);
        emit('sent', {
          body,
          msg_id: result.msgId,
          offset: result.queueOffset,
          queue_id: Number(result.messageQueue.queueId),
          status: result.sendStatus,
        });
        acked++;
      } catch (err) {
        emit('send_failed', { body, error: errorText(err) });
      }
    }
  } finally {
    await close(producer);
  }
  emit('done', { acked });
}

function text(value) {
  if (value === null || value === undefined) {
    return null;
  }
  return Buffer.isBuffer(value) ? value.toString('utf8') : String(value);
}

async function consume(command) {
  const count = Number(command.count);
  const options = Object.assign(clientOptions(command), { consumerGroup: command.group });
  if (command.consume_from) {
    options.consumeFromWhere = command.consume_from;
  }
  const consumer = new Consumer(options);
  consumer.on('error', err => emit('client_error', { error: errorText(err) }));
  let received = 0;
  let enough;
  const done = new Promise(resolve => { enough = resolve; });
  const failOnce = new Set(command.fail_once || []);
  const failed = new Set();
  consumer.subscribe(command.topic, command.expression || '*', async msg => {
    const fields = {
      topic: msg.topic,
      queue_id: msg.queueId,
      queue_offset: msg.queueOffset,
      body: text(msg.body),
      msg_id: msg.msgId,
      origin_msg_id: msg.originMessageId || null,
      reconsume_times: msg.reconsumeTimes,
      tags: text(msg.tags),
      keys: text(msg.keys),
    };
    if (failOnce.has(fields.body) && !failed.has(fields.body)) {
      failed.add(fields.body);
      emit('rejected', fields);
      return Consumer.ACTION_RETRY;
    }
    received++;
    emit('received', fields);
    if (received >= count) {
      enough();
    }
  });
  try {
    await withTimeout(done, Number(command.timeout_s || 20) * 1000);
    // The client records a message's offset after the listener returns: give it that moment,
    // or close() commits the offsets without the last one.
    await new Promise(resolve => setTimeout(resolve, SETTLE_MS));
  } finally {
    await close(consumer);
  }
  emit('done', { received });
}

async function main() {
  const command = JSON.parse(process.argv[2]);
  if (command.action === 'produce') {
    return produce(command);
  }
  if (command.action === 'consume') {
    return consume(command);
  }
  throw new Error(`unknown action ${command.action}`);
}

main().then(
  () => process.exit(0),
  err => {
    emit('error', { error: errorText(err), trace: err.stack });
    process.exit(1);
  }
);
