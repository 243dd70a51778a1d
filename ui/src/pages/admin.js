// Admin: users (tags, passwords, permissions), virtual hosts (permissions, limits), policies,
// limits, definitions export and import. Administrators see all of it; policymakers the policies.
import { useState } from 'preact/hooks';
import { html, enc, fmtNum, fmtRate, hasTag, json, rate } from '../util.js';
import { api } from '../api.js';
import { useAction, useApi, useApp } from '../state.js';
import { ArgsEditor, ErrorBox, Facts, Field, KeyValues, Loading, Section, Table, VhostSelect, argsObject, useForm } from '../components.js';

export function adminPages(user) {
  const pages = [];
  if (hasTag(user, 'administrator')) pages.push(['users', 'Users'], ['vhosts', 'Virtual hosts']);
  if (hasTag(user, 'administrator', 'policymaker')) pages.push(['policies', 'Policies']);
  if (hasTag(user, 'administrator')) pages.push(['limits', 'Limits'], ['definitions', 'Definitions']);
  return pages;
}

export function AdminNav({ current }) {
  const { user } = useApp();
  return html`<nav class="subnav" aria-label="Admin">
    ${adminPages(user).map(([key, label]) => html`<a href=${`#/${key}`} aria-current=${current === key ? 'page' : undefined}>${label}</a>`)}
  </nav>`;
}

const TAGS = ['administrator', 'monitoring', 'policymaker', 'management', 'impersonator'];

function TagPicker({ value, onInput }) {
  const add = (t) => {
    const tags = value.split(',').map((s) => s.trim()).filter(Boolean);
    if (!tags.includes(t)) onInput([...tags, t].join(', '));
  };
  return html`<div class="field"><${Field} label="Tags" name="tags" value=${value} onInput=${onInput} hint="Comma-separated" />
    <p class="suggest">Set:${' '}${TAGS.map((t) => html`<button type="button" class="link" onClick=${() => add(t)}>${t}</button>${' '}`)}</p></div>`;
}

