// The IssuerLeases conformance suite (test/support/issuer-lease-suite.ts) on every store that
// keeps issuer leases, each on a table (or key prefix) of its own.
import { ISSUER_TABLE } from '../src/stores/issuer-support.ts';
import { runIssuerLeaseSuite } from './support/issuer-lease-suite.ts';
import { SEGMENT_BACKENDS } from './support/segment-backends.ts';
import { describeWithServices } from './support/services.ts';

for (const backend of Object.values(SEGMENT_BACKENDS)) {
  if (backend.name === 'redis') continue;
  await describeWithServices(`IssuerLeases conformance: ${backend.name}`, backend.services, () => {
    runIssuerLeaseSuite({
      create: async () => {
        const fixture = await backend.open();
        return {
          store: fixture.store,
          openAnother: (options) => fixture.openAnother(options),
          processArgs: [fixture.table, fixture.url],
          async dispose() {
            await fixture.dispose();
            const where = `WHERE segment_table = '${fixture.table}'`;
            if (backend.name !== 'sqlite')
              await backend.sql?.(fixture.url, `DELETE FROM ${ISSUER_TABLE} ${where}`);
          },
        };
      },
    });
  });
}
