// The catalog: every backend idmint knows, one line each, and what is asked of them by URL. The
// configuration checks URLs here, the composition root opens them here; a URL is read once, into
// its backend's typed options, on its way to the adapter.

import { IdMintError } from '../core/errors.ts';
import type { SegmentStore } from '../ports/segment-store.ts';
import type { WorkerRegistry } from '../ports/worker-registry.ts';
import {
  type UrlHost,
  type UrlRefusal,
  isRefusal,
  redactUrl,
  urlScheme,
} from '../shared/connection-url.ts';
import type {
  BackendDescriptor,
  BackendRole,
  RegistrySettings,
  StoreSettings,
} from './descriptor.ts';
import { etcdBackend } from './etcd/etcd-backend.ts';
import { mysqlBackend } from './mysql/mysql-backend.ts';
import { postgresBackend } from './postgres/postgres-backend.ts';
import { redisBackend } from './redis/redis-backend.ts';
import { sqliteBackend } from './sqlite/sqlite-backend.ts';
import { staticBackend } from './static/static-backend.ts';
import { zookeeperBackend } from './zookeeper/zookeeper-backend.ts';

/** A backend as the catalog lists it: its descriptor with the options type put away. */
export interface Backend {
  readonly kind: string;
  readonly schemes: readonly string[];
  /** The roles it can play: those it lists URL forms for. */
  readonly roles: readonly BackendRole[];
  readonly forms: { readonly [R in BackendRole]?: readonly string[] };
  readonly embedded: boolean;
  /** Reads `url` (one of its schemes); see {@link parseBackendUrl}. */
  read(url: string): BackendUrl | UrlRefusal;
}

/** A URL read by its backend: what the composition root opens, with no second reading. */
export interface BackendUrl {
  readonly backend: Backend;
  /** The URL with its password hidden, for messages and logs. */
  readonly redacted: string;
  /** Where it points, without credentials: `db:5432`, `zk1:2181,zk2:2181`, a file. */
  readonly target: string;
  /** Its hosts, default ports filled in (none for a file or static:), to explain a failure. */
  readonly hosts: readonly UrlHost[];
  /** The backend's typed options (a descriptor's `parse` result), for tests and tools. */
  readonly options: unknown;
  /** Opens a segment store; only for a backend that plays that role. */
  openStore(settings: StoreSettings): Promise<SegmentStore>;
  /** Opens a worker registry; only for a backend that plays that role. */
  openRegistry(settings: RegistrySettings): Promise<WorkerRegistry>;
  /** See {@link BackendDescriptor.cacheCluster}; undefined when the registry needs no cache. */
  cacheCluster(settings: RegistrySettings): string | undefined;
}

/** A descriptor as the catalog lists it. */
export function catalogEntry<Options>(descriptor: BackendDescriptor<Options>): Backend {
  const roles = (['segment-store', 'worker-registry'] as const).filter(
    (role) => descriptor.forms[role] !== undefined,
  );
  const backend: Backend = {
    kind: descriptor.kind,
    schemes: descriptor.schemes,
    roles,
    forms: descriptor.forms,
    embedded: descriptor.embedded === true,
    read(url) {
      const options = descriptor.parse(url);
      if (isRefusal(options)) return options;
      const { openStore, openRegistry, cacheCluster } = descriptor;
      return {
        backend,
        redacted: redactUrl(url),
        target: descriptor.target(options),
        hosts: descriptor.hosts(options),
        options,
        openStore: (settings) =>
          openStore === undefined
            ? Promise.reject(new TypeError(`${descriptor.kind} is no segment store`))
            : // Where it points goes to the store for its failure messages.
              openStore(options, { where: descriptor.target(options), ...settings }),
        openRegistry: (settings) =>
          openRegistry === undefined
            ? Promise.reject(new TypeError(`${descriptor.kind} is no worker registry`))
            : openRegistry(options, settings),
        cacheCluster: (settings) => cacheCluster?.(options, settings),
      };
    },
  };
  return backend;
}

