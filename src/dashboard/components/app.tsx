import { useCallback, useEffect, useState } from 'preact/hooks';
import { ApiError, fetchStatus } from '../api.ts';
import { formatDuration } from '../format.ts';
import type { Status } from '../../contract/status.ts';
import type { TagQuery } from '../status-types.ts';
import { ServerPanel } from './server-panel.tsx';
import { SnowflakePanel } from './snowflake-panel.tsx';
import { TagsPanel } from './tags-panel.tsx';
import { TokenForm } from './token-form.tsx';

/** How often the page reads GET /v1/status. */
const POLL_MS = 1500;
/** The token lives for the tab's session only: it is a credential. */
const TOKEN_KEY = 'idmint.token';
const THEME_KEY = 'idmint.theme';
const DEFAULT_QUERY: TagQuery = {
  q: '',
  sort: 'tag',
  order: 'asc',
  offset: 0,
  limit: 50,
  tags: 'all',
};

export type Theme = 'system' | 'light' | 'dark';
const THEMES: readonly Theme[] = ['system', 'light', 'dark'];

function stored(storage: Storage, key: string): string | null {
  try {
    return storage.getItem(key);
  } catch {
    return null; // storage can be off (private modes, policies): the page works without it
  }
}

function store(storage: Storage, key: string, value: string | null): void {
  try {
    if (value === null) storage.removeItem(key);
    else storage.setItem(key, value);
  } catch {
    // as above
  }
}

/** Whether the server has auth on: it says so in the page's HTML (routes/dashboard.ts). */
function authOn(): boolean {
  return document.querySelector('meta[name="idmint-auth"]')?.getAttribute('content') === 'on';
}

export function App() {
  const [token, setToken] = useState(() => stored(sessionStorage, TOKEN_KEY) ?? '');
  const [theme, setTheme] = useState<Theme>(() => {
    const saved = stored(localStorage, THEME_KEY);
    return THEMES.includes(saved as Theme) ? (saved as Theme) : 'system';
  });
  const [query, setQuery] = useState<TagQuery>(DEFAULT_QUERY);
  const [status, setStatus] = useState<Status | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [updatedAt, setUpdatedAt] = useState<Date | null>(null);
  const [reloads, setReloads] = useState(0);
  const reload = useCallback(() => setReloads((n) => n + 1), []);

  useEffect(() => {
    if (theme === 'system') delete document.documentElement.dataset['theme'];
    else document.documentElement.dataset['theme'] = theme;
    store(localStorage, THEME_KEY, theme === 'system' ? null : theme);
  }, [theme]);

  // Reads the status now and then every POLL_MS; a new token or query starts over at once.
  useEffect(() => {
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    // With auth on and no token, nothing is asked: the token form shows at once.
    if (token === '' && authOn()) {
      setStatus(null);
      setError(new ApiError(401, 'UNAUTHORIZED', 'this server requires a bearer token'));
      return;
    }
    const load = async () => {
      if (!document.hidden) {
        try {
          const next = await fetchStatus(token, query, controller.signal);
          setStatus(next);
          setError(null);
          setUpdatedAt(new Date());
        } catch (caught) {
          if (controller.signal.aborted) return;
          const failure =
            caught instanceof ApiError ? caught : new ApiError(0, 'NETWORK', String(caught));
          setError(failure);
          // Without a valid token nothing the API would refuse stays on the page.
          if (failure.status === 401 || failure.status === 403) setStatus(null);
        }
      }
      if (!controller.signal.aborted) timer = setTimeout(load, POLL_MS);
    };
    void load();
    return () => {
      controller.abort();
      clearTimeout(timer);
    };
  }, [token, query, reloads]);

  const signIn = (value: string) => {
    store(sessionStorage, TOKEN_KEY, value === '' ? null : value);
    setStatus(null);
    setError(null);
    setToken(value);
  };
  const needsToken = error !== null && (error.status === 401 || error.status === 403);

  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <h1>
          idmint <span class="muted">dashboard</span>
        </h1>
        <div class="top-meta" aria-live="off">
          {status !== null && (
            <>
              <span>v{status.version}</span>
              <span>up {formatDuration(status.uptimeSeconds)}</span>
              {status.auth.enabled && (
                <span class="badge">{status.auth.admin ? 'admin token' : 'token'}</span>
              )}
            </>
          )}
          <span
            class={`live ${error === null && status !== null ? 'ok' : 'stale'}`}
            title={
              updatedAt === null ? 'not updated yet' : `updated ${updatedAt.toLocaleTimeString()}`
            }
          >
            {error === null && status !== null ? 'live' : 'not live'}
          </span>
        </div>
        <div class="top-actions">
          <label class="theme">
            <span class="visually-hidden">Theme</span>
            <select
              value={theme}
              onChange={(event) =>
                setTheme((event.currentTarget as HTMLSelectElement).value as Theme)
              }
            >
              <option value="system">System theme</option>
              <option value="light">Light</option>
              <option value="dark">Dark</option>
            </select>
          </label>
          {token !== '' && (
            <button type="button" onClick={() => signIn('')}>
              Forget token
            </button>
          )}
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        {needsToken ? (
          <TokenForm error={error} hadToken={token !== ''} onSubmit={signIn} />
        ) : (
          <>
            {error !== null && (
              <p class="banner error" role="alert">
                Could not read the status: {error.code}: {error.message}. Retrying every{' '}
                {POLL_MS / 1000} s.
              </p>
            )}
            {status === null ? (
              error === null && <p class="muted loading">Loading…</p>
            ) : (
              <>
                <div class="panels">
                  <ServerPanel server={status.server} theme={theme} />
                  {status.snowflake === null ? (
                    <section class="panel" aria-labelledby="snowflake-title">
                      <h2 id="snowflake-title">Snowflake</h2>
                      <p class="muted">Snowflake mode is off on this server.</p>
                    </section>
                  ) : (
                    <SnowflakePanel snowflake={status.snowflake} theme={theme} />
                  )}
                </div>
                {status.segment === null ? (
                  <section class="panel" aria-labelledby="tags-title">
                    <h2 id="tags-title">Tags</h2>
                    <p class="muted">Segment mode is off on this server.</p>
                  </section>
                ) : (
                  <TagsPanel
                    segment={status.segment}
                    query={query}
                    onQuery={setQuery}
                    admin={status.auth.admin}
                    token={token}
                    onChanged={reload}
                  />
                )}
              </>
            )}
          </>
        )}
      </main>
    </>
  );
}
