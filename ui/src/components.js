// Building blocks of the pages: sortable tables, the pager, form fields, argument editors.
import { useEffect, useRef, useState } from 'preact/hooks';
import { html, hashWith } from './util.js';
import { useApp } from './state.js';

export function Loading({ what = '' }) {
  return html`<p class="muted" role="status">Loading${what ? ' ' + what : ''}…</p>`;
}

export function ErrorBox({ error }) {
  if (!error) return null;
  return html`<p class="error" role="alert">${error.status === 404 ? 'Not found: ' : ''}${error.message}</p>`;
}

// a titled block of a page; `open` false makes it a closed <details> the user opens
export function Section({ title, children, open = true, id, actions }) {
  if (open === true) {
    return html`<section class="panel" id=${id} aria-label=${title}>
      <div class="panel-head"><h2>${title}</h2>${actions}</div>${children}</section>`;
  }
  return html`<details class="panel" id=${id}><summary><h2>${title}</h2></summary>${children}</details>`;
}

// a table whose columns are [{key, label, sort (API sort field or false), render(row), cls}];
// sorting is done by the API: clicking a header changes the route's ?sort= and sort_reverse
export function Table({ columns, rows, rowKey, sort, reverse, onSort, empty = 'Nothing to show.', caption }) {
  if (!rows) return null;
  return html`
    <div class="table-wrap">
    <table>
      ${caption ? html`<caption class="sr-only">${caption}</caption>` : null}
      <thead><tr>
        ${columns.map((c) => {
          const active = onSort && c.sort && sort === c.sort;
          const ariaSort = active ? (reverse ? 'descending' : 'ascending') : undefined;
          return html`<th key=${c.key} class=${c.cls || ''} aria-sort=${ariaSort} scope="col">
            ${onSort && c.sort ? html`<button type="button" class="sort" onClick=${() => onSort(c.sort)}
                title=${`Sort by ${c.label}`}>${c.label}<span aria-hidden="true">${active ? (reverse ? ' ▼' : ' ▲') : ''}</span></button>`
              : c.label}</th>`;
        })}
      </tr></thead>
      <tbody>
        ${rows.length === 0 ? html`<tr><td colspan=${columns.length} class="muted">${empty}</td></tr>`
          : rows.map((r, i) => html`<tr key=${rowKey ? rowKey(r) : i}>
            ${columns.map((c) => html`<td key=${c.key} class=${c.cls || ''}>${c.render ? c.render(r) : r[c.key]}</td>`)}
          </tr>`)}
      </tbody>
    </table>
    </div>`;
}

// RabbitMQ's pagination object -> page links, page size, filter box with regex switch; state in the route
export function ListControls({ route, paged, label }) {
  const q = route.query;
  const [name, setName] = useState(q.name || '');
  const timer = useRef(null);
  useEffect(() => setName(q.name || ''), [q.name]);
  const go = (changes, replace = false) => {
    const next = hashWith(route.path, { ...q, ...changes });
    if (replace) history.replaceState(null, '', next); else history.pushState(null, '', next);
    window.dispatchEvent(new HashChangeEvent('hashchange'));
  };
  const onFilter = (e) => {
    const value = e.target.value;
    setName(value);
    clearTimeout(timer.current);
    timer.current = setTimeout(() => go({ name: value, page: 1 }, true), 300);
  };
  const page = paged ? paged.page : 1;
  const pages = paged ? Math.max(1, paged.page_count) : 1;
  return html`
    <div class="list-controls">
      <form class="filter" role="search" onSubmit=${(e) => { e.preventDefault(); clearTimeout(timer.current); go({ name, page: 1 }); }}>
        <label for="filter-name">Filter ${label}</label>
        <input id="filter-name" type="search" value=${name} onInput=${onFilter} placeholder="name contains…" autocomplete="off" />
        <label class="check"><input type="checkbox" checked=${q.regex === 'true'}
          onChange=${(e) => go({ regex: e.target.checked ? 'true' : '', page: 1 })} /> Regex</label>
      </form>
      <nav class="pager" aria-label=${`${label} pages`}>
        <button type="button" disabled=${page <= 1} onClick=${() => go({ page: page - 1 })}>‹ Previous</button>
        <label>Page <select value=${page} onChange=${(e) => go({ page: e.target.value })}>
          ${Array.from({ length: Math.min(pages, 1000) }, (_, i) => html`<option value=${i + 1}>${i + 1}</option>`)}
        </select> of ${pages}</label>
        <button type="button" disabled=${page >= pages} onClick=${() => go({ page: page + 1 })}>Next ›</button>
        <label>Page size <select value=${q.page_size || '100'} onChange=${(e) => go({ page_size: e.target.value, page: 1 })}>
          ${['20', '50', '100', '500'].map((s) => html`<option value=${s}>${s}</option>`)}
        </select></label>
      </nav>
      ${paged ? html`<p class="count" role="status">${paged.filtered_count === paged.total_count
        ? `${paged.total_count.toLocaleString('en-US')} ${label}`
        : `${paged.filtered_count.toLocaleString('en-US')} of ${paged.total_count.toLocaleString('en-US')} ${label} match`}</p>` : null}
    </div>`;
}

