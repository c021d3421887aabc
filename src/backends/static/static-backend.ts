// The static registry: a worker ID from configuration, held with a host-wide lock and a state
// file. No driver; it plays no other role.

import { refuse } from '../../shared/connection-url.ts';
import type { BackendDescriptor } from '../descriptor.ts';

/** What a `static:` URL names. */
export interface StaticOptions {
  readonly workerId: number;
}

/** The static registry (`static:<worker id>`). */
export const staticBackend: BackendDescriptor<StaticOptions> = {
  kind: 'static',
  schemes: ['static'],
  forms: { 'worker-registry': ['static:<worker id>'] },
  parse(url) {
    const body = url.slice('static:'.length);
    return /^[0-9]{1,10}$/.test(body)
      ? { workerId: Number(body) }
      : refuse('static: needs a worker ID, a whole number such as static:0');
  },
  target: (options) => `static:${options.workerId}`,
  hosts: () => [],
  async openRegistry(options, settings) {
    const { StaticWorkerRegistry } = await import(
      '../../registries/static/static-worker-registry.ts'
    );
    return new StaticWorkerRegistry({
      workerId: options.workerId,
      stateDir: settings.stateDir,
      lockDir: settings.lockDir,
      name: settings.name,
      ttlMs: settings.ttlMs,
      interleave: settings.interleave,
    });
  },
  // No cacheCluster: the static registry keeps its own state file and needs no coordinator.
};
