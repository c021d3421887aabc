import cluster, { type Worker } from 'node:cluster';
import { pino, type Logger } from 'pino';
import type { ServerConfig } from '../config/schema.ts';
import { EXIT_FAILURE } from './exit-codes.ts';
import type { CliExit } from './io.ts';
import { SLOT_ENV } from './process-slots.ts';

/** The message a child sends once it listens (see serve.ts). */
export interface ListeningMessage {
  readonly type: 'idmint-listening';
  readonly url: string;
}

export function isListeningMessage(message: unknown): message is ListeningMessage {
  return typeof message === 'object' && message !== null && (message as { type?: unknown }).type === 'idmint-listening';
}

/**
 * Restart backoff: the first restart of a slot after 100 ms, then doubling up to 10 s, so a child
 * that dies at once (its store down) is not restarted in a hot loop that burns the cores the
 * other children serve on. A child that served this long counts as healthy again.
 */
const FIRST_RESTART_MS = 100;
const MAX_RESTART_MS = 10_000;
const HEALTHY_AFTER_MS = 30_000;

interface Slot {
  readonly index: number;
  worker: Worker | undefined;
  /** When its current child started listening; undefined while it starts. */
  listeningSince: number | undefined;
  /** Restarts in a row without a child staying up {@link HEALTHY_AFTER_MS}. */
  failures: number;
  restart: ReturnType<typeof setTimeout> | undefined;
}

/**
 * The primary process of `idmint serve --processes N`: forks N children (node:cluster, so they
 * serve one port, `--port 0` included) each in a slot of its own (process-slots.ts), restarts a
 * child that dies, with backoff, and on SIGTERM or SIGINT passes the signal on to every child,
 * each of which then shuts down as a single process does (drain, give segment tails back, release
 * its worker ID), and ends when all of them have.
 *
 * Start-up is all or nothing: if a child ends before every child listens (port in use, store
 * unreachable), the others are stopped and the supervisor exits with that child's code; the
 * child has already said why on stderr.
 */
export async function supervise(config: ServerConfig, processes: number): Promise<CliExit> {
  const log = pino({ level: config.log.level, base: { service: 'idmint', pid: process.pid, role: 'supervisor' }, timestamp: pino.stdTimeFunctions.isoTime }, pino.destination({ dest: 1, sync: true }));
  const slots: Slot[] = Array.from({ length: processes }, (_, index) => ({ index, worker: undefined, listeningSince: undefined, failures: 0, restart: undefined }));
  let started = false;
  let stopping: NodeJS.Signals | 'start-up failed' | undefined;
  let failedWith: number | undefined;
  let finish: (exit: CliExit) => void = () => {};
  const done = new Promise<CliExit>((resolve) => (finish = resolve));

  const live = () => slots.filter((slot) => slot.worker !== undefined);
  const stopAll = (signal: NodeJS.Signals) => {
    for (const slot of slots) {
      clearTimeout(slot.restart);
      slot.restart = undefined;
      if (slot.worker !== undefined && slot.worker.process.exitCode === null) slot.worker.process.kill(signal);
    }
    if (live().length === 0) finish(failedWith ?? 0);
  };

  const fork = (slot: Slot) => {
    slot.restart = undefined;
    slot.listeningSince = undefined;
    const worker = cluster.fork({ [SLOT_ENV]: String(slot.index) });
    slot.worker = worker;
    worker.on('message', (message: unknown) => {
      if (!isListeningMessage(message)) return;
      slot.listeningSince = Date.now();
      log.info({ slot: slot.index, childPid: worker.process.pid, url: message.url }, 'process listening');
      if (!started && slots.every((s) => s.listeningSince !== undefined)) {
        started = true;
        log.info({ processes, url: message.url, childPids: slots.map((s) => s.worker?.process.pid) }, 'idmint processes listening');
      }
    });
    worker.on('exit', (code, signal) => {
      if (slot.worker !== worker) return;
      slot.worker = undefined;
      const ranFor = slot.listeningSince === undefined ? 0 : Date.now() - slot.listeningSince;
      if (stopping !== undefined) {
        // A child stopped by the signal passed on is a clean stop; anything else is reported.
        if (code !== 0 && signal !== stopping && stopping !== 'start-up failed') failedWith = EXIT_FAILURE;
        if (live().length === 0) finish(failedWith ?? 0);
        return;
      }
      if (!started) {
        log.error({ slot: slot.index, code, signal }, 'a process ended during start-up: stopping the others');
        stopping = 'start-up failed';
        failedWith = code === null || code === 0 ? EXIT_FAILURE : code;
        stopAll('SIGTERM');
        return;
      }
      slot.failures = ranFor >= HEALTHY_AFTER_MS ? 1 : slot.failures + 1;
      const delayMs = Math.min(MAX_RESTART_MS, FIRST_RESTART_MS * 2 ** (slot.failures - 1));
      log.warn({ slot: slot.index, childPid: worker.process.pid, code, signal, delayMs }, 'process ended: restarting it');
      slot.restart = setTimeout(() => fork(slot), delayMs);
    });
  };

  const onSignal = (signal: NodeJS.Signals) => {
    // Every signal is passed on: a child tells a copy of the first from a second one itself
    // (serve.ts), and a terminal's Ctrl-C reaches the children directly too.
    if (stopping === undefined) {
      stopping = signal;
      log.info({ signal }, 'signal received: stopping every process');
    }
    stopAll(signal);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    for (const slot of slots) fork(slot);
    return await done;
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    log.info({ processes }, 'idmint processes stopped');
  }
}
