// Warren's management UI: login, layout, hash routes ("#/queues/%2F/orders"), the refresh tick.
import { render } from 'preact';
import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks';
import './app.css';
import { api, forget, hasCredentials, login, setLoggedOutHandler } from './api.js';
import { AppContext } from './state.js';
import { html, hasTag, parseHash } from './util.js';
import { Overview } from './pages/overview.js';
import { ChannelDetail, Channels, ConnectionDetail, Connections } from './pages/connections.js';
import { ExchangeDetail, Exchanges } from './pages/exchanges.js';
import { QueueDetail, Queues } from './pages/queues.js';
import { Definitions, Limits, Policies, UserDetail, Users, VhostDetail, Vhosts, adminPages } from './pages/admin.js';

const MANAGEMENT_TAGS = ['management', 'policymaker', 'monitoring', 'administrator'];
const REFRESH_CHOICES = [[0, 'Off'], [2, 'Every 2 seconds'], [5, 'Every 5 seconds'], [10, 'Every 10 seconds'], [30, 'Every 30 seconds'], [60, 'Every minute']];

function Login({ onLogin, message }) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState(message || '');
  const [busy, setBusy] = useState(false);
  const first = useRef(null);
  useEffect(() => { if (first.current) first.current.focus(); }, []);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    setError('');
    try {
      const who = await login(username, password);
      if (!hasTag(who, ...MANAGEMENT_TAGS)) {
        forget();
        setError('Not management user: this user has no management, policymaker, monitoring or administrator tag.');
      } else {
        onLogin(who);
      }
    } catch (err) {
      setError(err.status === 401 ? (err.message === 'Login failed' ? 'Login failed: wrong username or password.' : err.message) : err.message);
    } finally {
      setBusy(false);
    }
  };
  return html`
    <main class="login" id="main">
      <form onSubmit=${submit} aria-labelledby="login-title">
        <h1 id="login-title"><span class="logo" aria-hidden="true"></span>Warren</h1>
        <p class="muted">Log in with a broker user (tag management or above).</p>
        ${error ? html`<p class="error" role="alert">${error}</p>` : null}
        <div class="field"><label for="username">Username</label>
          <input id="username" name="username" ref=${first} autocomplete="username" value=${username} onInput=${(e) => setUsername(e.target.value)} required /></div>
        <div class="field"><label for="password">Password</label>
          <input id="password" name="password" type="password" autocomplete="current-password" value=${password} onInput=${(e) => setPassword(e.target.value)} /></div>
        <button type="submit" disabled=${busy}>Log in</button>
      </form>
    </main>`;
}

function route(segments, query, user) {
  const [top, a, b] = segments;
  const r = { path: '/' + segments.map(encodeURIComponent).join('/'), query, segments };
  const admin = adminPages(user).map(([k]) => k);
  switch (top) {
    case undefined: return ['overview', html`<${Overview} />`];
    case 'connections': return ['connections', a !== undefined ? html`<${ConnectionDetail} key=${a} name=${a} />` : html`<${Connections} route=${r} />`];
    case 'channels': return ['channels', a !== undefined ? html`<${ChannelDetail} key=${a} name=${a} />` : html`<${Channels} route=${r} />`];
    case 'exchanges': return ['exchanges', b !== undefined ? html`<${ExchangeDetail} key=${a + '/' + b} vhost=${a} name=${b} />` : html`<${Exchanges} route=${r} />`];
    case 'queues': return ['queues', b !== undefined ? html`<${QueueDetail} key=${a + '/' + b} vhost=${a} name=${b} />` : html`<${Queues} route=${r} />`];
    case 'admin': return admin.length ? ['admin', null, `#/${admin[0]}`] : ['notfound', null];
    default: break;
  }
  if (!admin.includes(top)) return ['notfound', null];
  const pages = {
    users: a !== undefined ? html`<${UserDetail} key=${a} name=${a} />` : html`<${Users} />`,
    vhosts: a !== undefined ? html`<${VhostDetail} key=${a} name=${a} />` : html`<${Vhosts} />`,
    policies: html`<${Policies} />`, limits: html`<${Limits} />`, definitions: html`<${Definitions} />`,
  };
  return ['admin', pages[top]];
}

function Flash({ items, dismiss }) {
  return html`<div class="flash" aria-live="polite" role="status">
    ${items.map((m) => html`<div key=${m.id} class=${`flash-item ${m.kind}`} role=${m.kind === 'error' ? 'alert' : undefined}>
      <span>${m.text}</span><button type="button" class="link" aria-label="Dismiss" onClick=${() => dismiss(m.id)}>×</button></div>`)}
  </div>`;
}

