// A node:test reporter that keeps a green run honest: it fails the run when no test ran at all
// (a glob that matched nothing), and lists every skipped test loudly. With
// IDMINT_REQUIRE_SERVICES=1 (CI), any skipped test fails the run: a suite skipped because its
// service was unreachable must never be reported as passing.
export default async function* guardReporter(source) {
  let ran = 0;
  const skipped = [];
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    if (event.data.details?.type === 'suite') continue;
    if (event.data.skip !== undefined && event.data.skip !== false) {
      skipped.push(
        `${event.data.name}${typeof event.data.skip === 'string' ? ` (${event.data.skip})` : ''}`,
      );
    } else {
      ran++;
    }
  }
  if (skipped.length > 0) {
    yield `\n!!! ${skipped.length} test(s) SKIPPED, not ` +
      `run:\n${skipped.map((name) => `!!!   ${name}`).join('\n')}\n`;
    if (process.env.IDMINT_REQUIRE_SERVICES === '1') {
      process.exitCode = 1;
      yield '!!! IDMINT_REQUIRE_SERVICES=1: a skipped test fails the run.\n';
    }
  }
  if (ran === 0) {
    process.exitCode = 1;
    yield '\n!!! No tests ran: failing the run.\n';
  } else {
    yield `\n${ran} tests ran.\n`;
  }
}