export function Users() {
  const users = useApi('/users');
  const perms = useApi('/permissions');
  const [f, set, reset] = useForm({ name: '', password: '', confirm: '', tags: '' });
  const [run, busy] = useAction();
  const { notify } = useApp();
  const submit = async (e) => {
    e.preventDefault();
    if (f.password !== f.confirm) { notify('error', 'The passwords do not match.'); return; }
    const body = { tags: f.tags };
    if (f.password === '') body.password_hash = ''; else body.password = f.password;
    if (await run(() => api.put(`/users/${enc(f.name)}`, body), `User ${f.name} added`)) { reset(); users.reload(); }
  };
  const access = (name) => (perms.data || []).filter((p) => p.user === name).map((p) => p.vhost).join(', ');
  return html`
    <h1 tabindex="-1">Users</h1><${AdminNav} current="users" />
    <${ErrorBox} error=${users.error} />
    ${users.data ? html`<${Table} caption="Users" rows=${users.data} rowKey=${(u) => u.name} columns=${[
      { key: 'name', label: 'Name', render: (u) => html`<a href=${`#/users/${enc(u.name)}`}>${u.name}</a>` },
      { key: 'tags', label: 'Tags', render: (u) => (Array.isArray(u.tags) ? u.tags.join(', ') : u.tags) },
      { key: 'vhosts', label: 'Can access virtual hosts', render: (u) => access(u.name) || html`<span class="muted">No access</span>` },
      { key: 'password', label: 'Has password', render: (u) => (u.password_hash ? '●' : '○') },
    ]} />` : html`<${Loading} />`}
    <${Section} title="Add a user" open=${false} id="add-user">
      <form onSubmit=${submit} class="grid-form" autocomplete="off">
        <${Field} label="Username" name="username" value=${f.name} onInput=${set('name')} required />
        <${Field} label="Password" name="password" as="password" value=${f.password} onInput=${set('password')} autocomplete="new-password"
          hint="Empty: no password (the user cannot log in with one)" />
        <${Field} label="Password (again)" name="confirm" as="password" value=${f.confirm} onInput=${set('confirm')} autocomplete="new-password" />
        <${TagPicker} value=${f.tags} onInput=${set('tags')} />
        <div class="form-actions"><button type="submit" disabled=${busy}>Add user</button></div>
      </form>
    <//>`;
}

function PermissionForm({ user, vhost, onDone }) {
  const { vhosts } = useApp();
  const users = useApi(user === undefined ? '/users' : null, { refresh: false });
  const [f, set] = useForm({ user: user || '', vhost: vhost || vhosts[0] || '/', configure: '.*', write: '.*', read: '.*' });
  const [run, busy] = useAction();
  const submit = async (e) => {
    e.preventDefault();
    const ok = await run(() => api.put(`/permissions/${enc(f.vhost)}/${enc(f.user)}`,
      { configure: f.configure, write: f.write, read: f.read }), `Permissions of ${f.user} in ${f.vhost} set`);
    if (ok) onDone();
  };
  const userList = users.data ? users.data.map((u) => [u.name, u.name]) : [];
  return html`<form onSubmit=${submit} class="grid-form" aria-label="Set permission">
    ${user === undefined ? html`<${Field} label="User" name="user" as="select" value=${f.user || (userList[0] || [''])[0]}
      onInput=${set('user')} options=${userList} />` : null}
    ${vhost === undefined ? html`<${VhostSelect} value=${f.vhost} onInput=${set('vhost')} />` : null}
    <${Field} label="Configure regexp" name="configure" value=${f.configure} onInput=${set('configure')} />
    <${Field} label="Write regexp" name="write" value=${f.write} onInput=${set('write')} />
    <${Field} label="Read regexp" name="read" value=${f.read} onInput=${set('read')} />
    <div class="form-actions"><button type="submit" disabled=${busy}
      onClick=${() => { if (user === undefined && !f.user && userList.length) set('user')(userList[0][0]); }}>Set permission</button></div>
  </form>`;
}

function PermissionsTable({ rows, by, onChange }) {
  const [run] = useAction();
  const clear = async (p) => {
    if (await run(() => api.del(`/permissions/${enc(p.vhost)}/${enc(p.user)}`), 'Permission cleared')) onChange();
  };
  return html`<${Table} caption="Permissions" rows=${rows} rowKey=${(p) => p.user + '@' + p.vhost} empty="No permissions." columns=${[
    by === 'user' ? { key: 'vhost', label: 'Virtual host', render: (p) => html`<a href=${`#/vhosts/${enc(p.vhost)}`}>${p.vhost}</a>` }
      : { key: 'user', label: 'User', render: (p) => html`<a href=${`#/users/${enc(p.user)}`}>${p.user}</a>` },
    { key: 'configure', label: 'Configure regexp', render: (p) => html`<code>${p.configure}</code>` },
    { key: 'write', label: 'Write regexp', render: (p) => html`<code>${p.write}</code>` },
    { key: 'read', label: 'Read regexp', render: (p) => html`<code>${p.read}</code>` },
    { key: 'clear', label: 'Action', render: (p) => html`<button type="button" class="small" onClick=${() => clear(p)}>Clear</button>` },
  ]} />`;
}

function TopicPermissions({ path, user, vhost, onChange }) {
  const tp = useApi(path);
  const [f, set] = useForm({ exchange: 'amq.topic', write: '.*', read: '.*' });
  const { vhosts } = useApp();
  const [v, setV] = useState(vhost || vhosts[0] || '/');
  const [run, busy] = useAction();
  const submit = async (e) => {
    e.preventDefault();
    if (await run(() => api.put(`/topic-permissions/${enc(vhost || v)}/${enc(user)}`, f), 'Topic permission set')) tp.reload();
  };
  const clear = async (p) => {
    if (await run(() => api.del(`/topic-permissions/${enc(p.vhost)}/${enc(p.user)}`), 'Topic permissions cleared')) tp.reload();
  };
  return html`
    ${tp.data ? html`<${Table} caption="Topic permissions" rows=${tp.data} rowKey=${(p) => p.user + p.vhost + p.exchange} empty="No topic permissions."
      columns=${[{ key: vhost ? 'user' : 'vhost', label: vhost ? 'User' : 'Virtual host' }, { key: 'exchange', label: 'Exchange' },
        { key: 'write', label: 'Write regexp' }, { key: 'read', label: 'Read regexp' },
        { key: 'clear', label: 'Action', render: (p) => html`<button type="button" class="small" onClick=${() => clear(p)}>Clear</button>` }]} />` : null}
    ${user !== undefined ? html`<form onSubmit=${submit} class="grid-form" aria-label="Set topic permission">
      ${vhost === undefined ? html`<${VhostSelect} value=${v} onInput=${setV} />` : null}
      <${Field} label="Exchange" name="exchange" value=${f.exchange} onInput=${set('exchange')} />
      <${Field} label="Write regexp" name="topic_write" value=${f.write} onInput=${set('write')} />
      <${Field} label="Read regexp" name="topic_read" value=${f.read} onInput=${set('read')} />
      <div class="form-actions"><button type="submit" disabled=${busy}>Set topic permission</button></div>
    </form>` : null}`;
}

export function UserDetail({ name }) {
  const { navigate, user: me } = useApp();
  const u = useApi(`/users/${enc(name)}`);
  const perms = useApi(`/users/${enc(name)}/permissions`);
  const [f, set] = useForm({ password: '', tags: null });
  const [run, busy] = useAction();
  const tags = f.tags !== null ? f.tags : u.data ? (Array.isArray(u.data.tags) ? u.data.tags.join(', ') : u.data.tags) : '';
  const update = async (e) => {
    e.preventDefault();
    const body = { tags };
    if (f.password) body.password = f.password; else body.password_hash = u.data.password_hash;
    if (await run(() => api.put(`/users/${enc(name)}`, body), `User ${name} updated`)) { set('password')(''); u.reload(); }
  };
  const remove = async (e) => {
    e.preventDefault();
    if (name === me.name && !confirm('This is the user you are logged in as. Delete it anyway?')) return;
    if (name !== me.name && !confirm(`Delete user ${name}?`)) return;
    if (await run(() => api.del(`/users/${enc(name)}`), `User ${name} deleted`)) navigate('#/users');
  };
  return html`
    <h1 tabindex="-1"><span class="kind">User</span> ${name}</h1><${AdminNav} current="users" />
    <${ErrorBox} error=${u.error} />
    ${!u.data ? (u.error ? null : html`<${Loading} />`) : html`
      <${Section} title="Overview"><${Facts} items=${[['Tags', tags || 'none'], ['Password', u.data.password_hash ? 'set' : 'none'],
        ['Hashing algorithm', u.data.hashing_algorithm]]} /><//>
      <${Section} title="Permissions">
        ${perms.data ? html`<${PermissionsTable} rows=${perms.data} by="user" onChange=${perms.reload} />` : html`<${Loading} />`}
        <h3>Set permission</h3><${PermissionForm} user=${name} onDone=${perms.reload} />
      <//>
      <${Section} title="Topic permissions" open=${false}>
        <${TopicPermissions} path=${`/users/${enc(name)}/topic-permissions`} user=${name} />
      <//>
      <${Section} title="Update this user" open=${false} id="update-user">
        <form onSubmit=${update} class="grid-form" autocomplete="off">
          <${Field} label="New password" name="password" as="password" value=${f.password} onInput=${set('password')}
            autocomplete="new-password" hint="Empty: keep the current password" />
          <${TagPicker} value=${tags} onInput=${set('tags')} />
          <div class="form-actions"><button type="submit" disabled=${busy}>Update user</button></div>
        </form>
      <//>
      <${Section} title="Delete this user" open=${false} id="delete">
        <form onSubmit=${remove} class="inline-form"><button type="submit" class="danger" disabled=${busy}>Delete</button></form>
      <//>`}`;
}

export function Vhosts() {
  const { reloadVhosts } = useApp();
  const list = useApi('/vhosts');
  const [f, set, reset] = useForm({ name: '', description: '', tags: '', default_queue_type: 'classic' });
  const [run, busy] = useAction();
  const submit = async (e) => {
    e.preventDefault();
    const body = { description: f.description, tags: f.tags, default_queue_type: f.default_queue_type };
    if (await run(() => api.put(`/vhosts/${enc(f.name)}`, body), `Virtual host ${f.name} added`)) { reset(); list.reload(); reloadVhosts(); }
  };
  return html`
    <h1 tabindex="-1">Virtual hosts</h1><${AdminNav} current="vhosts" />
    <${ErrorBox} error=${list.error} />
    ${list.data ? html`<${Table} caption="Virtual hosts" rows=${list.data} rowKey=${(v) => v.name} columns=${[
      { key: 'name', label: 'Name', render: (v) => html`<a href=${`#/vhosts/${enc(v.name)}`}>${v.name}</a>` },
      { key: 'description', label: 'Description' },
      { key: 'tags', label: 'Tags', render: (v) => (Array.isArray(v.tags) ? v.tags.join(', ') : v.tags) },
      { key: 'ready', label: 'Ready', cls: 'num', render: (v) => fmtNum(v.messages_ready || 0) },
      { key: 'unacked', label: 'Unacked', cls: 'num', render: (v) => fmtNum(v.messages_unacknowledged || 0) },
      { key: 'total', label: 'Total', cls: 'num', render: (v) => fmtNum(v.messages || 0) },
      { key: 'publish', label: 'Publish', cls: 'num', render: (v) => fmtRate(rate(v, 'publish') || 0) },
      { key: 'deliver', label: 'Deliver / get', cls: 'num', render: (v) => fmtRate(rate(v, 'deliver_get') || 0) },
    ]} />` : html`<${Loading} />`}
    <${Section} title="Add a new virtual host" open=${false} id="add-vhost">
      <form onSubmit=${submit} class="grid-form">
        <${Field} label="Name" name="vhost_name" value=${f.name} onInput=${set('name')} required />
        <${Field} label="Description" name="description" value=${f.description} onInput=${set('description')} />
        <${Field} label="Tags" name="vhost_tags" value=${f.tags} onInput=${set('tags')} hint="Comma-separated" />
        <${Field} label="Default queue type" name="default_queue_type" as="select" value=${f.default_queue_type}
          onInput=${set('default_queue_type')} options=${[['classic', 'Classic'], ['quorum', 'Quorum'], ['stream', 'Stream']]} />
        <div class="form-actions"><button type="submit" disabled=${busy}>Add virtual host</button></div>
      </form>
    <//>`;
}

function LimitsEditor({ vhost, onChange }) {
  const limits = useApi(`/vhost-limits/${enc(vhost)}`);
  const [f, set] = useForm({ name: 'max-connections', value: '' });
  const [run, busy] = useAction();
  const current = (limits.data && limits.data[0] && limits.data[0].value) || {};
  const submit = async (e) => {
    e.preventDefault();
    if (await run(() => api.put(`/vhost-limits/${enc(vhost)}/${f.name}`, { value: Number(f.value) }), `Limit ${f.name} set`)) {
      limits.reload(); if (onChange) onChange();
    }
  };
  const clear = async (name) => {
    if (await run(() => api.del(`/vhost-limits/${enc(vhost)}/${name}`), `Limit ${name} cleared`)) {
      limits.reload(); if (onChange) onChange();
    }
  };
  return html`
    <${Table} caption="Limits" rows=${Object.entries(current)} rowKey=${(r) => r[0]} empty="No limits." columns=${[
      { key: 'name', label: 'Limit', render: (r) => r[0] }, { key: 'value', label: 'Value', cls: 'num', render: (r) => fmtNum(r[1]) },
      { key: 'clear', label: 'Action', render: (r) => html`<button type="button" class="small" onClick=${() => clear(r[0])}>Clear</button>` }]} />
    <form onSubmit=${submit} class="grid-form" aria-label="Set limit">
      <${Field} label="Limit" name="limit_name" as="select" value=${f.name} onInput=${set('name')}
        options=${[['max-connections', 'max-connections'], ['max-queues', 'max-queues']]} />
      <${Field} label="Value" name="limit_value" as="number" min="-1" value=${f.value} onInput=${set('value')} required hint="-1: no limit" />
      <div class="form-actions"><button type="submit" disabled=${busy}>Set limit</button></div>
    </form>`;
}

export function VhostDetail({ name }) {
  const { navigate, reloadVhosts } = useApp();
  const v = useApi(`/vhosts/${enc(name)}`);
  const perms = useApi(`/vhosts/${enc(name)}/permissions`);
  const [run, busy] = useAction();
  const remove = async (e) => {
    e.preventDefault();
    if (!confirm(`Delete virtual host ${name} with all its queues, exchanges and messages?`)) return;
    if (await run(() => api.del(`/vhosts/${enc(name)}`), `Virtual host ${name} deleted`)) { reloadVhosts(); navigate('#/vhosts'); }
  };
  return html`
    <h1 tabindex="-1"><span class="kind">Virtual host</span> ${name}</h1><${AdminNav} current="vhosts" />
    <${ErrorBox} error=${v.error} />
    ${!v.data ? (v.error ? null : html`<${Loading} />`) : html`
      <${Section} title="Overview"><${Facts} items=${[['Description', v.data.description || ''],
        ['Tags', (Array.isArray(v.data.tags) ? v.data.tags.join(', ') : v.data.tags) || ''],
        ['Default queue type', !v.data.default_queue_type || v.data.default_queue_type === 'undefined' ? 'classic' : v.data.default_queue_type], ['Messages', fmtNum(v.data.messages || 0)],
        ['Queues', html`<a href=${`#/queues`}>list</a>`]]} /><//>
      <${Section} title="Permissions">
        ${perms.data ? html`<${PermissionsTable} rows=${perms.data} by="vhost" onChange=${perms.reload} />` : html`<${Loading} />`}
        <h3>Set permission</h3><${PermissionForm} vhost=${name} onDone=${perms.reload} />
      <//>
      <${Section} title="Topic permissions" open=${false}>
        <${TopicPermissions} path=${`/vhosts/${enc(name)}/topic-permissions`} vhost=${name} />
      <//>
      <${Section} title="Limits"><${LimitsEditor} vhost=${name} /><//>
      <${Section} title="Delete this virtual host" open=${false} id="delete">
        <form onSubmit=${remove} class="inline-form"><button type="submit" class="danger" disabled=${busy}>Delete</button></form>
      <//>`}`;
}

const POLICY_KEYS = [['message-ttl', 'number'], ['expires', 'number'], ['max-length', 'number'], ['max-length-bytes', 'number'],
  ['overflow', 'string'], ['dead-letter-exchange', 'string'], ['dead-letter-routing-key', 'string'], ['max-priority', 'number'],
  ['alternate-exchange', 'string'], ['queue-mode', 'string'], ['delivery-limit', 'number'], ['max-age', 'string']];

export function Policies() {
  const { vhost } = useApp();
  const list = useApi(vhost ? `/policies/${enc(vhost)}` : '/policies');
  const app = useApp();
  const [f, set, reset, setAll] = useForm({ vhost: app.vhost || app.vhosts[0] || '/', name: '', pattern: '', 'apply-to': 'all', priority: '0' });
  const [defs, setDefs] = useState([]);
  const [run, busy] = useAction();
  const submit = async (e) => {
    e.preventDefault();
    const ok = await run(() => api.put(`/policies/${enc(f.vhost)}/${enc(f.name)}`, {
      pattern: f.pattern, 'apply-to': f['apply-to'], priority: Number(f.priority), definition: argsObject(defs),
    }), `Policy ${f.name} set`);
    if (ok) { reset(); setDefs([]); list.reload(); }
  };
  const remove = async (p) => {
    if (!confirm(`Delete policy ${p.name}?`)) return;
    if (await run(() => api.del(`/policies/${enc(p.vhost)}/${enc(p.name)}`), `Policy ${p.name} deleted`)) list.reload();
  };
  const edit = (p) => {
    setAll({ vhost: p.vhost, name: p.name, pattern: p.pattern, 'apply-to': p['apply-to'], priority: String(p.priority) });
    setDefs(Object.entries(p.definition).map(([key, value]) => ({ key, value: typeof value === 'object' ? json(value) : String(value),
      type: typeof value === 'number' ? 'number' : typeof value === 'boolean' ? 'boolean' : typeof value === 'object' ? 'list' : 'string' })));
    const form = document.getElementById('add-policy');
    if (form) { form.open = true; form.querySelector('input').focus(); }
  };
  return html`
    <h1 tabindex="-1">Policies</h1><${AdminNav} current="policies" />
    <${ErrorBox} error=${list.error} />
    ${list.data ? html`<${Table} caption="Policies" rows=${list.data} rowKey=${(p) => p.vhost + '/' + p.name} empty="No policies." columns=${[
      { key: 'vhost', label: 'Virtual host' }, { key: 'name', label: 'Name' },
      { key: 'pattern', label: 'Pattern', render: (p) => html`<code>${p.pattern}</code>` }, { key: 'apply-to', label: 'Apply to' },
      { key: 'definition', label: 'Definition', render: (p) => html`<${KeyValues} obj=${p.definition} />` },
      { key: 'priority', label: 'Priority', cls: 'num' },
      { key: 'action', label: 'Action', render: (p) => html`<button type="button" class="small" onClick=${() => edit(p)}>Edit</button>
        ${' '}<button type="button" class="small danger" onClick=${() => remove(p)}>Delete</button>` },
    ]} />` : html`<${Loading} />`}
    <${Section} title="Add / update a policy" open=${false} id="add-policy">
      <form onSubmit=${submit} class="grid-form">
        <${VhostSelect} value=${f.vhost} onInput=${set('vhost')} />
        <${Field} label="Name" name="policy_name" value=${f.name} onInput=${set('name')} required />
        <${Field} label="Pattern" name="pattern" value=${f.pattern} onInput=${set('pattern')} required hint="A regular expression matched against names" />
        <${Field} label="Apply to" name="apply_to" as="select" value=${f['apply-to']} onInput=${set('apply-to')}
          options=${[['all', 'Exchanges and queues'], ['exchanges', 'Exchanges'], ['queues', 'Queues']]} />
        <${Field} label="Priority" name="priority" as="number" value=${f.priority} onInput=${set('priority')} />
        <${ArgsEditor} label="Definition" rows=${defs} setRows=${setDefs} suggestions=${POLICY_KEYS} />
        <div class="form-actions"><button type="submit" disabled=${busy}>Add / update policy</button></div>
      </form>
    <//>`;
}

export function Limits() {
  const limits = useApi('/vhost-limits');
  const userLimits = useApi('/user-limits');
  const [vh, setVh] = useState(null);
  const { vhosts } = useApp();
  const chosen = vh || vhosts[0] || '/';
  return html`
    <h1 tabindex="-1">Limits</h1><${AdminNav} current="limits" />
    <${Section} title="Virtual host limits">
      <${ErrorBox} error=${limits.error} />
      ${limits.data ? html`<${Table} caption="Virtual host limits" rows=${limits.data} rowKey=${(l) => l.vhost} empty="No limits set." columns=${[
        { key: 'vhost', label: 'Virtual host', render: (l) => html`<a href=${`#/vhosts/${enc(l.vhost)}`}>${l.vhost}</a>` },
        { key: 'value', label: 'Limits', render: (l) => html`<${KeyValues} obj=${l.value} />` }]} />` : html`<${Loading} />`}
      <h3>Set or clear a limit</h3>
      <div class="grid-form"><${VhostSelect} value=${chosen} onInput=${setVh} /></div>
      <${LimitsEditor} key=${chosen} vhost=${chosen} onChange=${limits.reload} />
    <//>
    <${Section} title="User limits">
      ${userLimits.data ? html`<${Table} caption="User limits" rows=${userLimits.data} rowKey=${(l) => l.user} empty="No user limits set." columns=${[
        { key: 'user', label: 'User' }, { key: 'value', label: 'Limits', render: (l) => html`<${KeyValues} obj=${l.value} />` }]} />`
        : userLimits.error ? html`<${ErrorBox} error=${userLimits.error} />` : html`<${Loading} />`}
    <//>`;
}

export function Definitions() {
  const { vhosts, notify } = useApp();
  const [vh, setVh] = useState('');
  const [file, setFile] = useState(null);
  const [importVh, setImportVh] = useState('');
  const [run, busy] = useAction();
  const download = async (e) => {
    e.preventDefault();
    const data = await run(() => api.get(vh ? `/definitions/${enc(vh)}` : '/definitions'));
    if (!data) return;
    const blob = new Blob([JSON.stringify(data, null, 2) + '\n'], { type: 'application/json' });
    const a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    const stamp = new Date().toISOString().slice(0, 10);
    a.download = `warren-definitions${vh ? '-' + vh.replace(/[^A-Za-z0-9_-]/g, '_') : ''}-${stamp}.json`;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
    notify('ok', 'Definitions exported.');
  };
  const upload = async (e) => {
    e.preventDefault();
    if (!file) { notify('error', 'Choose a definitions file first.'); return; }
    let text;
    try { text = await file.text(); } catch (err) { notify('error', `${file.name} cannot be read: ${err.message}`); return; }
    try { JSON.parse(text); } catch (err) { notify('error', `${file.name} is not JSON: ${err.message}`); return; }
    await run(() => api.post(importVh ? `/definitions/${enc(importVh)}` : '/definitions', text), `Definitions imported from ${file.name}.`);
  };
  const options = [['', 'All'], ...vhosts.map((v) => [v, v])];
  return html`
    <h1 tabindex="-1">Definitions</h1><${AdminNav} current="definitions" />
    <p class="hint">Definitions are users, virtual hosts, permissions, policies, parameters, queues, exchanges and bindings,
      in RabbitMQ's JSON format (a file exported from RabbitMQ imports here, and the reverse). Messages are not included.</p>
    <div class="detail-grid">
      <${Section} title="Export definitions">
        <form onSubmit=${download} class="grid-form">
          <${Field} label="Virtual host" name="export_vhost" as="select" value=${vh} onInput=${setVh} options=${options} />
          <div class="form-actions"><button type="submit" disabled=${busy}>Download definitions</button></div>
        </form>
      <//>
      <${Section} title="Import definitions">
        <form onSubmit=${upload} class="grid-form">
          <div class="field"><label for="import-file">Definitions file</label>
            <input id="import-file" type="file" accept=".json,application/json" onChange=${(e) => setFile(e.target.files[0] || null)} /></div>
          <${Field} label="Virtual host" name="import_vhost" as="select" value=${importVh} onInput=${setImportVh} options=${options} />
          <div class="form-actions"><button type="submit" disabled=${busy}>Upload definitions</button></div>
        </form>
      <//>
    </div>`;
}
