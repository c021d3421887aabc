// Connection URLs as operators write them (IDMINT_SEGMENT_STORE, IDMINT_WORKER_REGISTRY,
// `--store`): the one module that parses them, redacts them and lists the forms accepted. The
// configuration, the store and registry factories and the adapters that hand a URL to a driver all
// read URLs here, so one URL means the same everywhere and a password never reaches a message or a
// log.
//
// Passwords are read as users paste them: percent-encoded (`p%40ss`) or raw, even with `@`, `/`,
// `:`, `?` or `#` inside (`postgres://idmint:p@ss/w0rd@db:5432/ids`). The drivers get the parts
// (Redis) or a URL rebuilt with every part encoded (pg, mysql2), never the raw string.

import { IdMintError } from '../core/errors.ts';

/** What a URL is for: the two settings that take one. */
export type UrlRole = 'segment-store' | 'worker-registry';

/**
 * Redis databases idmint accepts: 0 to 15, Redis's default `databases 16` (and what managed
 * Redis services offer). A server configured with more databases is used through 0 to 15 all the
 * same: idmint keeps its keys apart by prefix (segment.table, snowflake.cluster), which also works
 * on Redis Cluster, where only database 0 exists.
 */
export const REDIS_MAX_DATABASE = 15;

/** The schemes a segment store URL may start with. */
export const SEGMENT_STORE_SCHEMES = [
  'sqlite',
  'postgres',
  'postgresql',
  'mysql',
  'mariadb',
  'redis',
  'rediss',
] as const;

/** The schemes a worker registry URL may start with. */
export const WORKER_REGISTRY_SCHEMES = [
  'static',
  'zookeeper',
  'etcd',
  'redis',
  'rediss',
  'postgres',
  'postgresql',
  'mysql',
  'mariadb',
  'sqlite',
] as const;

/** The segment store URL forms, for `--help`, error messages and docs. */
export const SEGMENT_STORE_URL_FORMS = [
  'sqlite:./data/idmint.db (a file; its directory is created)',
  'sqlite::memory:',
  'postgres://user:password@host:5432/database (or postgresql://)',
  'mysql://user:password@host:3306/database (or mariadb://; MySQL or MariaDB)',
  `redis://:password@host:6379/0 (database 0 to ${REDIS_MAX_DATABASE}; rediss:// for TLS)`,
] as const;

/** The worker registry URL forms, for `--help`, error messages and docs. */
export const WORKER_REGISTRY_URL_FORMS = [
  'static:<worker id>',
  'zookeeper://host:2181[,host:2181...]/<name>',
  'etcd://host:2379[,host:2379...]/<name>',
  `redis://:password@host:6379/<database 0 to ${REDIS_MAX_DATABASE}> (rediss:// for TLS)`,
  'postgres://user:password@host:5432/<database> (or postgresql://)',
  'mysql://user:password@host:3306/<database> (or mariadb://)',
  'sqlite:<file>',
] as const;

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

/** A parsed connection URL, one shape per backend. */
export type ConnectionUrl =
  | { readonly kind: 'sqlite'; readonly path: string }
  | { readonly kind: 'static'; readonly workerId: number }
  | (UrlCredentials & {
      readonly kind: 'postgres' | 'mysql';
      readonly host: UrlHost;
      readonly database: string;
      /**
       * The query string as written, without `?` ('' when none): driver options such as sslmode.
       */
      readonly query: string;
    })
  | (UrlCredentials & {
      readonly kind: 'redis';
      readonly tls: boolean;
      readonly host: UrlHost;
      readonly database: number;
    })
  | {
      readonly kind: 'zookeeper' | 'etcd';
      readonly hosts: readonly UrlHost[];
      readonly name: string;
    };

/** The backend each scheme names. */
const KIND_OF_SCHEME: Readonly<Record<string, ConnectionUrl['kind']>> = {
  sqlite: 'sqlite',
  static: 'static',
  postgres: 'postgres',
  postgresql: 'postgres',
  mysql: 'mysql',
  mariadb: 'mysql',
  redis: 'redis',
  rediss: 'redis',
  zookeeper: 'zookeeper',
  etcd: 'etcd',
};

const ROLES: Readonly<
  Record<
    UrlRole,
    { what: string; schemes: readonly string[]; forms: readonly string[]; setting: string }
  >
