// Connections and channels: paged lists with rates, a detail page each, closing a connection.
import { useMemo, useState } from 'preact/hooks';
import { html, enc, fmtNum, fmtRate, fmtByteRate, fmtBytes, fmtTime, rate } from '../util.js';
import { api } from '../api.js';
import { useAction, useApi, useApp } from '../state.js';
import { Chart, RATE_SERIES, rateValues, record } from '../chart.js';
import { ErrorBox, Facts, Field, KeyValues, ListControls, Loading, Section, Table, listQuery, sorter } from '../components.js';

const connLink = (name) => html`<a href=${`#/connections/${enc(name)}`}>${name}</a>`;
const chanLink = (name) => html`<a href=${`#/channels/${enc(name)}`}>${name}</a>`;
const client = (c) => {
  const p = c.client_properties || {};
  return [p.product, p.version].filter(Boolean).join(' ');
};

function scoped(base, vhost) {
  return vhost ? `/vhosts/${enc(vhost)}/${base}` : `/${base}`;
}

export function Connections({ route }) {
  const { vhost } = useApp();
  const list = useApi(`${scoped('connections', vhost)}?${listQuery(route)}`);
  const q = route.query;
  const columns = [
    { key: 'name', label: 'Name', sort: 'name', render: (c) => html`${connLink(c.name)}${c.client_properties && c.client_properties.connection_name ? html`<br /><span class="muted small">${c.client_properties.connection_name}</span>` : null}` },
    { key: 'vhost', label: 'Virtual host', sort: 'vhost' },
    { key: 'user', label: 'User', sort: 'user' },
    { key: 'state', label: 'State', sort: 'state', render: (c) => html`<span class=${`state ${c.state}`}>${c.state}</span>` },
    { key: 'protocol', label: 'Protocol', sort: 'protocol' },
    { key: 'client', label: 'Client', render: client },
    { key: 'channels', label: 'Channels', sort: 'channels', cls: 'num' },
    { key: 'recv', label: 'From client', sort: 'recv_oct_details.rate', cls: 'num', render: (c) => fmtByteRate(c.recv_oct_details && c.recv_oct_details.rate) },
    { key: 'send', label: 'To client', sort: 'send_oct_details.rate', cls: 'num', render: (c) => fmtByteRate(c.send_oct_details && c.send_oct_details.rate) },
  ];
  return html`
    <h1 tabindex="-1">Connections</h1>
    <${ListControls} route=${route} paged=${list.data} label="connections" />
    <${ErrorBox} error=${list.error} />
    ${list.data ? html`<${Table} caption="Connections" columns=${columns} rows=${list.data.items} rowKey=${(c) => c.name}
      sort=${q.sort || 'name'} reverse=${q.rev === 'true'} onSort=${sorter(route)} empty="No connections." />` : html`<${Loading} />`}`;
}

export function ConnectionDetail({ name }) {
  const { navigate } = useApp();
  const conn = useApi(`/connections/${enc(name)}`);
  const chans = useApi(`/connections/${enc(name)}/channels`);
  const [reason, setReason] = useState('Closed via management UI');
  const [run, busy] = useAction();
  const c = conn.data;
  const hist = useMemo(() => c && record(`conn:${name}`, {
    recv: (c.recv_oct_details || {}).rate || 0, send: (c.send_oct_details || {}).rate || 0,
  }), [c]);
  const close = async (e) => {
    e.preventDefault();
    if (!confirm(`Close connection ${name}?`)) return;
    const ok = await run(() => api.del(`/connections/${enc(name)}`, { headers: { 'X-Reason': reason } }), `Connection ${name} closed`);
    if (ok) navigate('#/connections');
  };
  return html`
    <h1 tabindex="-1"><span class="kind">Connection</span> ${name}</h1>
    <${ErrorBox} error=${conn.error} />
    ${!c ? (conn.error ? null : html`<${Loading} />`) : html`
      <div class="detail-grid">
        <${Section} title="Details">
          <${Facts} items=${[['Virtual host', c.vhost], ['User', c.user], ['State', c.state], ['Protocol', c.protocol],
            ['Authentication', c.auth_mechanism], ['Client', client(c)], ['Peer', `${c.peer_host}:${c.peer_port}`],
            ['Connected at', fmtTime(c.connected_at)], ['Heartbeat', c.timeout ? `${c.timeout} s` : 'off'],
            ['Frame max', fmtNum(c.frame_max)], ['Channel max', fmtNum(c.channel_max)],
            ['Received', fmtBytes(c.recv_oct)], ['Sent', fmtBytes(c.send_oct)], ['SSL/TLS', c.ssl ? 'yes' : 'no']]} />
        <//>
        <${Chart} title="Data rates" hist=${hist} kind="rate" format=${fmtByteRate}
          series=${[{ key: 'recv', label: 'From client', color: '#2563eb' }, { key: 'send', label: 'To client', color: '#059669' }]} />
      </div>
      <${Section} title="Channels">
        ${chans.data ? html`<${ChannelTable} rows=${chans.data} />` : html`<${Loading} />`}
      <//>
      <${Section} title="Client properties" open=${false}><${KeyValues} obj=${c.client_properties} /><//>
      <${Section} title="Close this connection" open=${false} id="close-connection">
        <form onSubmit=${close} class="inline-form">
          <${Field} label="Reason" name="reason" value=${reason} onInput=${setReason} hint="Sent to the client with 320 CONNECTION_FORCED" />
          <button type="submit" class="danger" disabled=${busy}>Force close</button>
        </form>
      <//>`}`;
}

