// etcd: a worker registry under `/idmint/workers/<name>/`, through etcd3.

import { hostText } from '../../shared/connection-url.ts';
import { type CoordinatorOptions, parseCoordinatorUrl } from '../coordinator-url.ts';
import type { BackendDescriptor } from '../descriptor.ts';

/** etcd (`etcd://host:2379[,host:2379...]/<name>`). */
export const etcdBackend: BackendDescriptor<CoordinatorOptions> = {
  kind: 'etcd',
  schemes: ['etcd'],
  forms: { 'worker-registry': ['etcd://host:2379[,host:2379...]/<name>'] },
  parse: (url) => parseCoordinatorUrl(url, 2379),
  target: (options) => options.hosts.map((host) => hostText(host, 2379)).join(','),
  hosts: (options) => options.hosts.map((host) => ({ ...host, port: host.port ?? 2379 })),
  async openRegistry(options, settings) {
    const { connectEtcdWorkerRegistry } = await import(
      '../../registries/etcd/etcd-worker-registry.ts'
    );
    return connectEtcdWorkerRegistry(options.hosts, {
      ttlMs: settings.ttlMs,
      operationTimeoutMs: settings.operationTimeoutMs,
      interleave: settings.interleave,
      name: options.name,
    });
  },
  cacheCluster: (options) => options.name,
};