> = {
  'segment-store': {
    what: 'a segment store URL',
    schemes: SEGMENT_STORE_SCHEMES,
    forms: SEGMENT_STORE_URL_FORMS,
    setting: 'segment store URL',
  },
  'worker-registry': {
    what: 'a worker registry URL',
    schemes: WORKER_REGISTRY_SCHEMES,
    forms: WORKER_REGISTRY_URL_FORMS,
    setting: 'worker registry URL',
  },
};

/** The accepted forms for `role`, joined for a message. */
export function urlFormsText(role: UrlRole): string {
  return ROLES[role].forms.join(', ');
}

/**
 * Why `url` is not an accepted URL for `role` (one clause, no value in it), or undefined when it
 * is. For configuration checks, which word the message themselves.
 */
export function connectionUrlProblem(url: unknown, role: UrlRole): string | undefined {
  const result = parse(url, role);
  return typeof result === 'string' ? withForms(result, role) : undefined;
}

/**
 * `problem`, followed by the accepted forms when the URL's form is what is wrong. A value out of
 * range in a well-formed URL (a Redis database, a port) says what is allowed itself.
 */
function withForms(problem: string, role: UrlRole): string {
  return /^(the Redis database|has a bad port)/.test(problem)
    ? problem
    : `${problem}; accepted forms: ${urlFormsText(role)}`;
}

/**
 * Parses a URL for `role`. Throws CONFIG_INVALID naming `setting` (e.g. `IDMINT_SEGMENT_STORE`),
 * the value with its password hidden, what is wrong and every accepted form.
 */
export function parseConnectionUrl(
  url: unknown,
  role: UrlRole,
  setting: string = ROLES[role].setting,
): ConnectionUrl {
  const result = parse(url, role);
  if (typeof result !== 'string') return result;
  const shown = typeof url === 'string' ? JSON.stringify(redactUrl(url)) : String(url);
  return invalidUrl(`${setting} ${shown}: ${withForms(result, role)}`, setting, url);
}

function invalidUrl(message: string, setting: string, url: unknown): never {
  throw new IdMintError('CONFIG_INVALID', message, {
    details: { key: setting, value: typeof url === 'string' ? redactUrl(url) : String(url) },
  });
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
  const split = splitAuthority(rest, KIND_OF_SCHEME[scheme[1]?.toLowerCase() ?? '']);
  const at = split?.at ?? rest.lastIndexOf('@');
  const after = redactQuery(rest.slice(at + 1));
  if (at < 0) return prefix + after;
  const userinfo = rest.slice(0, at);
  const colon = userinfo.indexOf(':');
  return `${prefix}${colon < 0 ? userinfo : `${userinfo.slice(0, colon)}:***`}@${after}`;
}

/**
 * Query values whose name says they are secret (`password=`, `sslpassword=`, `token=`) as `***`.
 */
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

/**
 * The database file a `sqlite:` URL names: `sqlite:./data/idmint.db`, `sqlite:/abs/file.db`,
 * `sqlite::memory:`, and the `sqlite:///abs/file.db` spelling other tools use (the `//` is
 * dropped). Undefined when `url` is not a `sqlite:` URL or names no file.
 */
export function sqlitePathOf(url: string): string | undefined {
  if (!url.startsWith('sqlite:')) return undefined;
  let path = url.slice('sqlite:'.length);
  if (path.startsWith('//')) path = path.slice(2);
  return path === '' ? undefined : path;
}

/**
 * `host:port[,host:port]` of a URL, or the file of a `sqlite:` URL: where it points, with no
 * credentials.
 */
export function connectionTarget(url: ConnectionUrl): string {
  switch (url.kind) {
    case 'sqlite':
      return url.path;
    case 'static':
      return `static:${url.workerId}`;
    case 'zookeeper':
    case 'etcd':
      return url.hosts.map(hostText).join(',');
    default:
      return hostText(url.host);
  }
}

/** `host[:port]`, IPv6 addresses in brackets. */
export function hostText(host: UrlHost, defaultPort?: number): string {
  const name = host.host.includes(':') ? `[${host.host}]` : host.host;
  const port = host.port ?? defaultPort;
  return port === undefined ? name : `${name}:${port}`;
}

/**
 * A PostgreSQL or MySQL/MariaDB URL rebuilt for the driver (pg, mysql2): every part
 * percent-encoded, so a password with `@`, `/` or `%` in it reaches the database as written.
 * Throws CONFIG_INVALID for anything else.
 */
