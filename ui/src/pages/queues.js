// Queues and streams: the paged list (filter, sort and paging done by the API, so 10,000 queues
// cost one page of rows), declare, and the detail page: charts, consumers, bindings, publish,
// get, move, purge, delete.
import { useMemo, useRef, useState } from 'preact/hooks';
import { html, enc, fmtBytes, fmtNum, fmtRate, fmtTime, rate } from '../util.js';
import { api } from '../api.js';
import { useAction, useApi, useApp } from '../state.js';
import { Chart, HISTORY_QUERY, QUEUED_SERIES, queuedSources, queuedValues, record, seed } from '../chart.js';
import {
  ArgsEditor, ErrorBox, Facts, Field, KeyValues, ListControls, Loading, Section, Table, VhostSelect, argsObject, listQuery,
  sorter, useForm,
} from '../components.js';
import { BindForm, BindingsTable, FeatureTags, PublishForm, queueHref } from './exchanges.js';

// only the fields the list shows: a page of 500 queues stays small
const LIST_COLUMNS = ['name', 'vhost', 'type', 'state', 'durable', 'auto_delete', 'exclusive', 'arguments', 'policy', 'consumers',
  'messages', 'messages_ready', 'messages_unacknowledged', 'message_stats.publish_details', 'message_stats.deliver_get_details',
  'message_stats.ack_details'].join(',');

export function Queues({ route }) {
  const { vhost } = useApp();
  const list = useApi(`${vhost ? `/queues/${enc(vhost)}` : '/queues'}?${listQuery(route)}&columns=${LIST_COLUMNS}`);
  const q = route.query;
  const columns = [
    { key: 'vhost', label: 'Virtual host', sort: 'vhost' },
    { key: 'name', label: 'Name', sort: 'name', render: (x) => html`<a href=${queueHref(x.vhost, x.name)}>${x.name}</a>` },
    { key: 'type', label: 'Type', sort: 'type' },
    { key: 'features', label: 'Features', render: (x) => html`<${FeatureTags} o=${x} />${x.policy ? html` <span class="tag policy" title="policy">${x.policy}</span>` : ''}` },
    { key: 'state', label: 'State', sort: 'state', render: (x) => html`<span class=${`state ${x.state}`}>${x.state}</span>` },
    { key: 'consumers', label: 'Consumers', sort: 'consumers', cls: 'num' },
    { key: 'ready', label: 'Ready', sort: 'messages_ready', cls: 'num', render: (x) => fmtNum(x.messages_ready) },
    { key: 'unacked', label: 'Unacked', sort: 'messages_unacknowledged', cls: 'num', render: (x) => fmtNum(x.messages_unacknowledged) },
    { key: 'total', label: 'Total', sort: 'messages', cls: 'num', render: (x) => fmtNum(x.messages) },
    { key: 'in', label: 'Incoming', sort: 'message_stats.publish_details.rate', cls: 'num', render: (x) => fmtRate(rate(x, 'publish') || 0) },
    { key: 'out', label: 'Deliver / get', sort: 'message_stats.deliver_get_details.rate', cls: 'num', render: (x) => fmtRate(rate(x, 'deliver_get') || 0) },
    { key: 'ack', label: 'Ack', sort: 'message_stats.ack_details.rate', cls: 'num', render: (x) => fmtRate(rate(x, 'ack') || 0) },
  ];
  return html`
    <h1 tabindex="-1">Queues and Streams</h1>
    <${ListControls} route=${route} paged=${list.data} label="queues" />
    <${ErrorBox} error=${list.error} />
    ${list.data ? html`<${Table} caption="Queues" columns=${columns} rows=${list.data.items} rowKey=${(x) => x.vhost + '/' + x.name}
      sort=${q.sort || 'name'} reverse=${q.rev === 'true'} onSort=${sorter(route)} empty="No queues match." />` : html`<${Loading} />`}
    <${AddQueue} onDone=${list.reload} />`;
}

const QUEUE_ARGS = [['x-message-ttl', 'number'], ['x-expires', 'number'], ['x-max-length', 'number'], ['x-max-length-bytes', 'number'],
  ['x-overflow', 'string'], ['x-dead-letter-exchange', 'string'], ['x-dead-letter-routing-key', 'string'],
  ['x-single-active-consumer', 'boolean'], ['x-max-priority', 'number'], ['x-queue-mode', 'string'],
  ['x-delivery-limit', 'number'], ['x-max-age', 'string'], ['x-stream-max-segment-size-bytes', 'number']];

