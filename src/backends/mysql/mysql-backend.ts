// MySQL and MariaDB: segment store and worker registry, through `mysql2`.

import { parseSqlServerUrl, sqlBackend, sqlServerPlace } from '../sql-backend.ts';

/** MySQL or MariaDB (`mysql://`, `mariadb://`). */
export const mysqlBackend = sqlBackend({
  kind: 'mysql',
  schemes: ['mysql', 'mariadb'],
  forms: {
    'segment-store': ['mysql://user:password@host:3306/database (or mariadb://; MySQL or MariaDB)'],
    'worker-registry': ['mysql://user:password@host:3306/<database> (or mariadb://)'],
  },
  parse: (url) => parseSqlServerUrl(url, { defaultPort: 3306 }),
  ...sqlServerPlace(3306),
  async openDriver(address, pool) {
    const { MysqlDriver } = await import('../../sql/mysql-driver.ts');
    return MysqlDriver.open(address, pool);
  },
});
