/**
 * The value of the sample with exactly this name and label set in a Prometheus text exposition
 * (`idmint_http_errors_total{code="FORBIDDEN"}`), or undefined when there is none.
 */
export function metricSample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}
