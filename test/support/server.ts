import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { buildServer, type IdMintServer, type ServerOptions } from '../../src/server/app.ts';
import { defineConfig } from '../../src/config/load.ts';

/** A server built in-process for `app.inject()`, with its log lines captured. */
export interface TestServer extends IdMintServer {
  /** Every JSON log line written so far. */
  readonly logs: Record<string, unknown>[];
}

/**
 * Builds a server for in-process tests: segment tags in an in-memory SQLite database (real SQL,
 * nothing mocked, gone when the server closes), snowflake with the static registry and its state
 * file in a temporary directory, logs captured.
 * `values` is shaped like a config file and overrides those defaults.
 */
export async function testServer(
  values: Record<string, unknown> = {},
  options: ServerOptions = {},
): Promise<TestServer> {
  const logs: Record<string, unknown>[] = [];
  const logStream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n'))
        if (line !== '') logs.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  // The static registry's state file and host lock go to a directory of this server's own, never
  // ./data or the machine's /tmp/idmint.
  const stateDir = mkdtempSync(join(tmpdir(), 'idmint-test-server-'));
  const defaults = {
    segment: { store: 'sqlite::memory:' },
    snowflake: { stateDir, lockDir: join(stateDir, 'locks') },
    log: { level: 'info' },
  };
  const config = defineConfig(merge(defaults, values));
  let server: IdMintServer;
  try {
    server = await buildServer(config, { logStream, ...options });
  } catch (error) {
    rmSync(stateDir, { recursive: true, force: true });
    throw error;
  }
  const close = server.close.bind(server);
  return Object.assign(server, {
    logs,
    close: async () => {
      await close();
      rmSync(stateDir, { recursive: true, force: true });
    },
  });
}

function merge(
  base: Record<string, unknown>,
  over: Record<string, unknown>,
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(over)) {
    const current = out[key];
    out[key] =
      value !== null &&
      typeof value === 'object' &&
      !Array.isArray(value) &&
      current !== null &&
      typeof current === 'object' &&
      !Array.isArray(current)
        ? merge(current as Record<string, unknown>, value as Record<string, unknown>)
        : value;
  }
  return out;
}
