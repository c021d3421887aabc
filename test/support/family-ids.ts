// Child process for test/families-processes.test.ts: makes one generator of the family named in
// argv[2], says "ready" on stderr, waits for a line on stdin (so all processes start together),
// then draws argv[3] IDs at full speed and prints them, one per line.
import { once } from 'node:events';
import { MonotonicClock } from '../../src/clocks/monotonic-clock.ts';
import { ObjectIdGenerator } from '../../src/core/objectid.ts';
import { UlidGenerator } from '../../src/core/ulid.ts';
import { UuidV4Generator, UuidV7Generator } from '../../src/core/uuid.ts';

const family = process.argv[2];
const count = Number(process.argv[3]);
const clock = new MonotonicClock();
const generator =
  family === 'uuidv7'
    ? new UuidV7Generator({ clock })
    : family === 'uuidv4'
      ? new UuidV4Generator()
      : family === 'ulid'
        ? new UlidGenerator({ clock })
        : family === 'objectid'
          ? new ObjectIdGenerator({ clock })
          : undefined;
if (generator === undefined || !Number.isSafeInteger(count) || count < 1) {
  process.stderr.write(
    `usage: family-ids.ts uuidv7|uuidv4|ulid|objectid <count>, got ` +
      `${process.argv.slice(2).join(' ')}\n`,
  );
  process.exit(2);
}
process.stderr.write('ready\n');
await once(process.stdin, 'data');
process.stdin.pause();
const ids = generator.nextBatch(count);
process.stdout.write(`${ids.join('\n')}\n`);