export function sqlDriverUrl(url: string): string {
  const parsed = parseAny(url);
  if (parsed.kind !== 'postgres' && parsed.kind !== 'mysql')
    return invalidUrl(
      `not a PostgreSQL or MySQL URL: ${JSON.stringify(redactUrl(url))}`,
      'url',
      url,
    );
  const credentials = credentialsText(parsed);
  const query = parsed.query === '' ? '' : `?${parsed.query}`;
  return `${parsed.kind === 'postgres' ? 'postgresql' : 'mysql'}://${credentials}${hostText(parsed.host)}/${encodeURIComponent(parsed.database)}${query}`;
}

/** What ioredis needs to connect to a `redis://` or `rediss://` URL. */
export interface RedisConnectOptions {
  readonly host: string;
  readonly port: number;
  readonly username?: string;
  readonly password?: string;
  readonly db: number;
  /** Present for `rediss://`: connect over TLS. */
  readonly tls?: Record<string, never>;
}

/**
 * A `redis://` or `rediss://` URL as ioredis options. idmint never passes the URL itself to
 * ioredis: it would read a database number it cannot select as database 0, silently.
 * Throws CONFIG_INVALID for anything else.
 */
export function redisConnectOptions(url: string): RedisConnectOptions {
  const parsed = parseAny(url);
  if (parsed.kind !== 'redis')
    return invalidUrl(`not a Redis URL: ${JSON.stringify(redactUrl(url))}`, 'url', url);
  return {
    host: parsed.host.host,
    port: parsed.host.port ?? 6379,
    ...(parsed.user === undefined || parsed.user === '' ? {} : { username: parsed.user }),
    ...(parsed.password === undefined ? {} : { password: parsed.password }),
    db: parsed.database,
    ...(parsed.tls ? { tls: {} } : {}),
  };
}

/** Parses a URL of any backend (for adapters, which know their kind). */
function parseAny(url: string): ConnectionUrl {
  const result = parse(url, undefined);
  if (typeof result === 'string')
    return invalidUrl(`${JSON.stringify(redactUrl(String(url)))}: ${result}`, 'url', url);
  return result;
}

function credentialsText(url: UrlCredentials): string {
  if (url.user === undefined && url.password === undefined) return '';
  const user = encodeURIComponent(url.user ?? '');
  return url.password === undefined ? `${user}@` : `${user}:${encodeURIComponent(url.password)}@`;
}

/**
 * Names of zookeeper:// and etcd:// clusters: they become a ZooKeeper path segment and an etcd key
 * part.
 */
const CLUSTER_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

/** The URL parsed, or why it is refused (one clause). `role` undefined: any backend. */
function parse(url: unknown, role: UrlRole | undefined): ConnectionUrl | string {
  const what = role === undefined ? 'a connection URL' : ROLES[role].what;
  if (typeof url !== 'string' || url.trim() === '') return `not ${what}`;
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase();
  const kind = scheme === undefined ? undefined : KIND_OF_SCHEME[scheme];
  if (
    scheme === undefined ||
    kind === undefined ||
    (role !== undefined && !ROLES[role].schemes.includes(scheme))
  )
    return `not ${what}`;
  const body = url.slice(scheme.length + 1);

  if (kind === 'sqlite') {
    const path = sqlitePathOf(`sqlite:${body}`);
    return path === undefined
      ? 'sqlite: needs a file, as in sqlite:./data/idmint.db, or :memory:'
      : { kind, path };
  }
  if (kind === 'static') {
    return /^[0-9]{1,10}$/.test(body)
      ? { kind, workerId: Number(body) }
      : `static: needs a worker ID, a whole number such as static:0`;
  }
  if (!body.startsWith('//')) return `must start with ${scheme}://`;
  const rest = body.slice(2);
  const split = splitAuthority(rest, kind);
  if (split === undefined)
    return `is not a ${scheme}:// URL: ${needsPath(kind) ? `${scheme}://host[:port]/<${kind === 'zookeeper' || kind === 'etcd' ? 'name' : 'database'}>` : `${scheme}://host[:port][/database]`}`;
  const hosts = parseHosts(split.hosts);
  if (typeof hosts === 'string') return hosts;
  const credentials = split.at < 0 ? {} : parseUserinfo(rest.slice(0, split.at));
  const path = split.path;
  const query = split.query;

  switch (kind) {
    case 'postgres':
    case 'mysql': {
      const host = hosts[0];
      if (hosts.length !== 1 || host === undefined)
        return `names ${hosts.length} hosts; ${scheme}:// takes one`;
      const database = decodePart(path.slice(1));
      if (database === '' || database.includes('/'))
        return `names no database: ${scheme}://user:password@host:${kind === 'postgres' ? 5432 : 3306}/<database>`;
      return { kind, ...credentials, host, database, query };
    }
    case 'redis': {
      const host = hosts[0];
      if (hosts.length !== 1 || host === undefined)
        return `names ${hosts.length} hosts; ${scheme}:// takes one`;
      if (query !== '') return `${scheme}:// takes no ?options`;
      const db = path === '' || path === '/' ? '0' : path.slice(1);
      if (!/^[0-9]{1,3}$/.test(db) || Number(db) > REDIS_MAX_DATABASE) {
        return `the Redis database must be a number from 0 to ${REDIS_MAX_DATABASE}, got "${db}" (separate idmint's keys from other data by prefix, not by database)`;
      }
      return { kind, tls: scheme === 'rediss', ...credentials, host, database: Number(db) };
    }
    default: {
      // zookeeper, etcd
      if (split.at >= 0) return `${scheme}:// takes no user or password`;
      if (query !== '') return `${scheme}:// takes no ?options`;
      const name = path.slice(1);
      if (!CLUSTER_NAME.test(name) || name === '.' || name === '..')
        return `needs a name after the hosts (1 to 128 of A-Z a-z 0-9 _ . -): ${scheme}://host:${kind === 'etcd' ? 2379 : 2181}/<name>`;
      return { kind, hosts, name };
    }
  }
}

