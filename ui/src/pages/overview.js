// Overview: totals, live charts of queued messages and message rates, node (memory, disk,
// alarms, descriptors), the nodes of a cluster, listeners and versions.
import { useMemo } from 'preact/hooks';
import { html, fmtNum, fmtBytes, fmtDuration, hasTag } from '../util.js';
import { useApi, useApp } from '../state.js';
import {
  Chart, HISTORY_QUERY, QUEUED_SERIES, RATE_SERIES, queuedSources, queuedValues, rateSources, rateValues, record, seed,
} from '../chart.js';
import { ErrorBox, Facts, Loading, Section, Table } from '../components.js';

function Gauge({ label, used, limit, alarm, format, invert = false }) {
  // invert: disk free is good when high; the bar shows how close the value is to its limit
  const ratio = limit ? Math.min(1, invert ? limit / Math.max(used, 1) : used / limit) : 0;
  const level = alarm ? 'alarm' : ratio > 0.8 ? 'warn' : 'ok';
  return html`<div class=${`gauge ${level}`}>
    <div class="gauge-label">${label}${alarm ? html` <strong class="badge alarm">ALARM</strong>` : null}</div>
    <div class="gauge-value">${format(used)} <span class="muted">${invert ? 'free, limit ' : 'of '}${format(limit)}</span></div>
    <div class="bar" role="meter" aria-label=${label} aria-valuemin="0" aria-valuemax="100" aria-valuenow=${Math.round(ratio * 100)}>
      <span style=${{ width: `${Math.round(ratio * 100)}%` }}></span></div>
  </div>`;
}

export function Overview() {
  const { user } = useApp();
  const ov = useApi('/overview');
  const nodes = useApi(hasTag(user, 'monitoring', 'administrator') ? '/nodes' : null);
  // the last ten minutes as the broker sampled them, once, so the charts start with a history
  const past = useApi(`/overview?${HISTORY_QUERY}&columns=message_stats,queue_totals`, { refresh: false });
  const data = ov.data;
  const seeded = useMemo(() => past.data && seed('overview', {
    ...rateSources(past.data.message_stats), ...queuedSources(past.data.queue_totals),
  }), [past.data]);
  const hist = useMemo(() => data && record('overview', {
    ...rateValues(data.message_stats), ...queuedValues(data.queue_totals || {}),
  }), [data, seeded]);
  if (!data) return html`<h1 tabindex="-1">Overview</h1>${ov.error ? html`<${ErrorBox} error=${ov.error} />` : html`<${Loading} />`}`;
  const totals = data.object_totals || {};
  const qt = data.queue_totals || {};
  // the answering node's gauges; a cluster's nodes (every node lists them all) in a table below
  const node = nodes.data && (nodes.data.find((n) => n.name === data.node) || nodes.data[0]);
  const cluster = nodes.data && nodes.data.length > 1 ? nodes.data : null;
  const alarmsOf = (n) => [n.mem_alarm && 'memory', n.disk_free_alarm && 'disk'].filter(Boolean);
  // RabbitMQ's alarms are the cluster's: one node's alarm blocks publishers on every node
  const alarms = (nodes.data || []).flatMap((n) => alarmsOf(n).map((a) => (cluster ? `${a} on ${n.name}` : a)));
  return html`
    <h1 tabindex="-1">Overview</h1>
    <${ErrorBox} error=${ov.error} />
    <ul class="totals" aria-label="Totals">
      ${[['Connections', totals.connections, '#/connections'], ['Channels', totals.channels, '#/channels'],
        ['Exchanges', totals.exchanges, '#/exchanges'], ['Queues', totals.queues, '#/queues'],
        ['Consumers', totals.consumers, '#/queues'], ['Messages', qt.messages, '#/queues'],
        ['Ready', qt.messages_ready, '#/queues'], ['Unacked', qt.messages_unacknowledged, '#/queues']].map(([label, n, href]) =>
        html`<li key=${label}><a href=${href}><span class="total-n">${fmtNum(n || 0)}</span><span class="total-l">${label}</span></a></li>`)}
    </ul>
    <div class="charts">
      <${Chart} title="Queued messages" hist=${hist} series=${QUEUED_SERIES} kind="count" />
      <${Chart} title="Message rates" hist=${hist} series=${RATE_SERIES} kind="rate" />
    </div>
    ${node ? html`
      <${Section} title="Node ${node.name}" id="node">
        <p class=${alarms.length ? 'alarm-line alarm' : 'alarm-line ok'} role="status">
          ${alarms.length ? `Resource alarm in force: ${alarms.join(' and ')} (publishers are blocked)` : 'No resource alarms'}</p>
        <div class="gauges">
          <${Gauge} label="Memory" used=${node.mem_used} limit=${node.mem_limit} alarm=${node.mem_alarm} format=${fmtBytes} />
          <${Gauge} label="Disk space" used=${node.disk_free} limit=${node.disk_free_limit} alarm=${node.disk_free_alarm}
            format=${fmtBytes} invert=${true} />
          <${Gauge} label="File descriptors" used=${node.fd_used} limit=${node.fd_total} format=${fmtNum} />
          <${Gauge} label="Sockets" used=${node.sockets_used} limit=${node.sockets_total} format=${fmtNum} />
        </div>
        <${Facts} items=${[['Uptime', fmtDuration(node.uptime)], ['Processors', node.processors],
          ['Memory measured as', node.mem_calculation_strategy], ['Rates mode', node.rates_mode],
          ['Process id', node.os_pid]]} />
      <//>` : nodes.error ? html`<p class="muted">Node details need the monitoring or administrator tag.</p>` : null}
    ${cluster ? html`
      <${Section} title="Nodes" id="nodes">
        <${Table} caption="Nodes of the cluster" rows=${cluster} rowKey=${(n) => n.name}
          columns=${[{ key: 'name', label: 'Name' },
            { key: 'running', label: 'State', render: (n) => (n.running ? 'running'
              : html`<strong class="badge alarm">down</strong>`) },
            { key: 'mem_used', label: 'Memory', cls: 'num', render: (n) => (n.running ? fmtBytes(n.mem_used) : '') },
            { key: 'disk_free', label: 'Disk free', cls: 'num', render: (n) => (n.running ? fmtBytes(n.disk_free) : '') },
            { key: 'fd_used', label: 'File descriptors', cls: 'num', render: (n) => (n.running ? fmtNum(n.fd_used) : '') },
            { key: 'alarms', label: 'Alarms', render: (n) => alarmsOf(n).join(', ') || (n.running ? 'none' : '') },
            { key: 'uptime', label: 'Uptime', cls: 'num', render: (n) => (n.running ? fmtDuration(n.uptime) : '') }]} />
      <//>` : null}
    <${Section} title="Listeners" id="listeners">
      <${Table} caption="Listeners" rows=${data.listeners || []} rowKey=${(l) => `${l.node}:${l.protocol}:${l.port}`}
        columns=${[{ key: 'protocol', label: 'Protocol' }, { key: 'ip_address', label: 'Bound to' },
          { key: 'port', label: 'Port', cls: 'num' }, { key: 'node', label: 'Node' }]} />
    <//>
    <${Section} title="Versions" id="versions">
      <${Facts} items=${[[data.product_name || 'Warren', data.product_version], ['RabbitMQ API compatibility', data.rabbitmq_version],
        ['Runtime', data.erlang_full_version || data.erlang_version], ['Cluster', data.cluster_name], ['Node', data.node]]} />
    <//>`;
}
