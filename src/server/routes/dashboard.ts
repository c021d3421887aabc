import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { IdMintError } from '../../core/errors.ts';
import { sendError } from '../plugins/errors.ts';

/**
 * Where `npm run build` puts the dashboard: `<package>/dist/dashboard/`. This file sits three
 * levels below the package root both as source (src/server/routes/) and as built
 * (dist/server/routes/).
 */
export function defaultDashboardDir(): string {
  return fileURLToPath(new URL('../../../dist/dashboard/', import.meta.url));
}

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.map': 'application/json; charset=utf-8',
};

/**
 * The page may load only its own files and talk only to this server: no CDN, no inline script,
 * and no other site may frame it (the page holds a token).
 */
const CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
  "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

interface Asset {
  readonly body: Buffer;
  readonly type: string;
}

/**
 * The dashboard: `/` and `/dashboard` answer its page, `/dashboard/<file>` its scripts and styles.
 * The files are what `npm run build` bundled (scripts/build-dashboard.ts), read into memory once
 * here: a fixed set of a few files, so no path from a request ever reaches the file system. The
 * bundles' names carry a hash of their content, so they are cached for good; the page is
 * revalidated. The routes are open: the page holds no data, and asks for a token when the API
 * needs one. When the files are missing (a checkout run without a build) the routes say so.
 */
export function dashboardRoutes(
  app: FastifyInstance,
  options: { readonly dir?: string | undefined; readonly authEnabled: boolean },
): void {
  const dir = options.dir ?? defaultDashboardDir();
  const assets = new Map<string, Asset>();
  if (existsSync(join(dir, 'index.html'))) {
    for (const name of readdirSync(dir)) {
      const type = TYPES[extname(name)];
      if (type !== undefined) assets.set(name, { body: readFileSync(join(dir, name)), type });
    }
  }
  // The page learns from its own HTML whether auth is on, so it asks for a token before its first
  // call instead of drawing a 401 (which the browser would log as an error).
  const built = assets.get('index.html');
  const page =
    built === undefined
      ? undefined
      : {
          ...built,
          body: Buffer.from(
            built.body
              .toString('utf8')
              .replace(
                '<meta name="idmint-auth" content="off" />',
                `<meta name="idmint-auth" content="${options.authEnabled ? 'on' : 'off'}" />`,
              ),
          ),
        };
  const notBuilt = () =>
    new IdMintError(
      'ROUTE_NOT_FOUND',
      'the dashboard is not built on this server: run `npm run build`, then restart',
    );
  // Open: the page and its scripts hold no data (the page asks for a token when the API needs one).
  const hidden = { config: { access: 'open' }, schema: { hide: true } } as const;

  for (const url of ['/', '/dashboard']) {
    app.get(url, hidden, (_request, reply) => {
      if (page === undefined) return sendError(reply, notBuilt());
      return reply
        .header('content-security-policy', CONTENT_SECURITY_POLICY)
        .header('x-content-type-options', 'nosniff')
        .header('referrer-policy', 'no-referrer')
        .header('cache-control', 'no-cache')
        .type(page.type)
        .send(page.body);
    });
  }
  app.get<{ Params: { file: string } }>('/dashboard/:file', hidden, (request, reply) => {
    const asset =
      request.params.file === 'index.html' ? undefined : assets.get(request.params.file);
    if (asset === undefined) {
      return sendError(
        reply,
        page === undefined
          ? notBuilt()
          : new IdMintError('ROUTE_NOT_FOUND', 'no such dashboard file; open /dashboard'),
      );
    }
    return reply
      .header('x-content-type-options', 'nosniff')
      .header('cache-control', 'public, max-age=31536000, immutable')
      .type(asset.type)
      .send(asset.body);
  });
}
