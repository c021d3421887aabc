// How much other work an async call lets run: the turns of the event loop it leaves free.

/**
 * Runs `run` and counts the turns of the event loop other work got meanwhile: a callback that
 * re-arms itself with setImmediate runs once per turn. A call that never yields gives 0 or 1.
 */
export async function turnsDuring<T>(run: () => Promise<T>): Promise<{ value: T; turns: number }> {
  let turns = 0;
  let running = true;
  const tick = () => {
    turns++;
    if (running) setImmediate(tick);
  };
  setImmediate(tick);
  try {
    return { value: await run(), turns };
  } finally {
    running = false;
  }
}
