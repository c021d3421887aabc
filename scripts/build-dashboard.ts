// Bundles the dashboard (src/dashboard/) into dist/dashboard/: index.html, app-<hash>.js and
// app-<hash>.css, everything the page needs (Preact and uPlot included: nothing comes from a CDN).
// `npm run build` runs it; tests import buildDashboard() to build into a directory of their own.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const SOURCE = join(ROOT, 'src/dashboard');

/** Builds the dashboard into `outdir` (emptied first); returns the names of the files written. */
export async function buildDashboard(
  outdir: string = join(ROOT, 'dist/dashboard'),
): Promise<string[]> {
  rmSync(outdir, { recursive: true, force: true });
  mkdirSync(outdir, { recursive: true });
  // esbuild's build() and worker-thread buildSync() leave its service process running,
  // unreferenced: this script exits without reaping it and, under a PID 1 that does not reap, it
  // stays a zombie in `npm start`'s process group (scripts/check-start.sh fails on it). Without
  // worker threads, buildSync runs esbuild with execFileSync, which waits for its exit. The
  // variable is read when esbuild is loaded, hence the import here.
  process.env['ESBUILD_WORKER_THREADS'] ??= '0';
  const { buildSync } = await import('esbuild');
  const result = buildSync({
    entryPoints: { app: join(SOURCE, 'main.tsx') },
    bundle: true,
    outdir,
    // Content-hashed names: the server lets browsers cache them for good (routes/dashboard.ts).
    entryNames: '[name]-[hash]',
    format: 'esm',
    // Browsers of the last few years: what <dialog>, :focus-visible and ResizeObserver need anyway.
    target: ['chrome100', 'firefox100', 'safari15.4', 'edge100'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    minify: true,
    // Preact's and uPlot's licence lines stay in the bundle (both MIT).
    legalComments: 'eof',
    metafile: true,
    logLevel: 'warning',
  });
  if (result.metafile === undefined)
    throw new Error('build-dashboard: esbuild returned no metafile');
  const outputs = Object.keys(result.metafile.outputs).map((path) => basename(path));
  const js = outputs.find((name) => name.endsWith('.js'));
  const css = outputs.find((name) => name.endsWith('.css'));
  if (js === undefined || css === undefined)
    throw new Error(`build-dashboard: expected a .js and a .css bundle, got ${outputs.join(', ')}`);
  const page = readFileSync(join(SOURCE, 'index.html'), 'utf8')
    .replace('%APP_JS%', js)
    .replace('%APP_CSS%', css);
  writeFileSync(join(outdir, 'index.html'), page);
  return ['index.html', js, css];
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const started = performance.now();
  const files = await buildDashboard(process.argv[2]);
  console.log(
    `build-dashboard: ${files.join(', ')} in ${Math.round(performance.now() - started)} ms`,
  );
}
