// Node's rhea against the broker over AMQP 1.0: send with outcomes, receive with explicit
// accept and release, a data section for a 0-9-1 consumer. Prints one JSON object.
// usage: node rhea_patterns.js HOST PORT QUEUE QUEUE_FOR_PIKA
const rhea = require("rhea");
const [host, port, queue, pikaQueue] = process.argv.slice(2);
const out = { accepted: 0, released: 0, received: [], redelivered: [], properties: [], toPika: null, error: null };
const { conn, finish } = require("./connect").connect("rhea-e2e", host, port, out);
conn.on("disconnected", (ctx) => { if (!out.error && out.toPika === null) { out.error = "disconnected"; finish(); } });

const sender = conn.open_sender(`/queues/${queue}`);
let sent = 0;
sender.on("sendable", () => {
  while (sender.sendable() && sent < 3) {
    sender.send({ body: `m${sent}`, subject: "s", message_id: `id-${sent}`, durable: true,
                  application_properties: { i: sent } });
    sent += 1;
  }
});
sender.on("accepted", () => {
  out.accepted += 1;
  if (out.accepted === 3) receive();
});

function receive() {
  const receiver = conn.open_receiver({ source: `/queues/${queue}`, autoaccept: false, credit_window: 10 });
  let releasedOnce = false;
  receiver.on("message", (ctx) => {
    const m = ctx.message;
    if (m.body === "m2" && !releasedOnce) {
      releasedOnce = true;
      out.released += 1;
      ctx.delivery.release({ delivery_failed: false });
      return;
    }
    out.received.push(m.body);
    out.redelivered.push(!m.first_acquirer);
    out.properties.push({ subject: m.subject, id: m.message_id, i: m.application_properties && m.application_properties.i,
                          durable: m.durable });
    ctx.delivery.accept();
    if (out.received.length === 3) toPika();
  });
}

function toPika() {
  const s = conn.open_sender(`/queues/${pikaQueue}`);
  let done = false;
  s.on("sendable", () => {
    if (done) return;
    done = true;
    s.send({ body: rhea.message.data_section(Buffer.from("rhea data")), content_type: "text/plain" });
  });
  s.on("accepted", () => { out.toPika = "accepted"; finish(); });
}
