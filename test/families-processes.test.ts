import assert from 'node:assert/strict';
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import type { Readable, Writable } from 'node:stream';
import { decodeObjectId } from '../src/core/objectid.ts';
import { decodeUlid } from '../src/core/ulid.ts';
import { decodeUuid } from '../src/core/uuid.ts';

const CHILD = fileURLToPath(new URL('./support/family-ids.ts', import.meta.url));
const PROCESSES = 4;
const PER_PROCESS = 250_000; // 4 x 250,000: a million IDs per family

interface Child {
  readonly process: ChildProcessByStdio<Writable, Readable, Readable>;
  readonly ready: Promise<void>;
  readonly done: Promise<string[]>;
}

function startChild(family: string): Child {
  const child = spawn(
    process.execPath,
    ['--disable-warning=ExperimentalWarning', CHILD, family, String(PER_PROCESS)],
    { stdio: ['pipe', 'pipe', 'pipe'], timeout: 120_000 },
  );
  const out: Buffer[] = [];
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
  const ready = new Promise<void>((resolve, reject) => {
    child.stderr.on('data', (chunk: Buffer) => {
      err += chunk.toString('utf8');
      if (err.includes('ready\n')) resolve();
    });
    child.on('close', (code) =>
      reject(new Error(`child exited (${String(code)}) before it was ready: ${err}`)),
    );
  });
  const done = new Promise<string[]>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`${family} child exited ${String(code)}: ${err}`));
      else resolve(Buffer.concat(out).toString('utf8').trimEnd().split('\n'));
    });
  });
  return { process: child, ready, done };
}

/** Starts the processes, releases them together once all are ready, and returns their IDs. */
async function drawInProcesses(family: string): Promise<string[][]> {
  const children = Array.from({ length: PROCESSES }, () => startChild(family));
  await Promise.all(children.map((c) => c.ready));
  for (const c of children) c.process.stdin.end('go\n');
  return Promise.all(children.map((c) => c.done));
}

const FAMILIES = [
  { family: 'uuidv7', ordered: true, time: (id: string) => decodeUuid(id).timestamp ?? -1 },
  { family: 'ulid', ordered: true, time: (id: string) => decodeUlid(id).timestamp },
  { family: 'objectid', ordered: false, time: (id: string) => decodeObjectId(id).timestamp },
  { family: 'uuidv4', ordered: false, time: () => 0 },
];

const perProcessText = PER_PROCESS.toLocaleString('en-US');
describe(`ID families from ${PROCESSES} processes, ${perProcessText} IDs each`, () => {
  for (const { family, ordered, time } of FAMILIES) {
    const total = (PROCESSES * PER_PROCESS).toLocaleString('en-US');
    const order = ordered ? ', each process strictly increasing' : '';
    it(`${family}: ${total} IDs, no collision across processes${order}`, async () => {
      const perProcess = await drawInProcesses(family);
      const all = new Set<string>();
      const spans: [number, number][] = [];
      for (const ids of perProcess) {
        assert.equal(ids.length, PER_PROCESS);
        for (let i = 0; i < ids.length; i++) {
          const id = ids[i] as string;
          if (ordered && i > 0 && id <= (ids[i - 1] as string))
            assert.fail(`${id} after ${ids[i - 1]} in one process`);
          all.add(id);
        }
        spans.push([time(ids[0] as string), time(ids.at(-1) as string)]);
      }
      assert.equal(
        all.size,
        PROCESSES * PER_PROCESS,
        `${PROCESSES * PER_PROCESS - all.size} IDs collided across processes`,
      );
      if (family === 'objectid') {
        const randoms = new Set(
          perProcess.map((ids) => decodeObjectId(ids[0] as string).processRandom),
        );
        assert.equal(randoms.size, PROCESSES, 'each process drew its own 5 random bytes');
      }
      if (ordered || family === 'objectid') {
        // The processes ran at the same time: some two of them issued within a shared time span,
        // so uniqueness rested on the random bits, not on the clock.
        const overlap = spans.some(([from, to], i) =>
          spans.some(([f2, t2], j) => i !== j && from <= t2 && f2 <= to),
        );
        assert.ok(overlap, `no two processes overlapped in time: ${JSON.stringify(spans)}`);
      }
    });
  }
});
