import type { FastifyInstance } from 'fastify';

/**
 * Every route Fastify's router holds, as path -> methods, read from the router itself
 * (`printRoutes`), so a route added by any means, in any plugin, is in it.
 *
 * With `commonPrefix: false` the router prints one node per path that has routes, each line's
 * key the part of the path after its parent's: `├── v1/segment/:tag (GET, HEAD)` with a child
 * `│   └── /range (GET)` is `/v1/segment/:tag/range`. Indentation is 4 characters a level. A
 * node whose routes differ in constraints prints each group on a line of its own below it.
 */
export function registeredRoutes(app: FastifyInstance): Map<string, Set<string>> {
  const routes = new Map<string, Set<string>>();
  const path: string[] = [];
  let current: string | undefined;
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    if (line.trim() === '') continue;
    const node = /^([│ ]*)[├└]── (.*?)(?: \(([^)]*)\))?(?: \{.*)?$/u.exec(line);
    let methods: string | undefined;
    if (node !== null) {
      const depth = (node[1] ?? '').length / 4;
      if (!Number.isInteger(depth))
        throw new Error(`unexpected indentation in printRoutes: ${JSON.stringify(line)}`);
      path.length = depth;
      path.push(node[2] ?? '');
      current = path.join('');
      methods = node[3];
    } else {
      methods = /^[│ ]* \(([^)]*)\)/u.exec(line)?.[1];
      if (methods === undefined)
        throw new Error(`unexpected line in printRoutes: ${JSON.stringify(line)}`);
    }
    if (methods === undefined || current === undefined) continue;
    const set = routes.get(current) ?? new Set<string>();
    for (const method of methods.split(', ')) set.add(method);
    routes.set(current, set);
  }
  return routes;
}
