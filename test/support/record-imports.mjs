// Module hooks that append the URL of every module resolved to the file named by
// IDMINT_IMPORT_LOG, so a test can ask which drivers a code path loads. Passed to a child with
// `--import`: on the main thread it registers itself with module.register() (Node >= 20.6;
// registerHooks would need 22.15, above the supported 22.13), and in the hooks thread it resolves.
import { appendFileSync } from 'node:fs';
import { register } from 'node:module';
import { isMainThread } from 'node:worker_threads';

if (isMainThread) register(import.meta.url);

export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  appendFileSync(process.env.IDMINT_IMPORT_LOG, `${result.url}\n`);
  return result;
}
