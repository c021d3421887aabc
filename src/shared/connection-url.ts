// Connection URLs as operators write them (IDMINT_SEGMENT_STORE, IDMINT_WORKER_REGISTRY,
// `--store`), taken apart and redacted. Nothing here knows a backend: which schemes exist, what
// each URL form means and which roles it plays are told by the backends themselves
// (src/backends/), which read their URLs through {@link splitUrl}. A password never reaches a
// message or a log: {@link redactUrl} hides it.
//
// Passwords are read as users paste them: percent-encoded (`p%40ss`) or raw, even with `@`, `/`,
// `:`, `?` or `#` inside (`postgres://idmint:p@ss/w0rd@db:5432/ids`). Drivers get the parts, or a
// URL rebuilt by {@link buildUrl} with every part encoded, never the raw string.

/** One host of a URL. `host` is as written, IPv6 addresses without their brackets. */
export interface UrlHost {
  readonly host: string;
  /** Absent when the URL gives none (the backend's default port applies). */
  readonly port?: number;
}

/** Credentials of a URL, percent-decoded. */
export interface UrlCredentials {
  readonly user?: string;
  readonly password?: string;
}

/** How a backend's `scheme://` URLs are laid out, for {@link splitUrl} and {@link redactUrl}. */
export interface UrlShape {
  /**
   * What must follow the hosts (`database`, `name`), or undefined when a path is optional.
   * A raw password may hold `/`, so this tells which `@` ends it.
   */
  readonly pathNames?: string;
  /** True when the hosts may be empty, the query naming one (PostgreSQL's `?host=/run/...`). */
  readonly hostInQuery?: boolean;
}

/** Why a URL is refused: one clause, no value in it. */
export interface UrlRefusal {
  readonly refused: string;
  /**
   * False when the clause says what is allowed itself (a port out of range, a Redis database
   * above 15); otherwise the accepted forms follow it in the message.
   */
  readonly showForms: boolean;
}

/** A refusal whose message is followed by the accepted forms. */
export function refuse(refused: string): UrlRefusal {
  return { refused, showForms: true };
}

/** True when `value` is a refusal rather than what was parsed. */
export function isRefusal(value: unknown): value is UrlRefusal {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { refused?: unknown }).refused === 'string'
  );
}

/** A `scheme://[userinfo@]host[:port][,host...][/path][?query]` URL in parts. */
export interface UrlParts extends UrlCredentials {
  /** Lower-case, without the `:`. */
  readonly scheme: string;
  /** True when the URL has a userinfo part (`user:password@`), even an empty one. */
  readonly hasUserinfo: boolean;
  readonly hosts: readonly UrlHost[];
  /** As written: '' or `/...` (decode its parts with {@link decodeUrlPart}). */
  readonly path: string;
  /** As written, without `?` ('' when none). */
  readonly query: string;
}

/** The scheme of `url`, lower-case without its `:`, or undefined when it has none. */
export function urlScheme(url: unknown): string | undefined {
  if (typeof url !== 'string') return undefined;
  return /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase();
}

/**
 * `url` (a `scheme://` URL) in parts, or why it cannot be read. Refuses a URL not starting with
 * `scheme://`, a malformed host or a port outside 1 to 65535.
 */
export function splitUrl(url: string, shape: UrlShape = {}): UrlParts | UrlRefusal {
  const scheme = urlScheme(url) ?? '';
  const body = url.slice(scheme.length + 1);
  if (!body.startsWith('//')) return refuse(`must start with ${scheme}://`);
  const rest = body.slice(2);
  const split = splitAuthority(rest, shape);
  if (split === undefined)
    return refuse(
      `is not a ${scheme}:// URL: ${
        shape.pathNames === undefined
          ? `${scheme}://host[:port][/database]`
          : `${scheme}://host[:port]/<${shape.pathNames}>`
      }`,
    );
  const hosts = parseHosts(split.hosts);
  if (isRefusal(hosts)) return hosts;
  const credentials = split.at < 0 ? {} : parseUserinfo(rest.slice(0, split.at));
  return {
    scheme,
    hasUserinfo: split.at >= 0,
    ...credentials,
    hosts,
    path: split.path,
    query: split.query,
  };
}

/** The parts of a URL to rebuild for a driver (pg, mysql2): see {@link buildUrl}. */
export interface UrlToBuild extends UrlCredentials {
  readonly scheme: string;
  readonly host: UrlHost;
  /** One path segment, encoded here. */
  readonly path: string;
  /** Appended as written after `?` (already a query string); '' for none. */
  readonly query: string;
}

/**
 * A URL with every part percent-encoded, so a password with `@`, `/` or `%` in it reaches the
 * driver as written.
 */
export function buildUrl(parts: UrlToBuild): string {
  const credentials = credentialsText(parts);
  const query = parts.query === '' ? '' : `?${parts.query}`;
  const path = encodeURIComponent(parts.path);
  return `${parts.scheme}://${credentials}${hostText(parts.host)}/${path}${query}`;
}

/**
 * `url` with its password (and any `password=` style query value) replaced by `***`, for
 * messages and logs. Where it cannot tell exactly where the password ends (a URL it would refuse),
 * it hides more rather than less: everything from the user name to the last `@`.
 */
