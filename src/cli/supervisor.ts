import cluster, { type Worker } from 'node:cluster';
import { pino } from 'pino';
import type { ServerConfig } from '../config/schema.ts';
import { EXIT_FAILURE, EXIT_GAVE_UP } from './exit-codes.ts';
import { guardHandoffs } from './handoff-guard.ts';
import { CommandFailure, type CliExit } from './io.ts';
import { SLOT_ENV } from './process-slots.ts';
import { decideRestart, HEALTHY_AFTER_MS } from './restart-policy.ts';
import { firstSignal, isSecondSignal, type FirstSignal } from './signals.ts';
import { StderrRelay } from './stderr-relay.ts';

/** The message a child sends once it listens (see serve.ts). */
export interface ListeningMessage {
  readonly type: 'idmint-listening';
  readonly url: string;
}

export function isListeningMessage(message: unknown): message is ListeningMessage {
  return (
    typeof message === 'object' &&
    message !== null &&
    (message as { type?: unknown }).type === 'idmint-listening'
  );
}

/**
 * After a forced stop has sent SIGKILL, how long the supervisor waits to see every child gone
 * before it exits anyway. A killed process is normally reaped within milliseconds; one stuck in
 * the kernel (a disk that does not answer) runs no more code either way.
 */
const KILLED_CHILDREN_WAIT_MS = 2000;

interface Slot {
  readonly index: number;
  worker: Worker | undefined;
  /** When its current child started listening; undefined while it starts. */
  listeningSince: number | undefined;
  /** Ends in a row without a child serving {@link HEALTHY_AFTER_MS} (restart-policy.ts). */
  failures: number;
  restart: ReturnType<typeof setTimeout> | undefined;
}

/** Why the supervisor is stopping its children. */
type Stopping =
  | { readonly by: 'signal'; readonly first: FirstSignal }
  | { readonly by: 'start-up failed' }
  | { readonly by: 'gave up' };

/**
 * The primary process of `idmint serve --processes N`: forks N children (node:cluster, so they
 * serve one port, `--port 0` included) each in a slot of its own (process-slots.ts), restarts a
 * child that ends, with backoff, and gives up on one that keeps ending (restart-policy.ts). On
 * SIGTERM or SIGINT it passes the signal on to every child, each of which then shuts down as a
 * single process does (drain, give segment tails back, release its worker ID), and ends when all
 * of them have; a second signal kills them all at once.
 *
 * Start-up is all or nothing: if a child ends before every child listens (port in use, store
 * unreachable), the others are stopped and the supervisor exits with that child's code; the
 * child has already said why on stderr.
 *
 * The children's stderr goes through the supervisor (their stdout, the logs, does not): it is
 * relayed line by line, and a child's last error line names the cause when the supervisor gives up.
 * A connection handed to a child that dies before taking it is closed (handoff-guard.ts).
 */
