import type { Layout } from '../../core/layout.ts';

export { LEAF_JSON_TYPE } from './shared.ts';

/**
 * Leaf's `/decodeSnowflakeId`, answer for answer (LeafMonitorController.decodeSnowflakeId in
 * Leaf 86a6441, on Spring Boot 1.5): what its parameter is read from, how it is parsed, the
 * arithmetic, the key order and the bytes of the failure. Differences are in docs/api.md.
 */

/**
 * Leaf's answer to a parameter Long.parseLong refuses: its map holds only this key, with HTTP 200
 * ("snowflake ID reverse parsing raised an exception!").
 */
export const LEAF_DECODE_FAILURE = '{"errorMsg":"snowflake Id反解析发生异常!"}';

const LONG_MIN = -(2n ** 63n);
const LONG_MAX = 2n ** 63n - 1n;
const DECIMAL_DIGIT = /^\p{Nd}$/u;

/**
 * Java's `Long.parseLong(text)`: an optional `-` or `+`, then one or more decimal digits, the
 * value within a signed 64-bit long; undefined where Java throws NumberFormatException. A digit is
 * any UTF-16 unit `Character.digit(c, 10)` takes: every Unicode decimal digit of the BMP (`١٢`
 * is 12), none outside it (a surrogate is not a digit). Leading zeros are allowed (`00012`).
 */
export function parseJavaLong(text: string): bigint | undefined {
  let i = 0;
  let negative = false;
  const first = text.charCodeAt(0);
  if (first === 0x2d || first === 0x2b) {
    negative = first === 0x2d;
    i = 1;
  }
  if (i >= text.length) return undefined;
  let value = 0n;
  for (; i < text.length; i++) {
    const digit = javaDigit(text.charCodeAt(i));
    if (digit < 0) return undefined;
    value = value * 10n + BigInt(digit);
    // Past any long already: stop, so a million digits cost no more than twenty.
    if (value > -LONG_MIN) return undefined;
  }
  const signed = negative ? -value : value;
  return signed < LONG_MIN || signed > LONG_MAX ? undefined : signed;
}

/** `Character.digit(unit, 10)`: the digit's value, or -1. */
function javaDigit(unit: number): number {
  if (unit >= 0x30 && unit <= 0x39) return unit - 0x30;
  if (!DECIMAL_DIGIT.test(String.fromCharCode(unit))) return -1;
  // Every run of decimal digits in the BMP is one script's 0-9, and no two runs touch (a test
  // checks both), so a digit's value is its distance from the start of its run.
  let zero = unit;
  while (DECIMAL_DIGIT.test(String.fromCharCode(zero - 1))) zero--;
  return unit - zero;
}

/**
 * The value of Spring's `@RequestParam String` named `name`: every value the query string holds,
 * then every value of a form body, joined with `,` when there are several (Spring converts the
 * String[] so); undefined when there is none. `form` is the body of a request Tomcat (POST) or
 * Spring Boot's HttpPutFormContentFilter (PUT, PATCH) reads as a form, else undefined.
 */
export function springParameter(
  url: string,
  name: string,
  form: string | undefined,
): string | undefined {
  const query = url.indexOf('?');
  const values = query < 0 ? [] : new URLSearchParams(url.slice(query + 1)).getAll(name);
  if (form !== undefined) values.push(...new URLSearchParams(form).getAll(name));
  return values.length === 0 ? undefined : values.join(',');
}

/**
 * Whether Leaf's server reads the body of a request as a form: a POST whose Content-Type is
 * exactly `application/x-www-form-urlencoded` before any `;` (Tomcat compares it as it is), or a
 * PUT or PATCH whose type is that in any case (HttpPutFormContentFilter parses it).
 */
export function readsForm(method: string, contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const type = (contentType.split(';', 1)[0] ?? '').trim();
  if (method === 'POST') return type === 'application/x-www-form-urlencoded';
  if (method === 'PUT' || method === 'PATCH')
    return type.toLowerCase() === 'application/x-www-form-urlencoded';
  return false;
}

/**
 * Leaf's answer body for `id`: its arithmetic on a Java long, generalised to `layout` (for `leaf`
 * exactly Leaf's: `(id >> 22) + twepoch`, `(id >> 12) ^ (id >> 22 << 10)`,
 * `id ^ (id >> 12 << 12)`), so a negative or oversized ID decodes as Leaf decodes it. The keys in
 * the order Java's HashMap iterates them (`workerId`, `sequenceId`, `timestamp`; `datacenterId`,
 * idmint's for layouts with one, falls between the first two); the time in UTC.
 */
export function leafDecodeBody(id: bigint, layout: Layout): string {
  const field = (shift: number, bits: number): bigint =>
    (id >> BigInt(shift)) ^ ((id >> BigInt(shift + bits)) << BigInt(bits));
  const timestamp =
    (id >> BigInt(layout.timeShift)) * BigInt(layout.timeUnitMs) + BigInt(layout.epochMs);
  const body: Record<string, string> = {
    workerId: String(field(layout.workerShift, layout.workerBits)),
  };
  if (layout.datacenterBits > 0)
    body['datacenterId'] = String(field(layout.datacenterShift, layout.datacenterBits));
  body['sequenceId'] = String(
    id ^ ((id >> BigInt(layout.sequenceBits)) << BigInt(layout.sequenceBits)),
  );
  body['timestamp'] = `${timestamp}(${javaDate(Number(timestamp))})`;
  return JSON.stringify(body);
}

/** SimpleDateFormat("yyyy-MM-dd HH:mm:ss.SSS") of `ms`, in UTC. */
function javaDate(ms: number): string {
  const date = new Date(ms);
  const pad = (value: number, width: number) => String(value).padStart(width, '0');
  return (
    `${pad(date.getUTCFullYear(), 4)}-${pad(date.getUTCMonth() + 1, 2)}-` +
    `${pad(date.getUTCDate(), 2)} ${pad(date.getUTCHours(), 2)}:` +
    `${pad(date.getUTCMinutes(), 2)}:${pad(date.getUTCSeconds(), 2)}.` +
    pad(date.getUTCMilliseconds(), 3)
  );
}