function AddQueue({ onDone }) {
  const app = useApp();
  const [f, set, reset] = useForm({ vhost: app.vhost || app.vhosts[0] || '/', type: 'classic', name: '', durable: 'true', auto_delete: 'false' });
  const [args, setArgs] = useState([]);
  const [run, busy] = useAction();
  const submit = async (e) => {
    e.preventDefault();
    const a = argsObject(args);
    if (f.type !== 'classic') a['x-queue-type'] = f.type;
    const ok = await run(() => api.put(`/queues/${enc(f.vhost)}/${enc(f.name)}`, {
      durable: f.type !== 'classic' || f.durable === 'true', auto_delete: f.type === 'classic' && f.auto_delete === 'true', arguments: a,
    }), `Queue ${f.name} declared`);
    if (ok) { reset(); setArgs([]); onDone(); }
  };
  return html`
    <${Section} title="Add a new queue" open=${false} id="add-queue">
      <form onSubmit=${submit} class="grid-form">
        <${VhostSelect} value=${f.vhost} onInput=${set('vhost')} />
        <${Field} label="Type" name="type" as="select" value=${f.type} onInput=${set('type')}
          options=${[['classic', 'Classic'], ['quorum', 'Quorum'], ['stream', 'Stream']]} />
        <${Field} label="Name" name="name" value=${f.name} onInput=${set('name')} required />
        ${f.type === 'classic' ? html`
          <${Field} label="Durability" name="durable" as="select" value=${f.durable} onInput=${set('durable')} options=${[['true', 'Durable'], ['false', 'Transient']]} />
          <${Field} label="Auto delete" name="auto_delete" as="select" value=${f.auto_delete} onInput=${set('auto_delete')} options=${[['false', 'No'], ['true', 'Yes']]} />` : null}
        <${ArgsEditor} label="Arguments" rows=${args} setRows=${setArgs} suggestions=${QUEUE_ARGS} />
        <div class="form-actions"><button type="submit" disabled=${busy}>Add queue</button></div>
      </form>
    <//>`;
}

const ACKMODES = [['ack_requeue_true', 'Nack message requeue true'], ['ack_requeue_false', 'Automatic ack'],
  ['reject_requeue_true', 'Reject requeue true'], ['reject_requeue_false', 'Reject requeue false']];

function GetMessages({ vhost, name, onDone }) {
  const [f, set] = useForm({ ackmode: 'ack_requeue_true', encoding: 'auto', count: '1', truncate: '50000' });
  const [messages, setMessages] = useState(null);
  const [run, busy] = useAction();
  const submit = async (e) => {
    e.preventDefault();
    const out = await run(() => api.post(`/queues/${enc(vhost)}/${enc(name)}/get`, {
      count: Number(f.count), ackmode: f.ackmode, encoding: f.encoding, truncate: Number(f.truncate),
    }));
    if (out) { setMessages(out); onDone(); }
  };
  return html`
    <form onSubmit=${submit} class="grid-form" aria-label="Get messages">
      <${Field} label="Ack mode" name="ackmode" as="select" value=${f.ackmode} onInput=${set('ackmode')} options=${ACKMODES} />
      <${Field} label="Encoding" name="encoding" as="select" value=${f.encoding} onInput=${set('encoding')}
        options=${[['auto', 'Auto string / base64'], ['base64', 'Base64']]} />
      <${Field} label="Messages" name="count" as="number" min="1" value=${f.count} onInput=${set('count')} required />
      <${Field} label="Truncate payload at (bytes)" name="truncate" as="number" min="0" value=${f.truncate} onInput=${set('truncate')} />
      <div class="form-actions"><button type="submit" disabled=${busy}>Get message(s)</button></div>
    </form>
    ${messages ? html`<div class="messages" role="region" aria-label="Messages got" aria-live="polite">
      ${messages.length === 0 ? html`<p class="muted">Queue is empty.</p>` : messages.map((m, i) => html`
        <article class="message" key=${i}>
          <h3>Message ${i + 1}</h3>
          <p class="muted">The server reported ${fmtNum(m.message_count)} messages remaining.</p>
          <${Facts} items=${[['Exchange', m.exchange === '' ? '(AMQP default)' : m.exchange], ['Routing key', m.routing_key],
            ['Redelivered', m.redelivered ? 'yes' : 'no'], ['Properties', html`<${KeyValues} obj=${m.properties} />`],
            ['Payload', `${fmtNum(m.payload_bytes)} bytes, encoding: ${m.payload_encoding}`]]} />
          <pre class="payload">${m.payload}</pre>
        </article>`)}
    </div>` : null}`;
}