/** True for the backends whose URL must name something after the hosts (a database, a cluster). */
function needsPath(kind: ConnectionUrl['kind'] | undefined): boolean {
  return kind === 'postgres' || kind === 'mysql' || kind === 'zookeeper' || kind === 'etcd';
}

/**
 * Hosts, path and query after the userinfo; `at` is the index of the `@` ending the userinfo, -1
 * when there is none.
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
function splitAuthority(
  rest: string,
  kind: ConnectionUrl['kind'] | undefined,
): Authority | undefined {
  const candidates: Authority[] = [];
  const consider = (at: number) => {
    const match = AFTER_USERINFO.exec(rest.slice(at + 1));
    // PostgreSQL alone may name no host, when the query gives a Unix socket directory
    // (`?host=/run/postgresql`).
    const socket = kind === 'postgres' && /(?:^|&)host=/.test(match?.[3] ?? '');
    if (match !== null && (match[1] !== '' || socket))
      candidates.push({ at, hosts: match[1] ?? '', path: match[2] ?? '', query: match[3] ?? '' });
  };
  for (let at = rest.lastIndexOf('@'); at >= 0; at = at === 0 ? -1 : rest.lastIndexOf('@', at - 1))
    consider(at);
  consider(-1);
  // The first (rightmost) that is complete: well-formed hosts, and the path the backend needs.
  // Failing that the best incomplete one, so the message can say what is wrong with it.
  const score = (c: Authority) =>
    (typeof parseHosts(c.hosts) === 'string' ? 0 : 1) +
    (needsPath(kind) && c.path.length < 2 ? 0 : 2);
  let best: Authority | undefined;
  for (const candidate of candidates)
    if (best === undefined || score(candidate) > score(best)) best = candidate;
  return best;
}

const HOST = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.?))(?::([0-9]*))?$/;

function parseHosts(text: string): UrlHost[] | string {
  const hosts: UrlHost[] = [];
  if (text === '') return [{ host: '' }]; // a PostgreSQL socket URL: the host is in the query
  for (const part of text.split(',')) {
    const match = HOST.exec(part);
    if (match === null) return `has a bad host "${part}"`;
    const [, ipv6, name, port] = match;
    if (port === undefined || port === '') {
      hosts.push({ host: ipv6 ?? name ?? '' });
      continue;
    }
    const number = Number(port);
    if (!/^[0-9]{1,5}$/.test(port) || number < 1 || number > 65535)
      return `has a bad port "${port}": ports are 1 to 65535`;
    hosts.push({ host: ipv6 ?? name ?? '', port: number });
  }
  return hosts;
}

function parseUserinfo(userinfo: string): UrlCredentials {
  const colon = userinfo.indexOf(':');
  const user = decodePart(colon < 0 ? userinfo : userinfo.slice(0, colon));
  return {
    ...(user === '' ? {} : { user }),
    ...(colon < 0 ? {} : { password: decodePart(userinfo.slice(colon + 1)) }),
  };
}

/**
 * Percent-decodes where the text is encoded; a raw `%` that starts no escape (`50%off`) stays as it
 * is.
 */
function decodePart(text: string): string {
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