function ChannelTable({ rows, route }) {
  const q = route ? route.query : {};
  const columns = [
    { key: 'name', label: 'Channel', sort: 'name', render: (c) => chanLink(c.name) },
    { key: 'vhost', label: 'Virtual host', sort: 'vhost' },
    { key: 'user', label: 'User', sort: 'user' },
    { key: 'mode', label: 'Mode', render: (c) => html`${c.confirm ? html`<abbr title="confirm">C</abbr>` : ''}${c.transactional ? html`<abbr title="transactional">T</abbr>` : ''}` },
    { key: 'state', label: 'State', sort: 'state' },
    { key: 'consumer_count', label: 'Consumers', sort: 'consumer_count', cls: 'num' },
    { key: 'prefetch', label: 'Prefetch', sort: 'prefetch_count', cls: 'num', render: (c) => c.prefetch_count || '' },
    { key: 'unacked', label: 'Unacked', sort: 'messages_unacknowledged', cls: 'num', render: (c) => fmtNum(c.messages_unacknowledged) },
    { key: 'unconfirmed', label: 'Unconfirmed', sort: 'messages_unconfirmed', cls: 'num', render: (c) => fmtNum(c.messages_unconfirmed) },
    { key: 'publish', label: 'Publish', sort: 'message_stats.publish_details.rate', cls: 'num', render: (c) => fmtRate(rate(c, 'publish')) },
    { key: 'confirm', label: 'Confirm', sort: 'message_stats.confirm_details.rate', cls: 'num', render: (c) => fmtRate(rate(c, 'confirm')) },
    { key: 'deliver', label: 'Deliver / get', sort: 'message_stats.deliver_get_details.rate', cls: 'num', render: (c) => fmtRate(rate(c, 'deliver_get')) },
    { key: 'ack', label: 'Ack', sort: 'message_stats.ack_details.rate', cls: 'num', render: (c) => fmtRate(rate(c, 'ack')) },
  ];
  return html`<${Table} caption="Channels" columns=${columns} rows=${rows} rowKey=${(c) => c.name} empty="No channels."
    sort=${q.sort || 'name'} reverse=${q.rev === 'true'} onSort=${route ? sorter(route) : null} />`;
}

export function Channels({ route }) {
  const { vhost } = useApp();
  const list = useApi(`${scoped('channels', vhost)}?${listQuery(route)}`);
  return html`
    <h1 tabindex="-1">Channels</h1>
    <${ListControls} route=${route} paged=${list.data} label="channels" />
    <${ErrorBox} error=${list.error} />
    ${list.data ? html`<${ChannelTable} rows=${list.data.items} route=${route} />` : html`<${Loading} />`}`;
}

export function ChannelDetail({ name }) {
  const ch = useApi(`/channels/${enc(name)}`);
  const c = ch.data;
  const hist = useMemo(() => c && record(`chan:${name}`, rateValues(c.message_stats)), [c]);
  const consumers = useApi(c ? `/consumers/${enc(c.vhost)}` : null);
  const mine = consumers.data ? consumers.data.filter((x) => x.channel_details && x.channel_details.name === name) : null;
  return html`
    <h1 tabindex="-1"><span class="kind">Channel</span> ${name}</h1>
    <${ErrorBox} error=${ch.error} />
    ${!c ? (ch.error ? null : html`<${Loading} />`) : html`
      <div class="detail-grid">
        <${Section} title="Details">
          <${Facts} items=${[['Connection', connLink(c.connection_details.name)], ['Virtual host', c.vhost], ['User', c.user],
            ['State', c.state], ['Mode', [c.confirm && 'confirm', c.transactional && 'transactional'].filter(Boolean).join(', ') || 'plain'],
            ['Prefetch (consumer)', c.prefetch_count], ['Prefetch (channel)', c.global_prefetch_count],
            ['Unacked', fmtNum(c.messages_unacknowledged)], ['Unconfirmed', fmtNum(c.messages_unconfirmed)],
            ['Uncommitted', fmtNum(c.messages_uncommitted)]]} />
        <//>
        <${Chart} title="Message rates" hist=${hist} series=${RATE_SERIES} kind="rate" />
      </div>
      <${Section} title="Consumers">
        ${mine ? html`<${Table} caption="Consumers" rows=${mine} rowKey=${(x) => x.consumer_tag} empty="No consumers."
          columns=${[{ key: 'queue', label: 'Queue', render: (x) => html`<a href=${`#/queues/${enc(x.queue.vhost)}/${enc(x.queue.name)}`}>${x.queue.name}</a>` },
            { key: 'consumer_tag', label: 'Consumer tag' }, { key: 'ack', label: 'Ack required', render: (x) => (x.ack_required ? 'yes' : 'no') },
            { key: 'prefetch_count', label: 'Prefetch', cls: 'num' }, { key: 'exclusive', label: 'Exclusive', render: (x) => (x.exclusive ? 'yes' : 'no') },
            { key: 'active', label: 'Active', render: (x) => (x.active ? 'yes' : 'no') }]} />` : html`<${Loading} />`}
      <//>`}`;
}
