#!/usr/bin/env node
// The `idmint` executable. In a source checkout on a Node that strips types, it runs the
// TypeScript sources directly, so the CLI is never a stale build. Installed as a package (under
// node_modules, where Node refuses to strip types) or on an older Node, it runs the compiled dist/.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// Before anything else: on an unsupported Node, one line naming the version needed, not an error
// from Node's internals later. Keep in step with MIN_NODE_VERSION in src/shared/node-version.ts
// (a test checks that they agree).
const MIN_NODE = [22, 13];
const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
if (major < MIN_NODE[0] || (major === MIN_NODE[0] && minor < MIN_NODE[1])) {
  process.stderr.write(
    `idmint needs Node.js ${MIN_NODE.join('.')}.0 or later (Node 24 LTS recommended); this is Node.js ${process.versions.node}\n`,
  );
  process.exit(1);
}

// Node 22 flags node:sqlite (the embedded store) as experimental and says so on stderr the first
// time it loads, which would make that the first line of a command's output. Every other warning
// still reaches the default handler.
const printWarning = process.listeners('warning');
process.removeAllListeners('warning');
process.on('warning', (warning) => {
  if (warning.name === 'ExperimentalWarning' && /\bSQLite\b/.test(warning.message)) return;
  for (const listener of printWarning) listener(warning);
});

const root = new URL('../', import.meta.url);
const source = new URL('src/cli/main.ts', root);
const runSource =
  Boolean(process.features.typescript) &&
  existsSync(source) &&
  !fileURLToPath(root).includes('/node_modules/');
await import(runSource ? source.href : new URL('dist/cli/main.js', root).href);