// Move, two ways. By default as RabbitMQ's UI does it: a dynamic shovel "Move from <queue>"
// (server-side, acks the source only once the destination confirmed, deletes itself after the
// messages the queue held, or after N); the page only watches it. Or from the page itself, for a
// broker whose shovel cannot log in locally: take up to BATCH with automatic ack, publish each to
// the destination through the default exchange (same properties and payload, base64 so binary
// survives), and put a message the destination does not take back into the source. Not atomic:
// a tab closed mid-batch loses that batch.
const BATCH = 20;
const SHOVEL_WATCH_S = 600;

async function moveByShovel(vhost, name, dest, limit, report) {
  const shovel = `Move from ${name}`;
  const param = `/parameters/shovel/${enc(vhost)}/${enc(shovel)}`;
  const uri = `amqp:///${enc(vhost)}`;
  await api.put(param, { component: 'shovel', vhost, name: shovel, value: {
    'src-uri': uri, 'src-queue': name, 'src-protocol': 'amqp091', 'src-prefetch-count': 1000,
    'src-delete-after': limit === Infinity ? 'queue-length' : limit,
    'dest-uri': uri, 'dest-queue': dest, 'dest-protocol': 'amqp091', 'dest-add-forward-headers': false, 'ack-mode': 'on-confirm',
  } });
  report(`Shovel "${shovel}" started…`);
  const deadline = Date.now() + SHOVEL_WATCH_S * 1000;
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 1000));
    try {
      await api.get(param);
    } catch (err) {
      if (err.status === 404) return `Shovel "${shovel}" finished: messages moved to ${dest}.`; // it deletes itself when done
      throw err;
    }
    const states = await api.get(`/shovels/${enc(vhost)}`).catch(() => []);
    const mine = states.find((x) => x.name === shovel);
    if (mine && mine.state === 'terminated') {
      throw new Error(`shovel "${shovel}" stopped: ${mine.reason || 'no reason given'} (its parameter is kept: Admin, or DELETE ${param})`);
    }
    report(`Shovel "${shovel}" ${mine ? mine.state : 'starting'}…`);
  }
  return `Shovel "${shovel}" still running after ${SHOVEL_WATCH_S} s; it goes on in the broker.`;
}

async function moveFromPage(vhost, name, dest, limit, report, stop) {
  let moved = 0;
  try {
    while (moved < limit && !stop.current) {
      const batch = await api.post(`/queues/${enc(vhost)}/${enc(name)}/get`,
        { count: Math.min(BATCH, limit - moved), ackmode: 'ack_requeue_false', encoding: 'base64' });
      if (!batch.length) break;
      for (const m of batch) {
        const body = { payload: m.payload, payload_encoding: 'base64', properties: m.properties };
        const out = await api.post(`/exchanges/${enc(vhost)}/amq.default/publish`, { ...body, routing_key: dest });
        if (!out.routed) {
          await api.post(`/exchanges/${enc(vhost)}/amq.default/publish`, { ...body, routing_key: name });
          throw new Error(`${dest} did not take a message (a length limit?); it was put back into ${name}`);
        }
        moved++;
      }
      report(`Moving… ${fmtNum(moved)} moved.`);
    }
  } catch (err) {
    throw new Error(`Moved ${fmtNum(moved)} message(s), then: ${err.message}`);
  }
  return `Moved ${fmtNum(moved)} message(s) to ${dest}.`;
}

