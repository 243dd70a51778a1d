// The management API as the page calls it: HTTP basic auth of the logged-in user on every call,
// JSON in and out, RabbitMQ's {"error", "reason"} turned into an ApiError with that reason.

const STORAGE_KEY = 'warren.auth';

export class ApiError extends Error {
  constructor(status, reason) {
    super(reason);
    this.status = status;
  }
}

let credentials = sessionStorage.getItem(STORAGE_KEY); // "Basic ..." for this tab, gone when it closes
let onLoggedOut = () => {};

export function setLoggedOutHandler(fn) { onLoggedOut = fn; }

export function basicHeader(username, password) {
  const bytes = new TextEncoder().encode(`${username}:${password}`);
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return 'Basic ' + btoa(bin);
}

export function hasCredentials() { return !!credentials; }

export function forget() {
  credentials = null;
  sessionStorage.removeItem(STORAGE_KEY);
}

async function request(method, path, body, { auth = credentials, headers = {}, raw = false } = {}) {
  const h = { 'X-Requested-With': 'XMLHttpRequest', Accept: 'application/json', ...headers };
  if (auth) h.Authorization = auth;
  let payload;
  if (body !== undefined) {
    h['Content-Type'] = 'application/json';
    payload = typeof body === 'string' ? body : JSON.stringify(body);
  }
  // relative: the page may sit behind a proxy under a prefix
  const res = await fetch('api' + path, { method, headers: h, body: payload, cache: 'no-store', credentials: 'omit' });
  if (raw && res.ok) return res;
  const text = res.status === 204 ? '' : await res.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch (e) { data = text; }
  }
  if (!res.ok) {
    const reason = (data && data.reason) || (typeof data === 'string' && data) || res.statusText || `HTTP ${res.status}`;
    if (res.status === 401 && reason === 'Login failed' && auth === credentials && credentials) {
      forget(); // the password changed or the user is gone: back to the login form
      onLoggedOut(reason);
    }
    throw new ApiError(res.status, reason);
  }
  return data;
}

export const api = {
  get: (path, opts) => request('GET', path, undefined, opts),
  put: (path, body, opts) => request('PUT', path, body === undefined ? {} : body, opts),
  post: (path, body, opts) => request('POST', path, body === undefined ? {} : body, opts),
  del: (path, opts) => request('DELETE', path, undefined, opts),
  raw: (path) => request('GET', path, undefined, { raw: true }),
};

// log in: whoami with the given credentials; keeps them only when the user may use the UI
export async function login(username, password) {
  const auth = basicHeader(username, password);
  const who = await request('GET', '/whoami', undefined, { auth });
  credentials = auth;
  sessionStorage.setItem(STORAGE_KEY, auth);
  return who;
}