export async function supervise(config: ServerConfig, processes: number): Promise<CliExit> {
  const log = pino(
    {
      level: config.log.level,
      base: { service: 'idmint', pid: process.pid, role: 'supervisor' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    pino.destination({ dest: 1, sync: true }),
  );
  cluster.setupPrimary({ stdio: ['inherit', 'inherit', 'pipe', 'ipc'] });
  const slots: Slot[] = Array.from({ length: processes }, (_, index) => ({
    index,
    worker: undefined,
    listeningSince: undefined,
    failures: 0,
    restart: undefined,
  }));
  let started = false;
  let stopping: Stopping | undefined;
  /** How the supervisor ends once every child has: an exit code, or a failure to print. */
  let outcome: number | CommandFailure = 0;
  let finish: () => void = () => {};
  const done = new Promise<CliExit>((resolve, reject) => {
    finish = () => (outcome instanceof CommandFailure ? reject(outcome) : resolve(outcome));
  });

  const live = () => slots.filter((slot) => slot.worker !== undefined);
  const finishOnceAllEnded = () => {
    if (live().length === 0) finish();
  };
  const stopAll = (signal: NodeJS.Signals) => {
    for (const slot of slots) {
      clearTimeout(slot.restart);
      slot.restart = undefined;
      if (slot.worker !== undefined && slot.worker.process.exitCode === null)
        slot.worker.process.kill(signal);
    }
    finishOnceAllEnded();
  };

  /**
   * A second signal: every child is killed, none drains. This never lets two processes hold one
   * worker ID afterwards. Worker IDs belong to slots, and a slot gets a new child only after its
   * previous one has ended and only while nothing is stopping, so no restart follows; a child
   * killed with SIGKILL runs no more code, so issues no more IDs. The supervisor exits once it
   * has seen every child end (or after {@link KILLED_CHILDREN_WAIT_MS}), so whatever starts the
   * node again normally finds none of them. And should one still be in the kernel, the next
   * holder of its worker ID is held off as after any crash: a static worker ID by its state
   * file's OS lock (dropped only when the kernel has closed the dead child's files) and last
   * timestamp (written ahead of the clock, so the successor waits past every ID issued); a
   * coordinated registry's by the lease, which no one else gets before it expires.
   */
  const forceStop = (signal: NodeJS.Signals) => {
    log.warn({ signal }, 'second signal: killing every process');
    // Stopping after a failure already has its outcome (the failure's code and cause) to keep.
    if (stopping?.by === 'signal')
      outcome = new CommandFailure(
        `second signal (${signal}): forced stop, every process killed without finishing its ` +
          `shutdown`,
        EXIT_FAILURE,
      );
    stopAll('SIGKILL');
    setTimeout(finish, KILLED_CHILDREN_WAIT_MS);
  };

  const ended = (
    slot: Slot,
    worker: Worker,
    relay: StderrRelay,
    code: number | null,
    signal: NodeJS.Signals | null,
  ) => {
    if (slot.worker !== worker) return;
    slot.worker = undefined;
    const childPid = worker.process.pid;
    if (stopping !== undefined) {
      // A child stopped by the signal passed on is a clean stop; anything else is reported.
      if (
        stopping.by === 'signal' &&
        outcome === 0 &&
        code !== 0 &&
        signal !== stopping.first.signal
      )
        outcome = EXIT_FAILURE;
      finishOnceAllEnded();
      return;
    }
    if (!started) {
      log.error(
        { slot: slot.index, childPid, code, signal },
        'a process ended during start-up: stopping the others',
      );
      stopping = { by: 'start-up failed' };
      outcome = code === null || code === 0 ? EXIT_FAILURE : code;
      stopAll('SIGTERM');
      return;
    }
    const servedMs = slot.listeningSince === undefined ? 0 : Date.now() - slot.listeningSince;
    const decision = decideRestart(slot.failures, servedMs);
    slot.failures = decision.failures;
    const error = relay.lastError;
    if ('giveUp' in decision) {
      log.error(
        { slot: slot.index, childPid, code, signal, error, failures: decision.failures },
        'process keeps ending: giving up, stopping every process',
      );
      stopping = { by: 'gave up' };
      const how = signal === null ? `exit code ${String(code)}` : `killed by ${signal}`;
      outcome = new CommandFailure(
        `gave up: process ${slot.index} ended ${decision.failures} times in a row, each ` +
          `before serving ${HEALTHY_AFTER_MS / 1000} s; every process stopped. Its last end ` +
          `(${how}): ${error ?? 'no error printed'}`,
        EXIT_GAVE_UP,
      );
      stopAll('SIGTERM');
      return;
    }
    log.warn(
      {
        slot: slot.index,
        childPid,
        code,
        signal,
        error,
        failures: decision.failures,
        delayMs: decision.delayMs,
      },
      'process ended: restarting it',
    );
    slot.restart = setTimeout(() => fork(slot), decision.delayMs);
  };

  const fork = (slot: Slot) => {
    slot.restart = undefined;
    slot.listeningSince = undefined;
    const worker = cluster.fork({ [SLOT_ENV]: String(slot.index) });
    slot.worker = worker;
    guardHandoffs(worker.process);
    const { stderr } = worker.process;
    if (stderr === null) throw new Error('a child forked without its stderr pipe');
    const relay = new StderrRelay(stderr);
    worker.on('message', (message: unknown) => {
      if (!isListeningMessage(message)) return;
      slot.listeningSince = Date.now();
      log.info(
        { slot: slot.index, childPid: worker.process.pid, url: message.url },
        'process listening',
      );
      if (!started && slots.every((s) => s.listeningSince !== undefined)) {
        started = true;
        log.info(
          { processes, url: message.url, childPids: slots.map((s) => s.worker?.process.pid) },
          'idmint processes listening',
        );
      }
    });
    // 'close', not 'exit': by then the child's stderr is read to the end, its last error included.
    worker.process.once('close', (code, signal) => ended(slot, worker, relay, code, signal));
  };

  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping === undefined) {
      stopping = { by: 'signal', first: firstSignal(signal) };
      log.info({ signal }, 'signal received: stopping every process');
      stopAll(signal);
      return;
    }
    // A copy of the first (npm start passes a terminal's Ctrl-C on, which the children got from
    // the terminal too) changes nothing; any other signal while stopping forces the stop.
    if (stopping.by === 'signal' && !isSecondSignal(stopping.first, signal)) return;
    forceStop(signal);
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
