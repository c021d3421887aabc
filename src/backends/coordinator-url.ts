// The URL form ZooKeeper and etcd share: `scheme://host:port[,host:port...]/<name>`, the name
// being the cluster whose worker IDs the registry hands out.

import {
  type UrlHost,
  type UrlRefusal,
  isRefusal,
  refuse,
  splitUrl,
} from '../shared/connection-url.ts';

/** What a coordinator URL names. */
export interface CoordinatorOptions {
  readonly hosts: readonly UrlHost[];
  /** The cluster: a ZooKeeper path segment, an etcd key part. */
  readonly name: string;
}

/** Names of clusters: they become a ZooKeeper path segment and an etcd key part. */
const CLUSTER_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

/** A coordinator URL read into its hosts and cluster name, or why it is refused. */
export function parseCoordinatorUrl(
  url: string,
  defaultPort: number,
): CoordinatorOptions | UrlRefusal {
  const parts = splitUrl(url, { pathNames: 'name' });
  if (isRefusal(parts)) return parts;
  const { scheme, hosts, path, query } = parts;
  if (parts.hasUserinfo) return refuse(`${scheme}:// takes no user or password`);
  if (query !== '') return refuse(`${scheme}:// takes no ?options`);
  const name = path.slice(1);
  if (!CLUSTER_NAME.test(name) || name === '.' || name === '..')
    return refuse(
      'needs a name after the hosts (1 to 128 of A-Z a-z 0-9 _ . -): ' +
        `${scheme}://host:${defaultPort}/<name>`,
    );
  return { hosts, name };
}