export function redactUrl(url: string): string {
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(url);
  if (scheme === null) return url;
  const prefix = scheme[0];
  const rest = url.slice(prefix.length);
  // The strictest shape: a path after the hosts and a host possibly in the query. A URL of a
  // backend that needs neither splits the same way, since only a query may hold an `@`.
  const split = splitAuthority(rest, { pathNames: 'path', hostInQuery: true });
  const at = split?.at ?? rest.lastIndexOf('@');
  const after = redactQuery(rest.slice(at + 1));
  if (at < 0) return prefix + after;
  const userinfo = rest.slice(0, at);
  const colon = userinfo.indexOf(':');
  return `${prefix}${colon < 0 ? userinfo : `${userinfo.slice(0, colon)}:***`}@${after}`;
}

/** Query values whose name says they are secret (`password=`, `token=`) as `***`. */
function redactQuery(text: string): string {
  const question = text.indexOf('?');
  if (question < 0) return text;
  const query = text
    .slice(question + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      return eq > 0 && /pass|pwd|secret|token/i.test(pair.slice(0, eq))
        ? `${pair.slice(0, eq)}=***`
        : pair;
    });
  return `${text.slice(0, question + 1)}${query.join('&')}`;
}

/** `host[:port]`, IPv6 addresses in brackets. */
export function hostText(host: UrlHost, defaultPort?: number): string {
  const name = host.host.includes(':') ? `[${host.host}]` : host.host;
  const port = host.port ?? defaultPort;
  return port === undefined ? name : `${name}:${port}`;
}

function credentialsText(url: UrlCredentials): string {
  if (url.user === undefined && url.password === undefined) return '';
  const user = encodeURIComponent(url.user ?? '');
  return url.password === undefined ? `${user}@` : `${user}:${encodeURIComponent(url.password)}@`;
}

/**
 * Hosts, path and query after the userinfo; `at` is the index of the `@` ending the userinfo,
 * -1 when there is none.
 */
interface Authority {
  readonly at: number;
  readonly hosts: string;
  readonly path: string;
  readonly query: string;
}

// After the userinfo: hosts, an optional path without `@`, an optional query (which may hold `@`).
const AFTER_USERINFO = /^([^/?#@]*)(\/[^?#@]*)?(?:\?([^#]*))?$/;

/**
 * Where the userinfo ends in `rest` (the URL after `scheme://`). A raw password may itself hold
 * `@`, `/`, `?` or `#`, so every `@` is a candidate: the last one after which a host list (and,
 * where the backend needs one, a path) follows is taken. Taking the last keeps a password whole
 * (and hidden by redactUrl) whatever it contains; the price is that an `@` inside a query value
 * must be percent-encoded when the URL also has a user.
 */
function splitAuthority(rest: string, shape: UrlShape): Authority | undefined {
  const candidates: Authority[] = [];
  const consider = (at: number) => {
    const match = AFTER_USERINFO.exec(rest.slice(at + 1));
    // Some backends may name no host, when the query gives a Unix socket directory.
    const socket = shape.hostInQuery === true && /(?:^|&)host=/.test(match?.[3] ?? '');
    if (match !== null && (match[1] !== '' || socket))
      candidates.push({ at, hosts: match[1] ?? '', path: match[2] ?? '', query: match[3] ?? '' });
  };
  for (let at = rest.lastIndexOf('@'); at >= 0; at = at === 0 ? -1 : rest.lastIndexOf('@', at - 1))
    consider(at);
  consider(-1);
  // The first (rightmost) that is complete: well-formed hosts, and the path the backend needs.
  // Failing that the best incomplete one, so the message can say what is wrong with it.
  const needsPath = shape.pathNames !== undefined;
  const score = (c: Authority) =>
    (isRefusal(parseHosts(c.hosts)) ? 0 : 1) + (needsPath && c.path.length < 2 ? 0 : 2);
  let best: Authority | undefined;
  for (const candidate of candidates)
    if (best === undefined || score(candidate) > score(best)) best = candidate;
  return best;
}

const HOST = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.?))(?::([0-9]*))?$/;

function parseHosts(text: string): UrlHost[] | UrlRefusal {
  const hosts: UrlHost[] = [];
  if (text === '') return [{ host: '' }]; // a socket URL: the host is in the query
  for (const part of text.split(',')) {
    const match = HOST.exec(part);
    if (match === null) return refuse(`has a bad host "${part}"`);
    const [, ipv6, name, port] = match;
    if (port === undefined || port === '') {
      hosts.push({ host: ipv6 ?? name ?? '' });
      continue;
    }
    const number = Number(port);
    if (!/^[0-9]{1,5}$/.test(port) || number < 1 || number > 65535)
      return { refused: `has a bad port "${port}": ports are 1 to 65535`, showForms: false };
    hosts.push({ host: ipv6 ?? name ?? '', port: number });
  }
  return hosts;
}

function parseUserinfo(userinfo: string): UrlCredentials {
  const colon = userinfo.indexOf(':');
  const user = decodeUrlPart(colon < 0 ? userinfo : userinfo.slice(0, colon));
  return {
    ...(user === '' ? {} : { user }),
    ...(colon < 0 ? {} : { password: decodeUrlPart(userinfo.slice(colon + 1)) }),
  };
}

/**
 * Percent-decodes where the text is encoded; a raw `%` that starts no escape (`50%off`) stays as
 * it is.
 */
export function decodeUrlPart(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text.replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => {
      try {
        return decodeURIComponent(run);
      } catch {
        return run;
      }
    });
  }
}
