// Live charts: the page keeps a history per object (one point per refresh, the last MAX_POINTS,
// kept while the tab is open), seeded when a page opens with the broker's own samples of the
// last ten minutes (HISTORY_QUERY: RabbitMQ's msg_rates_age/lengths_age parameters), and draws
// it with uPlot.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { html, fmtNum, fmtRate } from './util.js';

const MAX_POINTS = 720; // an hour at the default 5 s
const GAP_AFTER = 2.5; // times the last interval between points without one: a gap in the lines
const MIN_GAP_S = 12; // ... and at least this long (a slow answer is not a gap)
const histories = new Map();

// the broker's samples asked for once when a page with charts opens: 10 minutes, every 5 s
export const HISTORY_QUERY = 'msg_rates_age=600&msg_rates_incr=5&lengths_age=600&lengths_incr=5';

// the samples of a `*_details` (newest first) as [[seconds, value]] oldest first: counts as they
// are, counters as the rate between two samples
function points(details, asRate) {
  const s = details && details.samples;
  if (!s || s.length < 2) return [];
  // Warren's sampled_since: the points before it repeat the oldest sample (the broker kept none
  // then: before its first question about the object, before a restart), so they are not drawn
  const since = details.sampled_since ?? -Infinity;
  const out = [];
  for (let i = s.length - 1; i >= 0; i--) {
    if (s[i].timestamp < since) continue;
    if (!asRate) out.push([s[i].timestamp / 1000, s[i].sample]);
    else if (i < s.length - 1 && s[i + 1].timestamp >= since) {
      const dt = (s[i].timestamp - s[i + 1].timestamp) / 1000;
      out.push([s[i].timestamp / 1000, dt > 0 ? Math.max(0, (s[i].sample - s[i + 1].sample) / dt) : 0]);
    }
  }
  return out;
}

// put the broker's history before the points the page recorded itself (once per history key).
// sources: {seriesKey: [[details, asRate], ...]} (several details add up: deliver + deliver_no_ack)
export function seed(key, sources) {
  let hist = histories.get(key);
  if (hist && hist.seeded) return hist;
  const byTime = new Map();
  for (const [name, parts] of Object.entries(sources)) {
    for (const [details, asRate] of parts) {
      for (const [t, v] of points(details, asRate)) {
        const row = byTime.get(t) || {};
        row[name] = (row[name] || 0) + v;
        byTime.set(t, row);
      }
    }
  }
  if (!hist) { hist = { t: [], series: {} }; histories.set(key, hist); }
  hist.seeded = true;
  const first = hist.t.length ? hist.t[0] : Infinity;
  const times = [...byTime.keys()].filter((t) => t < first - 1).sort((a, b) => a - b);
  if (!times.length) return hist;
  const names = new Set([...Object.keys(sources), ...Object.keys(hist.series)]);
  for (const name of names) {
    const before = times.map((t) => (byTime.get(t)[name] ?? null));
    hist.series[name] = before.concat(hist.series[name] || new Array(hist.t.length).fill(null));
  }
  hist.t = times.concat(hist.t);
  if (hist.t.length > MAX_POINTS) {
    hist.t.splice(0, hist.t.length - MAX_POINTS);
    for (const v of Object.values(hist.series)) v.splice(0, v.length - MAX_POINTS);
  }
  return hist;
}

// seed sources of RATE_SERIES from a message_stats object with samples
export function rateSources(stats) {
  const d = (k) => [(stats || {})[`${k}_details`], true];
  return {
    publish: [d('publish')], confirm: [d('confirm')], deliver: [d('deliver'), d('deliver_no_ack')],
    get: [d('get'), d('get_no_ack')], ack: [d('ack')], redeliver: [d('redeliver')],
    unroutable: [d('return_unroutable'), d('drop_unroutable')],
  };
}

// seed sources of QUEUED_SERIES from an object with messages*_details samples
export function queuedSources(o) {
  const d = (k) => [(o || {})[`${k}_details`], false];
  return { ready: [d('messages_ready')], unacked: [d('messages_unacknowledged')], total: [d('messages')] };
}

// append one sample (values: {seriesKey: number}) to the history named key, at most once per
// second (a page re-rendering without new data adds nothing)
export function record(key, values) {
  let hist = histories.get(key);
  if (!hist) { hist = { t: [], series: {} }; histories.set(key, hist); }
  const now = Date.now() / 1000;
  const last = hist.t[hist.t.length - 1];
  if (last !== undefined && now - last < 1) return hist;
  // no answer for much longer than the refresh interval (the broker was down or restarting, the
  // tab hidden): a row of nulls, so the lines break there instead of joining across what nobody saw
  const step = hist.t.length > 1 ? last - hist.t[hist.t.length - 2] : 0;
  if (step > 0 && now - last > Math.max(GAP_AFTER * step, MIN_GAP_S)) {
    hist.t.push((last + now) / 2);
    for (const name of Object.keys(hist.series)) hist.series[name].push(null);
  }
  hist.t.push(now);
  for (const [name, v] of Object.entries(values)) {
    if (!hist.series[name]) hist.series[name] = new Array(hist.t.length - 1).fill(null);
    hist.series[name].push(v === undefined ? null : v);
  }
  for (const name of Object.keys(hist.series)) {
    if (hist.series[name].length < hist.t.length) hist.series[name].push(null);
  }
  if (hist.t.length > MAX_POINTS) {
    hist.t.splice(0, hist.t.length - MAX_POINTS);
    for (const s of Object.values(hist.series)) s.splice(0, s.length - MAX_POINTS);
  }
  return hist;
}

