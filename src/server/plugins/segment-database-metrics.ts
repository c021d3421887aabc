import { Counter, Gauge, type Registry } from 'prom-client';
import type { SetDatabaseStats } from '../../stores/multi/multi-segment-store.ts';

/**
 * Per-database metrics of a set of segment databases (src/stores/multi/), read when scraped:
 * whether each database is in use or backing off after a failure, the ranges it allocated and the
 * calls that failed on it. Labelled by index (r: it issues IDs ≡ r mod N) and backend; the URL is
 * left out, as it may name a host operators keep private.
 */
export function watchSegmentDatabases(
  registry: Registry,
  databases: { stats(): SetDatabaseStats[] },
  prefix = 'idmint_',
): void {
  const registers = [registry];
  // The gauge, collected first in a scrape, takes the snapshot the counters read.
  let snapshot = databases.stats();
  const labels = (db: SetDatabaseStats) => ({ database: String(db.index), backend: db.backend });
  new Gauge({
    name: `${prefix}segment_database_up`,
    help:
      'A database of the set: 1 while allocations go to it, 0 while it is skipped after a ' +
      'failure.',
    labelNames: ['database', 'backend'],
    registers,
    collect() {
      snapshot = databases.stats();
      this.reset();
      for (const db of snapshot) this.set(labels(db), db.up ? 1 : 0);
    },
  });
  const counter = (name: string, help: string, read: (db: SetDatabaseStats) => number) =>
    new Counter({
      name: `${prefix}${name}`,
      help,
      labelNames: ['database', 'backend'],
      registers,
      collect() {
        this.reset();
        for (const db of snapshot) this.inc(labels(db), read(db));
      },
    });
  counter(
    'segment_database_allocations_total',
    'Ranges a database of the set allocated.',
    (db) => db.allocations,
  );
  counter(
    'segment_database_failures_total',
    'Calls that failed on a database of the set (unavailable or timed out).',
    (db) => db.failures,
  );
}
