// PostgreSQL: segment store and worker registry, through `pg`. A PostgreSQL-compatible database
// (CockroachDB, YugabyteDB) is a descriptor like this one under its own kind and schemes, opening
// the same driver; see docs/backends.md.

import { parseSqlServerUrl, sqlBackend, sqlServerPlace } from '../sql-backend.ts';

/** PostgreSQL (`postgres://`, `postgresql://`). */
export const postgresBackend = sqlBackend({
  kind: 'postgres',
  schemes: ['postgres', 'postgresql'],
  forms: {
    'segment-store': ['postgres://user:password@host:5432/database (or postgresql://)'],
    'worker-registry': ['postgres://user:password@host:5432/<database> (or postgresql://)'],
  },
  parse: (url) => parseSqlServerUrl(url, { defaultPort: 5432, hostInQuery: true }),
  ...sqlServerPlace(5432),
  async openDriver(address, pool) {
    const { PostgresDriver } = await import('../../sql/postgres-driver.ts');
    return PostgresDriver.open(address, pool);
  },
});