// the API query of a paged list from the route (?page, page_size, name, regex, sort, rev)
export function listQuery(route, defaultSort = 'name') {
  const q = route.query;
  const p = new URLSearchParams({
    page: q.page || '1', page_size: q.page_size || '100', name: q.name || '',
    use_regex: q.regex === 'true' ? 'true' : 'false', pagination: 'true',
  });
  const sort = q.sort || defaultSort;
  if (sort) p.set('sort', sort);
  p.set('sort_reverse', q.rev === 'true' ? 'true' : 'false');
  return p.toString();
}

export function sorter(route) {
  return (field) => {
    const q = route.query;
    const rev = (q.sort || 'name') === field ? q.rev !== 'true' : false;
    location.hash = hashWith(route.path, { ...q, sort: field, rev: rev ? 'true' : '' }).slice(1);
  };
}

let idCounter = 0;
export function useId(prefix) {
  const ref = useRef(null);
  if (ref.current === null) ref.current = `${prefix}-${++idCounter}`;
  return ref.current;
}

// a labelled input; `as` 'select' with `options` [[value, label]], 'textarea', or an input type
export function Field({ label, name, value, onInput, as = 'text', options, required, hint, ...rest }) {
  const id = useId(name || 'field');
  const hintId = hint ? id + '-hint' : undefined;
  let control;
  if (as === 'select') {
    control = html`<select id=${id} name=${name} value=${value} onChange=${(e) => onInput(e.target.value)} ...${rest}>
      ${options.map(([v, l]) => html`<option value=${v}>${l}</option>`)}</select>`;
  } else if (as === 'textarea') {
    control = html`<textarea id=${id} name=${name} value=${value} onInput=${(e) => onInput(e.target.value)}
      required=${required} aria-describedby=${hintId} ...${rest}></textarea>`;
  } else if (as === 'checkbox') {
    return html`<div class="field field-check"><input id=${id} name=${name} type="checkbox" checked=${value}
      onChange=${(e) => onInput(e.target.checked)} ...${rest} /><label for=${id}>${label}</label></div>`;
  } else {
    control = html`<input id=${id} name=${name} type=${as} value=${value} onInput=${(e) => onInput(e.target.value)}
      required=${required} aria-describedby=${hintId} ...${rest} />`;
  }
  return html`<div class=${required ? 'field required' : 'field'}><label for=${id}>${label}</label>
    ${control}${hint ? html`<small id=${hintId} class="hint">${hint}</small>` : null}</div>`;
}

