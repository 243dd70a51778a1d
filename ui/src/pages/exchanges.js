// Exchanges: paged list, declare, detail with bindings both ways, bind/unbind, publish, delete.
import { useMemo, useState } from 'preact/hooks';
import { html, enc, exchangeLabel, features, fmtRate, rate } from '../util.js';
import { api } from '../api.js';
import { useAction, useApi, useApp } from '../state.js';
import { Chart, record } from '../chart.js';
import {
  ArgsEditor, ErrorBox, Facts, Field, KeyValues, ListControls, Loading, Section, Table, VhostSelect, argsObject, listQuery,
  sorter, useForm,
} from '../components.js';

export const exchangeHref = (vhost, name) => `#/exchanges/${enc(vhost)}/${enc(name === '' ? 'amq.default' : name)}`;
export const queueHref = (vhost, name) => `#/queues/${enc(vhost)}/${enc(name)}`;

export function FeatureTags({ o }) {
  return html`<span class="features">${features(o).map(([label, title]) => html`<abbr class="tag" title=${title}>${label}</abbr>`)}</span>`;
}

export function Exchanges({ route }) {
  const { vhost } = useApp();
  const list = useApi(`${vhost ? `/exchanges/${enc(vhost)}` : '/exchanges'}?${listQuery(route)}`);
  const q = route.query;
  const columns = [
    { key: 'vhost', label: 'Virtual host', sort: 'vhost' },
    { key: 'name', label: 'Name', sort: 'name', render: (x) => html`<a href=${exchangeHref(x.vhost, x.name)}>${exchangeLabel(x.name)}</a>` },
    { key: 'type', label: 'Type', sort: 'type' },
    { key: 'features', label: 'Features', render: (x) => html`<${FeatureTags} o=${x} />` },
    { key: 'in', label: 'Message rate in', sort: 'message_stats.publish_in_details.rate', cls: 'num', render: (x) => fmtRate(rate(x, 'publish_in') || 0) },
    { key: 'out', label: 'Message rate out', sort: 'message_stats.publish_out_details.rate', cls: 'num', render: (x) => fmtRate(rate(x, 'publish_out') || 0) },
  ];
  return html`
    <h1 tabindex="-1">Exchanges</h1>
    <${ListControls} route=${route} paged=${list.data} label="exchanges" />
    <${ErrorBox} error=${list.error} />
    ${list.data ? html`<${Table} caption="Exchanges" columns=${columns} rows=${list.data.items} rowKey=${(x) => x.vhost + '/' + x.name}
      sort=${q.sort || 'name'} reverse=${q.rev === 'true'} onSort=${sorter(route)} empty="No exchanges." />` : html`<${Loading} />`}
    <${AddExchange} onDone=${list.reload} />`;
}

function AddExchange({ onDone }) {
  const app = useApp();
  const types = (app.overview && app.overview.exchange_types) || [{ name: 'direct' }, { name: 'fanout' }, { name: 'topic' }, { name: 'headers' }];
  const [f, set, reset] = useForm({ vhost: app.vhost || app.vhosts[0] || '/', name: '', type: 'direct', durable: 'true', auto_delete: 'false', internal: 'false' });
  const [args, setArgs] = useState([]);
  const [run, busy] = useAction();
  const submit = async (e) => {
    e.preventDefault();
    const ok = await run(() => api.put(`/exchanges/${enc(f.vhost)}/${enc(f.name)}`, {
      type: f.type, durable: f.durable === 'true', auto_delete: f.auto_delete === 'true', internal: f.internal === 'true',
      arguments: argsObject(args),
    }), `Exchange ${f.name} declared`);
    if (ok) { reset(); setArgs([]); onDone(); }
  };
  return html`
    <${Section} title="Add a new exchange" open=${false} id="add-exchange">
      <form onSubmit=${submit} class="grid-form">
        <${VhostSelect} value=${f.vhost} onInput=${set('vhost')} />
        <${Field} label="Name" name="name" value=${f.name} onInput=${set('name')} required />
        <${Field} label="Type" name="type" as="select" value=${f.type} onInput=${set('type')} options=${types.map((t) => [t.name, t.name])} />
        <${Field} label="Durability" name="durable" as="select" value=${f.durable} onInput=${set('durable')} options=${[['true', 'Durable'], ['false', 'Transient']]} />
        <${Field} label="Auto delete" name="auto_delete" as="select" value=${f.auto_delete} onInput=${set('auto_delete')} options=${[['false', 'No'], ['true', 'Yes']]} />
        <${Field} label="Internal" name="internal" as="select" value=${f.internal} onInput=${set('internal')} options=${[['false', 'No'], ['true', 'Yes']]} />
        <${ArgsEditor} label="Arguments" rows=${args} setRows=${setArgs} suggestions=${[['alternate-exchange', 'string']]} />
        <div class="form-actions"><button type="submit" disabled=${busy}>Add exchange</button></div>
      </form>
    <//>`;
}