/** Every backend, in the order their URL forms are listed. */
export const BACKENDS: readonly Backend[] = [
  catalogEntry(sqliteBackend),
  catalogEntry(postgresBackend),
  catalogEntry(mysqlBackend),
  catalogEntry(redisBackend),
  catalogEntry(staticBackend),
  catalogEntry(zookeeperBackend),
  catalogEntry(etcdBackend),
];

/** The backend a scheme names (any case), if any. */
export function backendOfScheme(scheme: string | undefined): Backend | undefined {
  const wanted = scheme?.toLowerCase();
  return BACKENDS.find((backend) => wanted !== undefined && backend.schemes.includes(wanted));
}

/** The URL forms `role` accepts, every backend's, for `--help`, messages and docs. */
export function urlForms(role: BackendRole): readonly string[] {
  return BACKENDS.flatMap((backend) => backend.forms[role] ?? []);
}

/** The segment store URL forms. */
export const SEGMENT_STORE_URL_FORMS = urlForms('segment-store');

/** The worker registry URL forms. */
export const WORKER_REGISTRY_URL_FORMS = urlForms('worker-registry');

/** The accepted forms for `role`, joined for a message. */
export function urlFormsText(role: BackendRole): string {
  return urlForms(role).join(', ');
}

const ROLE_WORDS: Readonly<Record<BackendRole, { what: string; setting: string }>> = {
  'segment-store': { what: 'a segment store URL', setting: 'segment store URL' },
  'worker-registry': { what: 'a worker registry URL', setting: 'worker registry URL' },
};

/** `url` read by its backend, or why it is not an accepted URL for `role`. */
function read(url: unknown, role: BackendRole): BackendUrl | UrlRefusal {
  const notOne = { refused: `not ${ROLE_WORDS[role].what}`, showForms: true };
  if (typeof url !== 'string' || url.trim() === '') return notOne;
  const backend = backendOfScheme(urlScheme(url));
  if (backend === undefined || !backend.roles.includes(role)) return notOne;
  return backend.read(url);
}

/** A refusal in words: the clause, then the accepted forms where the form is what is wrong. */
function refusalText(refusal: UrlRefusal, role: BackendRole): string {
  return refusal.showForms
    ? `${refusal.refused}; accepted forms: ${urlFormsText(role)}`
    : refusal.refused;
}

/**
 * Why `url` is not an accepted URL for `role` (one clause, no value in it), or undefined when it
 * is. For configuration checks, which word the message themselves.
 */
export function backendUrlProblem(url: unknown, role: BackendRole): string | undefined {
  const result = read(url, role);
  return isRefusal(result) ? refusalText(result, role) : undefined;
}

/**
 * Reads a URL for `role`, once: the result opens the adapter. Throws CONFIG_INVALID naming
 * `setting` (e.g. `IDMINT_SEGMENT_STORE`), the value with its password hidden, what is wrong and
 * every accepted form.
 */
export function parseBackendUrl(
  url: unknown,
  role: BackendRole,
  setting: string = ROLE_WORDS[role].setting,
): BackendUrl {
  const result = read(url, role);
  if (!isRefusal(result)) return result;
  const shown = typeof url === 'string' ? redactUrl(url) : String(url);
  const quoted = typeof url === 'string' ? JSON.stringify(shown) : shown;
  throw new IdMintError('CONFIG_INVALID', `${setting} ${quoted}: ${refusalText(result, role)}`, {
    details: { key: setting, value: shown },
  });
}

/**
 * A URL read into one backend's typed options (for tools and tests that open a driver or an
 * adapter themselves). Throws CONFIG_INVALID when `url` is not one of its URLs.
 */
export function backendOptions<Options>(
  descriptor: BackendDescriptor<Options>,
  url: string,
): Options {
  const scheme = urlScheme(url);
  const options =
    scheme !== undefined && descriptor.schemes.includes(scheme)
      ? descriptor.parse(url)
      : { refused: `not a ${descriptor.kind} URL`, showForms: false };
  if (!isRefusal(options)) return options;
  throw new IdMintError('CONFIG_INVALID', `${JSON.stringify(redactUrl(url))}: ${options.refused}`, {
    details: { key: 'url', value: redactUrl(url) },
  });
}
