// Imported first by every entry point (the package's index, the CLI): on a Node older than idmint
// supports, the user gets one line naming the version needed instead of an error from Node's
// internals (`No such built-in module: node:sqlite`, a bad-option exit) somewhere later.

/**
 * The oldest Node idmint supports: node:sqlite without a flag, and type stripping for the sources.
 */
export const MIN_NODE_VERSION = '22.13.0';

/**
 * True when `version` (`process.versions.node`, e.g. `24.21.0`) is at least {@link
 * MIN_NODE_VERSION}.
 */
export function isSupportedNode(version: string): boolean {
  const have = version.split('.').map(Number);
  const need = MIN_NODE_VERSION.split('.').map(Number);
  for (let i = 0; i < need.length; i++) {
    const a = have[i] ?? 0;
    const b = need[i] ?? 0;
    if (a !== b) return a > b;
  }
  return true;
}

/** The one-line message for an unsupported Node. */
export function unsupportedNodeMessage(version: string): string {
  return (
    `idmint needs Node.js ${MIN_NODE_VERSION} or later (Node 24 LTS recommended); this is ` +
    `Node.js ${version}`
  );
}

const running = globalThis.process?.versions?.node;
if (running !== undefined && !isSupportedNode(running))
  throw new Error(unsupportedNodeMessage(running));