export const RATE_SERIES = [
  { key: 'publish', label: 'Publish', color: '#2563eb' },
  { key: 'confirm', label: 'Publisher confirm', color: '#7c3aed' },
  { key: 'deliver', label: 'Deliver', color: '#059669' },
  { key: 'get', label: 'Get', color: '#0891b2' },
  { key: 'ack', label: 'Consumer ack', color: '#d97706' },
  { key: 'redeliver', label: 'Redelivered', color: '#dc2626' },
  { key: 'unroutable', label: 'Unroutable', color: '#6b7280' },
];
export const QUEUED_SERIES = [
  { key: 'ready', label: 'Ready', color: '#d97706' },
  { key: 'unacked', label: 'Unacked', color: '#2563eb' },
  { key: 'total', label: 'Total', color: '#374151' },
];

// the message rates of a message_stats object as chart values
export function rateValues(stats) {
  const r = (k) => (stats && stats[`${k}_details`] ? stats[`${k}_details`].rate : 0);
  return {
    publish: r('publish'), confirm: r('confirm'), deliver: r('deliver') + r('deliver_no_ack'),
    get: r('get') + r('get_no_ack'), ack: r('ack'), redeliver: r('redeliver'),
    unroutable: r('return_unroutable') + r('drop_unroutable'),
  };
}

export function queuedValues(o) {
  return { ready: o.messages_ready || 0, unacked: o.messages_unacknowledged || 0, total: o.messages || 0 };
}

// a chart of history `key`, series chosen from `series` (only those present in the history);
// `kind` 'rate' (per second) or 'count'; the current values are listed under it as text too
export function Chart({ title, hist, series, kind = 'count', height = 180, format }) {
  const box = useRef(null);
  const plot = useRef(null);
  const shown = series.filter((s) => hist && hist.series[s.key]);
  const fmt = format || (kind === 'rate' ? fmtRate : fmtNum);
  const signature = shown.map((s) => s.key).join(',');

  useEffect(() => {
    if (!box.current || !hist) return undefined;
    const width = Math.max(240, box.current.clientWidth);
    const opts = {
      width, height,
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      scales: {
        // the window is the history kept, at least a minute (uPlot would make one sample a day wide)
        x: { time: true, range: () => { const hi = hist.t[hist.t.length - 1] || Date.now() / 1000; return [Math.min(hist.t[0] || hi, hi - 60), hi]; } },
        y: { range: (u, min, max) => [0, Math.max(kind === 'rate' ? 1 : 5, max * 1.1)] } },
      axes: [
        { stroke: '#4b5563', grid: { stroke: '#e5e7eb' }, ticks: { stroke: '#e5e7eb' } },
        { stroke: '#4b5563', grid: { stroke: '#e5e7eb' }, ticks: { stroke: '#e5e7eb' }, size: 60,
          values: (u, vals) => vals.map((v) => fmt(v)) },
      ],
      series: [{}, ...shown.map((s) => ({ label: s.label, stroke: s.color, width: s.key === 'total' ? 1.5 : 2, points: { show: false },
        dash: s.key === 'total' ? [6, 4] : undefined, fill: s.key === 'total' ? undefined : s.color + '14' }))],
    };
    plot.current = new uPlot(opts, [hist.t, ...shown.map((s) => hist.series[s.key])], box.current);
    const resize = new ResizeObserver(() => {
      if (plot.current && box.current) plot.current.setSize({ width: Math.max(240, box.current.clientWidth), height });
    });
    resize.observe(box.current);
    return () => { resize.disconnect(); plot.current.destroy(); plot.current = null; };
  }, [hist, signature]);

  useEffect(() => {
    if (plot.current && hist) plot.current.setData([hist.t.slice(), ...shown.map((s) => hist.series[s.key].slice())]);
  });

  const lastIndex = hist ? hist.t.length - 1 : -1;
  return html`
    <figure class="chart" data-points=${hist ? hist.t.length : 0} data-first=${hist && hist.t.length ? hist.t[0] : ''}
      data-seeded=${hist && hist.seeded ? 'yes' : 'no'}>
      <figcaption>${title}</figcaption>
      <div class="chart-plot" ref=${box} role="img"
        aria-label=${`${title}: ` + shown.map((s) => `${s.label} ${fmt(lastIndex >= 0 ? hist.series[s.key][lastIndex] : 0)}`).join(', ')}></div>
      <ul class="chart-legend">
        ${shown.map((s) => html`<li key=${s.key}>
          <span class="swatch" style=${{ background: s.color }}></span>${s.label}
          <strong>${fmt(lastIndex >= 0 ? hist.series[s.key][lastIndex] : 0)}</strong></li>`)}
      </ul>
    </figure>`;
}
