import { ERROR_CODES, IdMintError, type ErrorCode } from '../core/errors.ts';

// How the client reads a failed answer, shared by the per-request client and local mode's
// server pool. No Node-only import: the client runs wherever `fetch` does.

/** The server's JSON error as an IdMintError, with its status and Retry-After in `details`. */
export async function errorFrom(response: Response): Promise<IdMintError> {
  const text = await response.text();
  let parsed: { error?: { code?: unknown; message?: unknown } } | undefined;
  try {
    parsed = JSON.parse(text) as typeof parsed;
  } catch {
    parsed = undefined;
  }
  const code =
    typeof parsed?.error?.code === 'string' && Object.hasOwn(ERROR_CODES, parsed.error.code)
      ? (parsed.error.code as ErrorCode)
      : undefined;
  const retryAfter = Number(response.headers.get('retry-after'));
  const details = {
    status: response.status,
    ...(Number.isFinite(retryAfter) && retryAfter > 0 ? { retryAfterMs: retryAfter * 1000 } : {}),
  };
  if (code === undefined) {
    // Not an idmint answer (a proxy's error page, say): keep the status, and retry a 502-504.
    const gateway = response.status >= 502 && response.status <= 504;
    return new IdMintError(
      gateway ? 'SERVER_UNAVAILABLE' : 'INTERNAL_ERROR',
      `HTTP ${response.status} without an idmint error body: ${text.slice(0, 200)}`,
      { details },
    );
  }
  return new IdMintError(
    code,
    typeof parsed?.error?.message === 'string' ? parsed.error.message : code,
    { details },
  );
}

export function unreachable(base: string, error: unknown): IdMintError {
  const reason =
    error instanceof Error
      ? ((error.cause as Error | undefined)?.message ?? error.message)
      : String(error);
  return new IdMintError('SERVER_UNAVAILABLE', `idmint server ${base} did not answer: ${reason}`, {
    cause: error,
  });
}
