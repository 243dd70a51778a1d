// What every rhea script here starts with: a connection to the broker under test as guest on
// vhost "/", a time-out, and finish(), which prints the script's one JSON object and exits.
const rhea = require("rhea");

function connect(containerId, host, port, out) {
  const timer = setTimeout(() => { out.error = "timed out after 25 s"; finish(); }, 25000);
  const container = rhea.create_container({ id: containerId });
  const conn = container.connect({ host, port: Number(port), username: "guest", password: "guest", reconnect: false,
                                   hostname: "vhost:/" });

  function finish() {
    clearTimeout(timer);
    console.log(JSON.stringify(out));
    try { conn.close(); } catch (e) { /* closing anyway */ }
    setTimeout(() => process.exit(0), 200);
  }

  conn.on("connection_error", (ctx) => { out.error = String(ctx.connection.error && ctx.connection.error.description); finish(); });
  return { rhea, conn, finish };
}

module.exports = { connect };
