// What every page shares: the logged-in user, the refresh tick, the chosen vhost, flash messages;
// and useApi, the one way a page reads the API (refetched at every tick, last answer kept).
import { createContext } from 'preact';
import { useCallback, useContext, useEffect, useRef, useState } from 'preact/hooks';
import { api } from './api.js';

export const AppContext = createContext(null);
export const useApp = () => useContext(AppContext);

// GET path (null: nothing) now, at every refresh tick and on reload(); the previous answer stays
// on screen while the next one is on its way, and a tick never starts a second call for the same page.
// A call that takes the broker long (a list over 10,000 queues on a busy machine) is repeated at
// most every BACKOFF times its duration, so a page left open never keeps the broker busy.
const BACKOFF = 10;

export function useApi(path, { refresh = true } = {}) {
  const { tick } = useApp();
  const [state, setState] = useState({ data: null, error: null, loading: !!path, path });
  const inFlight = useRef(false);
  const timing = useRef({ start: 0, took: 0 });
  const current = useRef(path);
  current.current = path;

  const load = useCallback(async (force) => {
    if (!path || (inFlight.current && !force)) return;
    const start = performance.now();
    if (!force && start - timing.current.start < timing.current.took * BACKOFF) return;
    inFlight.current = true;
    timing.current.start = start;
    try {
      const data = await api.get(path);
      if (current.current === path) setState({ data, error: null, loading: false, path });
    } catch (e) {
      if (current.current === path) setState((s) => ({ data: s.path === path ? s.data : null, error: e, loading: false, path }));
    } finally {
      inFlight.current = false;
      timing.current.took = performance.now() - start;
    }
  }, [path]);

  useEffect(() => {
    if (state.path !== path) setState({ data: null, error: null, loading: !!path, path });
    load(true);
  }, [path]);
  useEffect(() => { if (refresh && tick > 0) load(false); }, [tick]);

  const sameRoute = state.path === path;
  return { data: sameRoute ? state.data : null, error: sameRoute ? state.error : null,
    loading: !sameRoute || state.loading, reload: () => load(true) };
}

// run an action (a form's submit), report success or the API's reason through the flash area
export function useAction() {
  const { notify } = useApp();
  const [busy, setBusy] = useState(false);
  const run = useCallback(async (fn, success) => {
    setBusy(true);
    try {
      const out = await fn();
      if (success) notify('ok', typeof success === 'function' ? success(out) : success);
      return out === undefined || out === null ? true : out;
    } catch (e) {
      notify('error', e.message || String(e));
      return null;
    } finally {
      setBusy(false);
    }
  }, [notify]);
  return [run, busy];
}
