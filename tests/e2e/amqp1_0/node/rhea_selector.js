// rhea's selector pattern (its examples' "selector": a receiver with filters.selector, a sender
// of coloured messages) against a stream, then a selector that does not parse. Prints one JSON
// object: the bodies received, the filter names the attach answer kept, the refusal's condition.
// usage: node rhea_selector.js HOST PORT STREAM
const rhea = require("rhea");
const [host, port, stream] = process.argv.slice(2);
const out = { received: [], inPlace: null, refused: null, error: null };
const colours = ["red", "green", "blue", "red", "green", "red"];
const { conn, finish } = require("./connect").connect("rhea-selector-e2e", host, port, out);

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
