// A worker registry whose calls share one wait until its coordinator first answers: a worker's
// start asks twice in a row (the peers' clocks, then a worker ID), and each call waited out the
// whole registryTimeoutMs or more (a black-holed etcd failed a start with a 2 s timeout after
// 4 s: etcd3 retries a call that ran out of time, each try with a deadline of its own; a SQL
// registry after 8 s). See shared/first-answer.ts.

import { IdMintError, isIdMintError } from '../core/errors.ts';
import type {
  AcquireRequest,
  PeerTime,
  WorkerLease,
  WorkerRegistry,
} from '../ports/worker-registry.ts';
import { registryDoing } from '../registries/common.ts';
import { failureLine, saysNoAnswer } from '../shared/failure-cause.ts';
import { FirstAnswer } from '../shared/first-answer.ts';

/** True for a REGISTRY_UNAVAILABLE that says the coordinator did not answer at all. */
function unanswered(error: unknown): boolean {
  return isIdMintError(error, 'REGISTRY_UNAVAILABLE') && saysNoAnswer(error.message);
}

/**
 * `registry` with acquire and peers sharing one wait until the coordinator first answers: each
 * is bounded by `timeoutMs` as a whole (not per round trip or driver retry), and a call that
 * found no answer stands for the calls just after it. Once the coordinator has answered, calls
 * go straight through, bounded by the adapter alone.
 */
export class FirstAnswerRegistry implements WorkerRegistry {
  readonly #registry: WorkerRegistry;
  readonly #where: string;
  readonly #timeoutMs: number;
  readonly #firstAnswer = new FirstAnswer();

  /** `where`: the address for messages (host:port, no credentials). */
  constructor(registry: WorkerRegistry, where: string, timeoutMs: number) {
    this.#registry = registry;
    this.#where = where;
    this.#timeoutMs = timeoutMs;
  }

  get backend(): string {
    return this.#registry.backend;
  }

  acquire(request: AcquireRequest): Promise<WorkerLease> {
    return this.#run(() => this.#registry.acquire(request), registryDoing.acquire);
  }

  peers(): Promise<PeerTime[]> {
    return this.#run(() => this.#registry.peers(), registryDoing.peers);
  }

  close(): Promise<void> {
    return this.#registry.close();
  }

  #run<T>(call: () => Promise<T>, doing: string): Promise<T> {
    return this.#firstAnswer.run(() => this.#bounded(call(), doing), unanswered);
  }

  /**
   * `pending`, failed after the timeout unless the coordinator has answered meanwhile (another
   * call did): then it is a live coordinator's, bounded by the adapter alone, as any call is.
   */
  #bounded<T>(pending: Promise<T>, doing: string): Promise<T> {
    if (this.#firstAnswer.answered) return pending;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        if (this.#firstAnswer.answered) return;
        const cause = `timed out after ${this.#timeoutMs} ms`;
        const line = failureLine(this.backend, 'worker registry', this.#where, doing, cause);
        reject(
          new IdMintError('REGISTRY_UNAVAILABLE', line, { details: { backend: this.backend } }),
        );
      }, this.#timeoutMs);
      pending.then(resolve, reject).finally(() => clearTimeout(timer));
    });
  }
}
