import { availableParallelism } from 'node:os';
import type { ServerConfig } from '../config/schema.ts';

/**
 * What differs between the processes of `idmint serve --processes N`: each runs in a slot
 * (0 to N-1) that the supervisor gives it, and a process started to replace a dead one takes the
 * dead one's slot. Everything that must never be shared between two live processes is derived
 * from the slot here, so it is decided in one place.
 */

/**
 * The variable through which the supervisor tells a child its slot. Internal: not a configuration
 * key (nothing an operator sets), so not under the IDMINT_ prefix the keys use.
 */
export const SLOT_ENV = 'IDMINT__PROCESS_SLOT';

/** `processes` as configured: a count, or `auto` for the number of CPUs this process may use. */
export function processCount(config: ServerConfig): number {
  return config.processes === 'auto' ? availableParallelism() : config.processes;
}

/** The slot the supervisor gave this process, or undefined when it runs alone. */
export function processSlot(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const raw = env[SLOT_ENV];
  return raw !== undefined && /^[0-9]{1,2}$/.test(raw) ? Number(raw) : undefined;
}

const STATIC = /^static:([0-9]+)$/;

/**
 * The flags that give the child in `slot` what it must not share with its siblings, on top of the
 * operator's own flags (flags win over files and variables):
 *
 * - a static registry `static:K` becomes `static:K+slot`. Worker IDs K to K+N-1 are this node's,
 *   each with its own state file (`idmint-worker-<id>.json`) and its locks (the state file's and
 *   the worker ID's host-wide one); a child that replaces a dead one takes the same worker ID and
 *   state file, whose last timestamp makes it wait until its clock is past every ID the dead one
 *   could have issued (as any restart does).
 *   A coordinated registry needs nothing: it never hands one worker ID to two live leases.
 * - the worker cache file (the worker ID this node last held, for starting while the registry is
 *   down) gets a `.<slot>` suffix: two processes starting offline from one file would both take
 *   the one worker ID it names (the file's lock would refuse the second child).
 */
export function slotFlags(config: ServerConfig, slot: number): Record<string, string> {
  const flags: Record<string, string> = {};
  const match = STATIC.exec(config.snowflake.registry);
  if (match !== null) flags['worker-registry'] = `static:${Number(match[1]) + slot}`;
  if (config.snowflake.cacheFile !== '')
    flags['worker-cache-file'] = `${config.snowflake.cacheFile}.${slot}`;
  return flags;
}
