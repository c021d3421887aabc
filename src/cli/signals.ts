/**
 * The same signal again within this long is a copy of the first, not a second request: under
 * `npm start`, a terminal's Ctrl-C reaches the server twice, once from the terminal (to the whole
 * process group) and once from npm, which passes the signals it gets on to its child.
 */
const DUPLICATE_SIGNAL_MS = 1000;

/** The first stop signal a process got, and when (`performance.now()`). */
export interface FirstSignal {
  readonly signal: NodeJS.Signals;
  readonly at: number;
}

export function firstSignal(signal: NodeJS.Signals): FirstSignal {
  return { signal, at: performance.now() };
}

/**
 * Whether `signal`, arriving after `first`, asks for a forced stop rather than being a copy of the
 * first.
 */
export function isSecondSignal(first: FirstSignal, signal: NodeJS.Signals): boolean {
  return signal !== first.signal || performance.now() - first.at >= DUPLICATE_SIGNAL_MS;
}
