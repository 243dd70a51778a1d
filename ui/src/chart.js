// Live charts: the API answers only current counts and rates, so the page keeps the history
// itself (one point per refresh, the last MAX_POINTS per object, kept while the tab is open) and
// draws it with uPlot.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { html, fmtNum, fmtRate } from './util.js';

const MAX_POINTS = 720; // an hour at the default 5 s
const histories = new Map();

// append one sample (values: {seriesKey: number}) to the history named key, at most once per
// second (a page re-rendering without new data adds nothing)
export function record(key, values) {
  let hist = histories.get(key);
  if (!hist) { hist = { t: [], series: {} }; histories.set(key, hist); }
  const now = Date.now() / 1000;
  const last = hist.t[hist.t.length - 1];
  if (last !== undefined && now - last < 1) return hist;
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
    <figure class="chart">
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
