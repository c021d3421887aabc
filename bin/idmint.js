#!/usr/bin/env node
// In a source checkout on a Node that strips types, run the TypeScript sources directly, so the
// CLI is never a stale build. Installed as a package (under node_modules, where Node refuses to
// strip types) or on an older Node, run the compiled dist/.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

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
const runSource = Boolean(process.features.typescript) && existsSync(source) && !fileURLToPath(root).includes('/node_modules/');
await import(runSource ? source.href : new URL('dist/cli/main.js', root).href);
