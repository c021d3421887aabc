import { hostname, networkInterfaces } from 'node:os';
import type { NodeIdentity } from '../ports/worker-registry.ts';

/**
 * This node's identity for a worker registry: its first non-internal IPv4 address (what Leaf
 * uses) or, without one, its host name; and the port it serves on (0 when none). A node that
 * restarts with the same identity gets its worker ID back where the registry remembers it.
 */
export function localNodeIdentity(port = 0): NodeIdentity {
  for (const addresses of Object.values(networkInterfaces())) {
    for (const address of addresses ?? []) {
      if (address.family === 'IPv4' && !address.internal) return { host: address.address, port };
    }
  }
  return { host: hostname(), port };
}