// bindings where this object is the source (exchange) or the destination (queue or exchange)
export function BindingsTable({ rows, side, onChange }) {
  const [run] = useAction();
  const unbind = async (b) => {
    const path = `/bindings/${enc(b.vhost)}/e/${enc(b.source)}/${b.destination_type === 'queue' ? 'q' : 'e'}/${enc(b.destination)}/${enc(b.properties_key)}`;
    if (await run(() => api.del(path), 'Binding removed')) onChange();
  };
  const columns = [
    side === 'destination'
      ? { key: 'source', label: 'From', render: (b) => (b.source === '' ? '(Default exchange binding)' : html`<a href=${exchangeHref(b.vhost, b.source)}>${b.source}</a>`) }
      : { key: 'destination', label: 'To', render: (b) => html`<a href=${b.destination_type === 'queue' ? queueHref(b.vhost, b.destination) : exchangeHref(b.vhost, b.destination)}>${b.destination}</a> <span class="muted">(${b.destination_type})</span>` },
    { key: 'routing_key', label: 'Routing key', render: (b) => html`<code>${b.routing_key}</code>` },
    { key: 'arguments', label: 'Arguments', render: (b) => html`<${KeyValues} obj=${b.arguments} />` },
    { key: 'action', label: 'Action', render: (b) => (b.source === '' ? null : html`<button type="button" class="small" onClick=${() => unbind(b)}>Unbind</button>`) },
  ];
  return html`<${Table} caption="Bindings" columns=${columns} rows=${rows} rowKey=${(b) => b.source + '>' + b.destination_type + b.destination + '/' + b.properties_key} empty="No bindings." />`;
}

// bind: from this exchange to a queue/exchange (side 'source') or from an exchange to this queue
export function BindForm({ vhost, name, side, onDone }) {
  const [f, set, reset] = useForm({ other: '', kind: 'q', routing_key: '' });
  const [args, setArgs] = useState([]);
  const [run, busy] = useAction();
  const submit = async (e) => {
    e.preventDefault();
    const path = side === 'source'
      ? `/bindings/${enc(vhost)}/e/${enc(name)}/${f.kind}/${enc(f.other)}`
      : `/bindings/${enc(vhost)}/e/${enc(f.other)}/q/${enc(name)}`;
    if (await run(() => api.post(path, { routing_key: f.routing_key, arguments: argsObject(args) }), 'Binding added')) {
      reset(); setArgs([]); onDone();
    }
  };
  return html`<form onSubmit=${submit} class="grid-form">
    ${side === 'source' ? html`<${Field} label="To" name="kind" as="select" value=${f.kind} onInput=${set('kind')} options=${[['q', 'Queue'], ['e', 'Exchange']]} />` : null}
    <${Field} label=${side === 'source' ? (f.kind === 'q' ? 'Queue name' : 'Exchange name') : 'From exchange'} name="other" value=${f.other} onInput=${set('other')} required />
    <${Field} label="Routing key" name="routing_key" value=${f.routing_key} onInput=${set('routing_key')} />
    <${ArgsEditor} label="Arguments" rows=${args} setRows=${setArgs} />
    <div class="form-actions"><button type="submit" disabled=${busy}>Bind</button></div>
  </form>`;
}

