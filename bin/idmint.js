#!/usr/bin/env node
// In a source checkout on a Node that strips types, run the TypeScript sources directly, so the
// CLI is never a stale build. Installed as a package (under node_modules, where Node refuses to
// strip types) or on an older Node, run the compiled dist/.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = new URL('../', import.meta.url);
const source = new URL('src/cli/main.ts', root);
const runSource = Boolean(process.features.typescript) && existsSync(source) && !fileURLToPath(root).includes('/node_modules/');
await import(runSource ? source.href : new URL('dist/cli/main.js', root).href);