function MoveMessages({ vhost, name, onDone }) {
  const [f, set] = useForm({ destination: '', count: '', method: 'shovel' });
  const [progress, setProgress] = useState(null);
  const stop = useRef(false);
  const { notify } = useApp();
  const submit = async (e) => {
    e.preventDefault();
    const dest = f.destination;
    if (dest === name) { notify('error', 'The destination is this queue.'); return; }
    try {
      await api.get(`/queues/${enc(vhost)}/${enc(dest)}`);
    } catch (err) {
      notify('error', err.status === 404 ? `No queue ${dest} in virtual host ${vhost}.` : err.message);
      return;
    }
    const limit = f.count === '' ? Infinity : Number(f.count);
    stop.current = false;
    const report = (text) => setProgress({ text, running: true });
    report('Starting…');
    try {
      const done = f.method === 'shovel' ? await moveByShovel(vhost, name, dest, limit, report)
        : await moveFromPage(vhost, name, dest, limit, report, stop);
      notify('ok', done);
      setProgress({ text: done, running: false });
    } catch (err) {
      notify('error', err.message);
      setProgress({ text: err.message, running: false });
    }
    onDone();
  };
  return html`
    <form onSubmit=${submit} class="grid-form" aria-label="Move messages">
      <${Field} label="Destination queue" name="destination" value=${f.destination} onInput=${set('destination')} required
        hint=${`A queue of virtual host ${vhost}`} />
      <${Field} label="How many (empty: all)" name="count" as="number" min="1" value=${f.count} onInput=${set('count')}
        hint="Empty: the messages the queue holds now" />
      <${Field} label="Moved by" name="method" as="select" value=${f.method} onInput=${set('method')}
        options=${[['shovel', 'A shovel in the broker (acks after confirms)'], ['page', `This page (batches of ${BATCH}; keep it open)`]]} />
      <div class="form-actions">
        <button type="submit" disabled=${progress && progress.running}>Move messages</button>
        ${progress && progress.running && f.method === 'page' ? html`<button type="button" onClick=${() => { stop.current = true; }}>Stop</button>` : null}
      </div>
    </form>
    ${progress ? html`<p role="status">${progress.text}</p>` : null}`;
}

function Consumers({ q }) {
  const rows = q.consumer_details || [];
  return html`<${Table} caption="Consumers" rows=${rows} rowKey=${(c) => c.channel_details.name + c.consumer_tag} empty="No consumers."
    columns=${[
      { key: 'channel', label: 'Channel', render: (c) => html`<a href=${`#/channels/${enc(c.channel_details.name)}`}>${c.channel_details.name}</a>` },
      { key: 'consumer_tag', label: 'Consumer tag' },
      { key: 'ack', label: 'Ack required', render: (c) => (c.ack_required ? '●' : '○') },
      { key: 'exclusive', label: 'Exclusive', render: (c) => (c.exclusive ? '●' : '○') },
      { key: 'prefetch_count', label: 'Prefetch', cls: 'num' },
      { key: 'active', label: 'Active', render: (c) => (c.active ? '●' : '○') },
      { key: 'activity_status', label: 'Activity status' },
      { key: 'arguments', label: 'Arguments', render: (c) => html`<${KeyValues} obj=${c.arguments} />` },
    ]} />`;
}

