import type { ServerConfig } from '../config/schema.ts';

/** Hosts that name every interface: no other node can reach this one at them. */
const WILDCARDS = new Set(['0.0.0.0', '::', '[::]', '']);

/**
 * The URL other nodes forward a cluster-ordered tag's requests to: segment.advertiseUrl when set,
 * else `http://host:port` of the listen address and the port actually bound (so `--port 0`
 * works). A wildcard host names no reachable node: the address is then empty and `why` says so,
 * and this node refuses to claim an issuer lease (ISSUER_UNAVAILABLE naming the fix). `ownPort`:
 * the port is this process's own (one of `serve --processes N`), in place of the URL's.
 */
export function advertisedAddress(
  config: Pick<ServerConfig, 'host'> & { readonly segment: { readonly advertiseUrl: string } },
  boundPort: number,
  ownPort = false,
): { readonly address: string; readonly why?: string } {
  const given = config.segment.advertiseUrl;
  if (given !== '') {
    if (!ownPort) return { address: given.replace(/\/$/, '') };
    // One of several processes on a port: its host, this process's own port.
    const url = new URL(given);
    url.port = String(boundPort);
    return { address: url.origin };
  }
  const host = config.host;
  if (WILDCARDS.has(host))
    return {
      address: '',
      why: `it listens on the wildcard address ${host === '' ? '(none)' : host}`,
    };
  const shown = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return { address: `http://${shown}:${boundPort}` };
}