function App() {
  const [user, setUser] = useState(null);
  const [checking, setChecking] = useState(hasCredentials());
  const [loggedOutReason, setLoggedOutReason] = useState('');
  const [hash, setHash] = useState(location.hash);
  const [tick, setTick] = useState(0);
  const [refreshS, setRefreshS] = useState(() => Number(localStorage.getItem('warren.refresh') || 5));
  const [vhost, setVhost] = useState(() => sessionStorage.getItem('warren.vhost') || '');
  const [vhosts, setVhosts] = useState([]);
  const [overview, setOverview] = useState(null);
  const [flash, setFlash] = useState([]);
  const lastPath = useRef(null);

  useEffect(() => {
    setLoggedOutHandler((reason) => { setUser(null); setLoggedOutReason(`Logged out: ${reason}.`); });
    if (hasCredentials()) {
      api.get('/whoami').then((who) => setUser(who)).catch(() => forget()).finally(() => setChecking(false));
    }
    const onHash = () => setHash(location.hash);
    window.addEventListener('hashchange', onHash);
    window.addEventListener('popstate', onHash);
    return () => { window.removeEventListener('hashchange', onHash); window.removeEventListener('popstate', onHash); };
  }, []);

  // the refresh tick: every refreshS seconds while the tab is visible (a hidden tab asks nothing)
  useEffect(() => {
    if (!user || !refreshS) return undefined;
    const id = setInterval(() => { if (!document.hidden) setTick((t) => t + 1); }, refreshS * 1000);
    return () => clearInterval(id);
  }, [user, refreshS]);

  const reloadVhosts = useCallback(() => {
    api.get('/vhosts?columns=name').then((list) => setVhosts(list.map((v) => v.name))).catch(() => {});
  }, []);
  useEffect(() => {
    if (!user) return;
    reloadVhosts();
    api.get('/overview').then(setOverview).catch(() => {});
  }, [user]);

  const notify = useCallback((kind, text) => {
    const id = Math.random().toString(36).slice(2);
    setFlash((f) => [...f.slice(-3), { id, kind, text }]);
    setTimeout(() => setFlash((f) => f.filter((m) => m.id !== id)), kind === 'error' ? 12000 : 5000);
  }, []);
  const navigate = useCallback((to) => { location.hash = to; }, []);

  const { segments, query } = parseHash(hash);
  const [section, page, redirect] = user ? route(segments, query, user) : [null, null];
  useEffect(() => { if (redirect) location.replace(redirect); }, [redirect]);

  // a new page (not a refresh, not a new ?page=): focus its heading, as a page load would
  const pathKey = segments.join('/');
  useEffect(() => {
    if (!user || lastPath.current === pathKey) return;
    const first = lastPath.current === null;
    lastPath.current = pathKey;
    if (first) return;
    setTimeout(() => { const h1 = document.querySelector('main h1'); if (h1) h1.focus({ preventScroll: false }); }, 0);
  }, [pathKey, user]);

  const ctx = useMemo(() => ({ user, tick, vhost, vhosts, overview, notify, navigate, reloadVhosts }),
    [user, tick, vhost, vhosts, overview, notify, navigate, reloadVhosts]);

  if (checking) return html`<p class="muted" role="status">Loading…</p>`;
  if (!user) return html`<${Login} message=${loggedOutReason} onLogin=${(who) => { setLoggedOutReason(''); setUser(who); }} />`;

  const logout = () => { forget(); setUser(null); setLoggedOutReason(''); lastPath.current = null; };
  const tabs = [['overview', 'Overview', '#/'], ['connections', 'Connections', '#/connections'], ['channels', 'Channels', '#/channels'],
    ['exchanges', 'Exchanges', '#/exchanges'], ['queues', 'Queues and Streams', '#/queues']];
  if (adminPages(user).length) tabs.push(['admin', 'Admin', '#/admin']);
  return html`
    <${AppContext.Provider} value=${ctx}>
      <a class="skip" href="#main" onClick=${(e) => { e.preventDefault(); document.getElementById('main').focus(); }}>Skip to content</a>
      <header class="top">
        <a class="brand" href="#/"><span class="logo" aria-hidden="true"></span>Warren</a>
        <div class="top-info">
          ${overview ? html`<span title="Cluster">${overview.cluster_name}</span><span class="muted">${overview.product_name || 'Warren'} ${overview.product_version}</span>` : null}
        </div>
        <div class="top-controls">
          <label>Refresh <select value=${refreshS} onChange=${(e) => { const v = Number(e.target.value); setRefreshS(v); localStorage.setItem('warren.refresh', String(v)); }}>
            ${REFRESH_CHOICES.map(([v, l]) => html`<option value=${v}>${l}</option>`)}</select></label>
          <label>Virtual host <select value=${vhost} onChange=${(e) => { setVhost(e.target.value); sessionStorage.setItem('warren.vhost', e.target.value); }}>
            <option value="">All</option>${vhosts.map((v) => html`<option value=${v}>${v}</option>`)}</select></label>
          <span class="user">User <strong>${user.name}</strong> <span class="muted">(${user.tags.join(', ') || 'no tags'})</span></span>
          <button type="button" onClick=${logout}>Log out</button>
        </div>
        <nav class="tabs" aria-label="Main">
          ${tabs.map(([key, label, href]) => html`<a key=${key} href=${href} aria-current=${section === key ? 'page' : undefined}>${label}</a>`)}
        </nav>
      </header>
      <${Flash} items=${flash} dismiss=${(id) => setFlash((f) => f.filter((m) => m.id !== id))} />
      <main id="main" tabindex="-1">
        ${page || (redirect ? null : html`<h1 tabindex="-1">Not found</h1><p>No page at <code>${hash}</code>. <a href="#/">Overview</a></p>`)}
      </main>
      <footer class="foot">Warren management UI · <a href="static/licenses/README.txt">Third-party licences</a></footer>
    <//>`;
}

render(html`<${App} />`, document.getElementById('app'));
