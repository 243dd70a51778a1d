// amqplib's promise API against the broker at argv[2] (tests/e2e/test_node_amqplib.py).
// 1. issue 12 point 1 again: sendToQueue until false, then await connection.close().
// 2. publish/consume/ack; 3. a confirm channel; 4. prefetch; 5. channel and connection close.
// Prints one JSON object with what happened; the pytest test makes the assertions.
'use strict';
const amqp = require('amqplib');

const [url, suffix] = process.argv.slice(2);
const out = { errors: [] };
const deadline = setTimeout(() => { out.timed_out = true; finish(); }, 25000);

function finish() {
  clearTimeout(deadline);
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(0);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(condition, ms) {
  const end = Date.now() + ms;
  while (!condition() && Date.now() < end) await sleep(10);
  return condition();
}

async function floodThenClose() {
  const conn = await amqp.connect(url);
  conn.on('error', (e) => out.errors.push(`flood connection error event: ${e.message}`));
  const ch = await conn.createChannel();
  const { queue } = await ch.assertQueue('', { exclusive: true });
  const body = Buffer.alloc(1024, 120);
  let sent = 0;
  while (ch.sendToQueue(queue, body) && sent < 1000000) sent++;
  out.flood_sent = sent + 1;
  const started = Date.now();
  await conn.close();
  out.flood_close_ms = Date.now() - started;
}

async function main() {
  await floodThenClose();

  const conn = await amqp.connect(url);
  conn.on('error', (e) => out.errors.push(`connection error event: ${e.message}`));
  let connectionClosed = false;
  conn.on('close', () => { connectionClosed = true; });

  // publish, consume, ack
  const ch = await conn.createChannel();
  const queue = `node-promise-${suffix}`;
  await ch.assertQueue(queue, { durable: false });
  for (let i = 0; i < 5; i++) ch.sendToQueue(queue, Buffer.from(`p${i}`), { persistent: i % 2 === 0 });
  const got = [];
  const { consumerTag } = await ch.consume(queue, (msg) => {
    got.push({ body: msg.content.toString(), mode: msg.properties.deliveryMode });
    ch.ack(msg);
  });
  await until(() => got.length === 5, 5000);
  await ch.cancel(consumerTag);
  out.consumed = got;
  out.left = (await ch.checkQueue(queue)).messageCount;

  // a confirm channel: every publish's callback and waitForConfirms
  const cch = await conn.createConfirmChannel();
  let acked = 0;
  for (let i = 0; i < 50; i++) {
    cch.sendToQueue(queue, Buffer.from(`c${i}`), {}, (err) => { if (!err) acked++; });
  }
  await cch.waitForConfirms();
  out.confirm_acked = acked;
  out.confirm_queued = (await cch.checkQueue(queue)).messageCount;
  await cch.purgeQueue(queue);
  await cch.close();

  // prefetch 2: two unacked deliveries at a time
  await ch.prefetch(2);
  for (let i = 0; i < 6; i++) ch.sendToQueue(queue, Buffer.from(`q${i}`));
  const held = [];
  await ch.consume(queue, (msg) => held.push(msg));
  await until(() => held.length >= 2, 5000);
  await sleep(300);  // time for a third delivery, were prefetch ignored
  out.prefetch_first = held.length;
  ch.ack(held[0]);
  await until(() => held.length >= 3, 5000);
  await sleep(300);
  out.prefetch_after_one_ack = held.length;
  const end = Date.now() + 5000;
  while (held.length < 6 && Date.now() < end) {  // two more per round of acks
    ch.ackAll();
    const before = held.length;
    await until(() => held.length > before, 1000);
  }
  out.prefetch_total = held.length;
  ch.ackAll();

  // close: a channel, then the connection
  await ch.deleteQueue(queue);
  await ch.close();
  await conn.close();
  out.connection_close_event = await until(() => connectionClosed, 2000);
}

main().then(finish, (err) => { out.errors.push(`promise API: ${err && err.stack}`); finish(); });
