// Formatting and small helpers shared by every page.
import { h } from 'preact';
import htm from 'htm';

export const html = htm.bind(h);

// a name as one path segment of the API or of a page address ("/" -> "%2F")
export const enc = (s) => encodeURIComponent(s);

export function fmtNum(n) {
  if (n === undefined || n === null || Number.isNaN(n)) return '';
  return Number(n).toLocaleString('en-US');
}

export function fmtRate(r) {
  if (r === undefined || r === null) return '';
  const v = Number(r);
  if (v === 0) return '0.0/s';
  return (Math.abs(v) >= 100 ? Math.round(v).toLocaleString('en-US') : v.toFixed(1)) + '/s';
}

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
export function fmtBytes(n) {
  if (n === undefined || n === null) return '';
  let v = Number(n);
  let i = 0;
  while (Math.abs(v) >= 1024 && i < UNITS.length - 1) { v /= 1024; i++; }
  return (i === 0 ? String(v) : v.toFixed(v >= 100 ? 0 : 1)) + ' ' + UNITS[i];
}

export function fmtByteRate(r) {
  return r === undefined || r === null ? '' : fmtBytes(Math.round(r)) + '/s';
}

export function fmtDuration(ms) {
  let s = Math.floor(Number(ms) / 1000);
  const d = Math.floor(s / 86400); s -= d * 86400;
  const hh = Math.floor(s / 3600); s -= hh * 3600;
  const mm = Math.floor(s / 60); s -= mm * 60;
  if (d) return `${d}d ${hh}h`;
  if (hh) return `${hh}h ${mm}m`;
  if (mm) return `${mm}m ${s}s`;
  return `${s}s`;
}

export function fmtTime(ms) {
  if (!ms) return '';
  const t = new Date(Number(ms));
  return t.toISOString().replace('T', ' ').slice(0, 19);
}

// the value at a dotted path ("message_stats.publish_details.rate")
export function pick(obj, path) {
  let v = obj;
  for (const k of path.split('.')) {
    if (v === undefined || v === null) return undefined;
    v = v[k];
  }
  return v;
}

export const rate = (obj, stat) => pick(obj, `message_stats.${stat}_details.rate`);

export function exchangeLabel(name) {
  return name === '' ? '(AMQP default)' : name;
}

export function json(v) {
  return JSON.stringify(v);
}

// RabbitMQ's short feature labels of a queue or exchange
export function features(o) {
  const out = [];
  if (o.durable) out.push(['D', 'durable']);
  if (o.auto_delete) out.push(['AD', 'auto-delete']);
  if (o.exclusive) out.push(['Excl', 'exclusive']);
  if (o.internal) out.push(['I', 'internal']);
  for (const [k, v] of Object.entries(o.arguments || {})) {
    if (k === 'x-queue-type') continue;
    out.push([k.replace(/^x-/, ''), `${k}: ${json(v)}`]);
  }
  return out;
}

export function hasTag(user, ...tags) {
  return !!user && tags.some((t) => user.tags.includes(t));
}

// the route's query parameters, from "#/queues?page=2&name=x"
export function parseHash(hash) {
  const raw = (hash || '').replace(/^#/, '') || '/';
  const [pathPart, queryPart = ''] = raw.split('?');
  const segments = pathPart.split('/').filter((s) => s !== '').map((s) => {
    try { return decodeURIComponent(s); } catch (e) { return s; }
  });
  const query = Object.fromEntries(new URLSearchParams(queryPart));
  return { path: pathPart, segments, query };
}

export function hashWith(path, query) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== null && v !== '' && v !== false) q.set(k, String(v));
  }
  const s = q.toString();
  return '#' + path + (s ? '?' + s : '');
}
