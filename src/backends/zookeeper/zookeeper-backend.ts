// ZooKeeper: a worker registry in Leaf's layout (`/snowflake/<name>`), through
// node-zookeeper-client.

import { hostText } from '../../shared/connection-url.ts';
import { type CoordinatorOptions, parseCoordinatorUrl } from '../coordinator-url.ts';
import type { BackendDescriptor } from '../descriptor.ts';

/** ZooKeeper (`zookeeper://host:2181[,host:2181...]/<name>`). */
export const zookeeperBackend: BackendDescriptor<CoordinatorOptions> = {
  kind: 'zookeeper',
  schemes: ['zookeeper'],
  forms: { 'worker-registry': ['zookeeper://host:2181[,host:2181...]/<name>'] },
  parse: (url) => parseCoordinatorUrl(url, 2181),
  target: (options) => options.hosts.map((host) => hostText(host, 2181)).join(','),
  hosts: (options) => options.hosts.map((host) => ({ ...host, port: host.port ?? 2181 })),
  async openRegistry(options, settings) {
    const { connectZooKeeperWorkerRegistry } = await import(
      '../../registries/zookeeper/zookeeper-worker-registry.ts'
    );
    return connectZooKeeperWorkerRegistry(options.hosts, {
      ttlMs: settings.ttlMs,
      operationTimeoutMs: settings.operationTimeoutMs,
      interleave: settings.interleave,
      name: options.name,
      recycleAfterMs: settings.recycleAfterMs,
    });
  },
  cacheCluster: (options) => options.name,
};