// form state: [values, setter(name) -> (value) => ..., reset]
export function useForm(initial) {
  const [values, setValues] = useState(initial);
  const set = (name) => (v) => setValues((old) => ({ ...old, [name]: v }));
  return [values, set, () => setValues(initial), setValues];
}

// key / value / type rows -> an arguments or headers object (numbers and booleans typed)
export function ArgsEditor({ label, rows, setRows, suggestions = [] }) {
  const update = (i, field, v) => setRows(rows.map((r, j) => (j === i ? { ...r, [field]: v } : r)));
  const base = useId('args');
  const withBlank = rows.length === 0 || rows[rows.length - 1].key !== '' ? [...rows, { key: '', value: '', type: 'string' }] : rows;
  return html`
    <fieldset class="args">
      <legend>${label}</legend>
      ${withBlank.map((r, i) => html`<div class="args-row" key=${i}>
        <label class="sr-only" for=${`${base}-k${i}`}>${label} ${i + 1} name</label>
        <input id=${`${base}-k${i}`} placeholder="name" value=${r.key}
          onInput=${(e) => (i === rows.length ? setRows([...rows, { ...r, key: e.target.value }]) : update(i, 'key', e.target.value))} />
        <span aria-hidden="true">=</span>
        <label class="sr-only" for=${`${base}-v${i}`}>${label} ${i + 1} value</label>
        <input id=${`${base}-v${i}`} placeholder="value" value=${r.value}
          onInput=${(e) => (i === rows.length ? setRows([...rows, { ...r, value: e.target.value }]) : update(i, 'value', e.target.value))} />
        <label class="sr-only" for=${`${base}-t${i}`}>${label} ${i + 1} type</label>
        <select id=${`${base}-t${i}`} value=${r.type}
          onChange=${(e) => (i === rows.length ? setRows([...rows, { ...r, type: e.target.value }]) : update(i, 'type', e.target.value))}>
          <option value="string">String</option><option value="number">Number</option>
          <option value="boolean">Boolean</option><option value="list">List (JSON)</option>
        </select>
      </div>`)}
      ${suggestions.length ? html`<p class="suggest">Add:${' '}${suggestions.map(([k, t]) => html`<button type="button" class="link"
          onClick=${() => setRows([...rows.filter((r) => r.key !== ''), { key: k, value: '', type: t }])}>${k}</button>${' '}`)}</p>` : null}
    </fieldset>`;
}

export function argsObject(rows) {
  const out = {};
  for (const r of rows) {
    if (!r.key) continue;
    let v = r.value;
    if (r.type === 'number') {
      v = Number(r.value);
      if (r.value.trim() === '' || Number.isNaN(v)) throw new Error(`${r.key}: not a number`);
    } else if (r.type === 'boolean') {
      v = r.value.trim().toLowerCase() === 'true';
    } else if (r.type === 'list') {
      try { v = JSON.parse(r.value); } catch (e) { throw new Error(`${r.key}: not JSON`); }
    }
    out[r.key] = v;
  }
  return out;
}

export function KeyValues({ obj }) {
  const entries = Object.entries(obj || {});
  if (!entries.length) return html`<span class="muted">none</span>`;
  return html`<dl class="kv">${entries.map(([k, v]) => html`<div key=${k}><dt>${k}</dt><dd>${typeof v === 'object' ? JSON.stringify(v) : String(v)}</dd></div>`)}</dl>`;
}

// a definition list of [label, value] pairs
export function Facts({ items }) {
  return html`<dl class="facts">${items.filter((x) => x).map(([k, v]) => html`<div key=${k}><dt>${k}</dt><dd>${v}</dd></div>`)}</dl>`;
}

export function VhostSelect({ value, onInput, label = 'Virtual host', name = 'vhost' }) {
  const { vhosts } = useApp();
  return html`<${Field} label=${label} name=${name} as="select" value=${value} onInput=${onInput}
    options=${vhosts.map((v) => [v, v])} />`;
}