export function QueueDetail({ vhost, name }) {
  const { navigate } = useApp();
  const path = `/queues/${enc(vhost)}/${enc(name)}`;
  const qa = useApi(path);
  const bindings = useApi(`${path}/bindings`);
  const [del, setDel] = useForm({ if_unused: false, if_empty: false });
  const [run, busy] = useAction();
  const q = qa.data;
  // the broker's samples of the last ten minutes, once (it keeps them from the first question on)
  const past = useApi(`${path}?${HISTORY_QUERY}&columns=message_stats,messages_details,messages_ready_details,`
    + 'messages_unacknowledged_details', { refresh: false });
  const seeded = useMemo(() => {
    if (!past.data) return null;
    const ms = past.data.message_stats || {};
    const d = (k) => [ms[`${k}_details`], true];
    return seed(`q:${vhost}/${name}`, { ...queuedSources(past.data), publish: [d('publish')],
      deliver: [d('deliver_get')], ack: [d('ack')], redeliver: [d('redeliver')] });
  }, [past.data]);
  const hist = useMemo(() => q && record(`q:${vhost}/${name}`, {
    ...queuedValues(q), publish: rate(q, 'publish') || 0, deliver: rate(q, 'deliver_get') || 0,
    ack: rate(q, 'ack') || 0, redeliver: rate(q, 'redeliver') || 0,
  }), [q, seeded]);
  const purge = async (e) => {
    e.preventDefault();
    if (!confirm(`Purge all ready messages of ${name}?`)) return;
    if (await run(() => api.del(`${path}/contents`), `Queue ${name} purged`)) qa.reload();
  };
  const remove = async (e) => {
    e.preventDefault();
    if (!confirm(`Delete queue ${name}?`)) return;
    const opts = [del.if_unused && 'if-unused=true', del.if_empty && 'if-empty=true'].filter(Boolean).join('&');
    if (await run(() => api.del(path + (opts ? '?' + opts : '')), `Queue ${name} deleted`)) navigate('#/queues');
  };
  const reload = () => { qa.reload(); bindings.reload(); };
  const stream = q && q.type === 'stream';
  return html`
    <h1 tabindex="-1"><span class="kind">${stream ? 'Stream' : 'Queue'}</span> ${name} <span class="muted small">in virtual host ${vhost}</span></h1>
    <${ErrorBox} error=${qa.error} />
    ${!q ? (qa.error ? null : html`<${Loading} />`) : html`
      <div class="charts">
        <${Chart} title="Queued messages" hist=${hist} series=${QUEUED_SERIES} kind="count" />
        <${Chart} title="Message rates" hist=${hist} kind="rate" series=${[
          { key: 'publish', label: 'Publish', color: '#2563eb' }, { key: 'deliver', label: 'Deliver / get', color: '#059669' },
          { key: 'ack', label: 'Consumer ack', color: '#d97706' }, { key: 'redeliver', label: 'Redelivered', color: '#dc2626' }]} />
      </div>
      <${Section} title="Details">
        <div class="facts-columns">
          <${Facts} items=${[['Type', q.type], ['Features', html`<${FeatureTags} o=${q} />`], ['Policy', q.policy || ''],
            ['State', q.state], ['Consumers', fmtNum(q.consumers)], ['Consumer capacity', `${Math.round((q.consumer_capacity ?? q.consumer_utilisation ?? 0) * 100)}%`],
            q.exclusive_consumer_tag ? ['Exclusive consumer', q.exclusive_consumer_tag] : null,
            q.single_active_consumer_tag ? ['Single active consumer', q.single_active_consumer_tag] : null]} />
          <${Facts} items=${[['Ready', fmtNum(q.messages_ready)], ['Unacked', fmtNum(q.messages_unacknowledged)], ['Total', fmtNum(q.messages)],
            // a stream's octets are its log's ("Bytes" below): the classic split is not in its JSON
            stream ? null : ['Message bytes', fmtBytes(q.message_bytes)],
            stream ? null : ['Paged out', `${fmtNum(q.messages_paged_out || 0)} (${fmtBytes(q.message_bytes_paged_out || 0)})`],
            ['Memory', fmtBytes(q.memory)]]} />
          ${stream ? html`<${Facts} items=${[['First offset', fmtNum(q.first_offset)], ['Last offset', fmtNum(q.last_offset)],
            ['Segments', fmtNum(q.segments)], ['Bytes', fmtBytes(q.bytes)], ['First message', fmtTime(q.first_timestamp)],
            ['Last message', fmtTime(q.last_timestamp)]]} />` : null}
        </div>
        <${Facts} items=${[['Arguments', html`<${KeyValues} obj=${q.arguments} />`],
          ['Effective policy definition', html`<${KeyValues} obj=${q.effective_policy_definition} />`]]} />
      <//>
      <${Section} title=${`Consumers (${(q.consumer_details || []).length})`}><${Consumers} q=${q} /><//>
      <${Section} title="Bindings">
        ${bindings.data ? html`<${BindingsTable} rows=${bindings.data} side="destination" onChange=${reload} />` : html`<${Loading} />`}
        <h3>Add binding to this queue</h3>
        <${BindForm} vhost=${vhost} name=${name} side="destination" onDone=${reload} />
      <//>
      <${Section} title="Publish message" open=${false} id="publish">
        <p class="hint">Published through the default exchange with routing key <code>${name}</code>.</p>
        <${PublishForm} vhost=${vhost} exchange="" routingKey=${name} />
      <//>
      ${stream ? html`<p class="muted">Streams are read by consumers with an offset (x-stream-offset); get, move and purge do not apply.</p>` : html`
        <${Section} title="Get messages" open=${false} id="get"><${GetMessages} vhost=${vhost} name=${name} onDone=${qa.reload} /><//>
        <${Section} title="Move messages" open=${false} id="move"><${MoveMessages} vhost=${vhost} name=${name} onDone=${qa.reload} /><//>
        <${Section} title="Purge" open=${false} id="purge">
          <form onSubmit=${purge} class="inline-form"><button type="submit" class="danger" disabled=${busy}>Purge messages</button></form>
        <//>`}
      <${Section} title=${stream ? 'Delete this stream' : 'Delete this queue'} open=${false} id="delete">
        <form onSubmit=${remove} class="inline-form">
          <${Field} label="Only if unused" name="if_unused" as="checkbox" value=${del.if_unused} onInput=${setDel('if_unused')} />
          <${Field} label="Only if empty" name="if_empty" as="checkbox" value=${del.if_empty} onInput=${setDel('if_empty')} />
          <button type="submit" class="danger" disabled=${busy}>Delete</button>
        </form>
      <//>`}`;
}
