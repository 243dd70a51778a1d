// amqplib's callback API against the broker at argv[2] (tests/e2e/test_node_amqplib.py).
// 1. issue 12 point 1: sendToQueue until it returns false, then connection.close(cb): the
//    publishes still buffered go out behind the close, and the callback must fire, no EPIPE.
// 2. publish, consume with acks, cancel, check the queue is empty, delete it, close.
// Prints one JSON object with what happened; the pytest test makes the assertions.
'use strict';
const amqp = require('amqplib/callback_api');

const [url, suffix] = process.argv.slice(2);
const out = { errors: [] };
const deadline = setTimeout(() => { out.timed_out = true; finish(); }, 25000);

function finish() {
  clearTimeout(deadline);
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(0);
}

function fail(where) {
  return (err) => { out.errors.push(`${where}: ${err && err.message}`); finish(); };
}

function floodThenClose(next) {
  amqp.connect(url, (err, conn) => {
    if (err) return fail('flood connect')(err);
    conn.on('error', (e) => out.errors.push(`flood connection error event: ${e.message}`));
    conn.createChannel((err, ch) => {
      if (err) return fail('flood channel')(err);
      ch.on('error', (e) => out.errors.push(`flood channel error event: ${e.message}`));
      ch.assertQueue('', { exclusive: true }, (err, ok) => {
        if (err) return fail('flood assertQueue')(err);
        const body = Buffer.alloc(1024, 120);
        let sent = 0;
        while (ch.sendToQueue(ok.queue, body) && sent < 1000000) sent++;
        out.flood_sent = sent + 1;
        const started = Date.now();
        conn.close((err) => {
          out.flood_close_callback = true;
          out.flood_close_error = err ? err.message : null;
          out.flood_close_ms = Date.now() - started;
          next();
        });
      });
    });
  });
}

function publishConsumeAck(next) {
  const queue = `node-cb-${suffix}`;
  amqp.connect(url, (err, conn) => {
    if (err) return fail('basic connect')(err);
    conn.on('error', (e) => out.errors.push(`basic connection error event: ${e.message}`));
    conn.createChannel((err, ch) => {
      if (err) return fail('basic channel')(err);
      ch.assertQueue(queue, { durable: false }, (err) => {
        if (err) return fail('basic assertQueue')(err);
        for (let i = 0; i < 10; i++) {
          ch.sendToQueue(queue, Buffer.from(`m${i}`), { contentType: 'text/plain', headers: { n: i } });
        }
        const got = [];
        ch.consume(queue, (msg) => {
          got.push({ body: msg.content.toString(), n: msg.properties.headers.n,
                     type: msg.properties.contentType });
          ch.ack(msg);
          if (got.length === 10) {
            ch.cancel(msg.fields.consumerTag, (err) => {
              if (err) return fail('basic cancel')(err);
              ch.checkQueue(queue, (err, ok) => {
                if (err) return fail('basic checkQueue')(err);
                out.basic_received = got;
                out.basic_left = ok.messageCount;
                ch.deleteQueue(queue, {}, (err) => {
                  if (err) return fail('basic deleteQueue')(err);
                  ch.close((err) => {
                    if (err) return fail('basic channel close')(err);
                    conn.close((err) => {
                      out.basic_closed = !err;
                      next();
                    });
                  });
                });
              });
            });
          }
        }, { noAck: false }, (err) => { if (err) fail('basic consume')(err); });
      });
    });
  });
}

floodThenClose(() => publishConsumeAck(finish));
