import { Counter, type Registry } from 'prom-client';
import type { ErrorCode } from '../../core/errors.ts';

/**
 * Error answers sent, by code: the dashboard's server panel and `idmint_http_errors_total`. Codes
 * come from the registry in core/errors.ts, so the map (and the metric's label set) is bounded.
 */
export class ErrorCounts {
  readonly #counts = new Map<ErrorCode, number>();

  add(code: ErrorCode): void {
    this.#counts.set(code, (this.#counts.get(code) ?? 0) + 1);
  }

  /** Every code answered at least once, with its count, most frequent first. */
  entries(): { code: ErrorCode; count: number }[] {
    return [...this.#counts]
      .map(([code, count]) => ({ code, count }))
      .sort((a, b) => b.count - a.count || (a.code < b.code ? -1 : 1));
  }

  /** Exposes the counts as `<prefix>http_errors_total{code}` in `registry`. */
  register(registry: Registry, prefix = 'idmint_'): void {
    const counts = this.#counts;
    new Counter({
      name: `${prefix}http_errors_total`,
      help: 'Error answers sent, by error code (docs/errors.md).',
      labelNames: ['code'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [code, count] of counts) this.inc({ code }, count);
      },
    });
  }
}
