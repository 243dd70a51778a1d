// rhea's selector pattern (its examples' "selector": a receiver with filters.selector, a sender
// of coloured messages) against a stream, then a selector that does not parse. Prints one JSON
// object: the bodies received, the filter names the attach answer kept, the refusal's condition.
// usage: node rhea_selector.js HOST PORT STREAM
const rhea = require("rhea");
const [host, port, stream] = process.argv.slice(2);
const out = { received: [], inPlace: null, refused: null, error: null };
const colours = ["red", "green", "blue", "red", "green", "red"];
const timer = setTimeout(() => { out.error = "timed out after 25 s"; finish(); }, 25000);
const container = rhea.create_container({ id: "rhea-selector-e2e" });
const conn = container.connect({ host, port: Number(port), username: "guest", password: "guest", reconnect: false,
                                 hostname: "vhost:/" });

function finish() {
  clearTimeout(timer);
  console.log(JSON.stringify(out));
  try { conn.close(); } catch (e) { /* closing anyway */ }
  setTimeout(() => process.exit(0), 200);
}

conn.on("connection_error", (ctx) => { out.error = String(ctx.connection.error && ctx.connection.error.description); finish(); });

const receiver = conn.open_receiver({ source: { address: `/queues/${stream}`,
                                                filter: rhea.filter.selector("colour = 'red'") } });
receiver.on("receiver_open", (ctx) => {
  const filter = ctx.receiver.remote.attach.source.filter;
  out.inPlace = filter ? Object.keys(filter) : [];
  send();  // a stream receiver reads from the next message on (RabbitMQ's default offset)
});
receiver.on("message", (ctx) => {
  out.received.push(ctx.message.body);
  if (out.received.length === 3) refusedSelector();
});

function send() {
  const sender = conn.open_sender(`/queues/${stream}`);
  let sent = 0;
  sender.on("sendable", () => {
    while (sender.sendable() && sent < colours.length) {
      sender.send({ body: `${colours[sent]}-${sent}`, application_properties: { colour: colours[sent] } });
      sent += 1;
    }
  });
}

function refusedSelector() {
  const bad = conn.open_receiver({ source: { address: `/queues/${stream}`,
                                             filter: rhea.filter.selector("colour = ") } });
  bad.on("receiver_error", (ctx) => {
    out.refused = ctx.receiver.error && ctx.receiver.error.condition;
    finish();
  });
  bad.on("receiver_open", () => { out.refused = "attached"; finish(); });
}