// publish a message through exchange `exchange` (the queue page uses the default exchange)
export function PublishForm({ vhost, exchange, routingKey }) {
  const [f, set] = useForm({ routing_key: routingKey || '', delivery_mode: '1', payload: '', encoding: 'string' });
  const [headers, setHeaders] = useState([]);
  const [props, setProps] = useState([]);
  const [run, busy] = useAction();
  const submit = async (e) => {
    e.preventDefault();
    const properties = { delivery_mode: Number(f.delivery_mode), ...argsObject(props) };
    const h = argsObject(headers);
    if (Object.keys(h).length) properties.headers = h;
    const out = await run(() => api.post(`/exchanges/${enc(vhost)}/${enc(exchange === '' ? 'amq.default' : exchange)}/publish`, {
      routing_key: f.routing_key, payload: f.payload, payload_encoding: f.encoding, properties,
    }), (r) => (r.routed ? 'Message published.' : 'Message published, but not routed to any queue.'));
    if (out) set('payload')('');
  };
  return html`<form onSubmit=${submit} class="grid-form" aria-label="Publish message">
    ${routingKey === undefined ? html`<${Field} label="Routing key" name="routing_key" value=${f.routing_key} onInput=${set('routing_key')} />` : null}
    <${Field} label="Delivery mode" name="delivery_mode" as="select" value=${f.delivery_mode} onInput=${set('delivery_mode')}
      options=${[['1', '1 - Non-persistent'], ['2', '2 - Persistent']]} />
    <${ArgsEditor} label="Headers" rows=${headers} setRows=${setHeaders} />
    <${ArgsEditor} label="Properties" rows=${props} setRows=${setProps}
      suggestions=${[['content_type', 'string'], ['correlation_id', 'string'], ['reply_to', 'string'], ['expiration', 'string'],
        ['message_id', 'string'], ['priority', 'number'], ['type', 'string'], ['app_id', 'string']]} />
    <${Field} label="Payload" name="payload" as="textarea" value=${f.payload} onInput=${set('payload')} rows="4" />
    <${Field} label="Payload encoding" name="encoding" as="select" value=${f.encoding} onInput=${set('encoding')}
      options=${[['string', 'String'], ['base64', 'Base64']]} />
    <div class="form-actions"><button type="submit" disabled=${busy}>Publish message</button></div>
  </form>`;
}

export function ExchangeDetail({ vhost, name }) {
  const { navigate } = useApp();
  const real = name === 'amq.default' ? '' : name;
  const path = `/exchanges/${enc(vhost)}/${enc(name)}`;
  const ex = useApi(path);
  const src = useApi(`${path}/bindings/source`);
  const dst = useApi(`${path}/bindings/destination`);
  const [ifUnused, setIfUnused] = useState(false);
  const [run, busy] = useAction();
  const x = ex.data;
  const hist = useMemo(() => x && record(`ex:${vhost}/${name}`, { in: rate(x, 'publish_in') || 0, out: rate(x, 'publish_out') || 0 }), [x]);
  const remove = async (e) => {
    e.preventDefault();
    if (!confirm(`Delete exchange ${name}?`)) return;
    if (await run(() => api.del(`${path}${ifUnused ? '?if-unused=true' : ''}`), `Exchange ${name} deleted`)) navigate('#/exchanges');
  };
  const reload = () => { src.reload(); dst.reload(); };
  const builtin = real === '' || real.startsWith('amq.');
  return html`
    <h1 tabindex="-1"><span class="kind">Exchange</span> ${exchangeLabel(real)} <span class="muted small">in virtual host ${vhost}</span></h1>
    <${ErrorBox} error=${ex.error} />
    ${!x ? (ex.error ? null : html`<${Loading} />`) : html`
      <div class="detail-grid">
        <${Section} title="Details">
          <${Facts} items=${[['Type', x.type], ['Features', html`<${FeatureTags} o=${x} />`], ['Policy', x.policy || ''],
            ['Arguments', html`<${KeyValues} obj=${x.arguments} />`]]} />
        <//>
        <${Chart} title="Message rates" hist=${hist} kind="rate"
          series=${[{ key: 'in', label: 'Publish (in)', color: '#2563eb' }, { key: 'out', label: 'Publish (out)', color: '#059669' }]} />
      </div>
      <${Section} title="Bindings from this exchange">
        ${src.data ? html`<${BindingsTable} rows=${src.data} side="source" onChange=${reload} />` : html`<${Loading} />`}
        ${real !== '' ? html`<h3>Add binding from this exchange</h3><${BindForm} vhost=${vhost} name=${real} side="source" onDone=${reload} />` : null}
      <//>
      <${Section} title="Bindings to this exchange" open=${!!(dst.data && dst.data.length)}>
        ${dst.data ? html`<${BindingsTable} rows=${dst.data} side="destination" onChange=${reload} />` : html`<${Loading} />`}
      <//>
      <${Section} title="Publish message" open=${false} id="publish">
        <${PublishForm} vhost=${vhost} exchange=${real} />
      <//>
      ${builtin ? null : html`<${Section} title="Delete this exchange" open=${false} id="delete">
        <form onSubmit=${remove} class="inline-form">
          <${Field} label="Only if unused" name="if_unused" as="checkbox" value=${ifUnused} onInput=${setIfUnused} />
          <button type="submit" class="danger" disabled=${busy}>Delete</button>
        </form>
      <//>`}`}`;
}
