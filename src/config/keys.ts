import Type, { type TSchema } from 'typebox';
import { urlFormsText } from '../backends/catalog.ts';
import type { BackendRole as UrlRole } from '../backends/descriptor.ts';
import { MAX_TIMER_MS } from '../core/time.ts';

/**
 * The building blocks of the configuration schema: one TypeBox schema per key, carrying its bounds
 * (`minimum`, `maximum`, `pattern`, `enum` ...) as JSON Schema and, under {@link KEY}, what idmint
 * adds: the environment variable, how a value written as text is read, and the phrase that says
 * what is allowed. Every component's schema (server.ts, auth.ts, segment.ts, snowflake.ts,
 * logging.ts) is made of these, so a bound is written once and the docs, `--help`, `config check`
 * and the error messages all read it from there.
 */

/** The property of a key's schema that holds its {@link KeyInfo}. */
export const KEY = 'x-idmint';

/**
 * How a value written as text (an environment variable, a flag) becomes the key's value. Files may
 * also give numbers, booleans, lists and objects, which are taken as they are.
 *
 * - `integer`: plain decimal digits only (no `1e3`, `0x10`, `1.0`);
 * - `decimal`: a plain decimal fraction (`0.25`, `.5`, `1`);
 * - `on-off`: true/1/yes/on or false/0/no/off, any case;
 * - `trimmed`: the text without surrounding spaces;
 * - `token-list`: `TOKEN` or `TOKEN:tag1|tag2|prefix*`, comma-separated;
 * - `url-list`: URLs, comma-separated (a comma inside a URL is written `%2C`).
 */
export type TextForm = 'integer' | 'decimal' | 'on-off' | 'trimmed' | 'token-list' | 'url-list';

/** What a configuration key adds to its JSON Schema. */
export interface KeyInfo {
  /**
   * Environment variable; the CLI flag is derived from it (`IDMINT_SEGMENT_STORE` is
   * `--segment-store`).
   */
  readonly env: string;
  /** A variable read only when `env` is unset: platform conventions such as `PORT`. */
  readonly fallbackEnv?: string;
  /** What is allowed, for messages, docs and `--help`: "an integer from 0 to 65535". */
  readonly allowed: string;
  readonly text: TextForm;
  /** True when the value must never be printed (tokens). */
  readonly secret?: true;
  /** A backend URL: checked whole through the backend catalog (src/backends/). */
  readonly url?: UrlRole;
}

/**
 * A part of a compound key (an entry of `auth.tokens`): how to say what is wrong with it. `%s`
 * stands for the offending value; `name` names an object in "unknown field" messages.
 */
export interface PartInfo {
  readonly problem?: string;
  readonly name?: string;
}

/** The property of a sub-schema that holds its {@link PartInfo}. */
export const PART = 'x-idmint-part';

/** A key's schema: any TypeBox schema with its {@link KeyInfo}. */
export type KeySchema = TSchema & {
  readonly [KEY]: KeyInfo;
  readonly default: unknown;
  readonly description: string;
};

/** Common fields of every key builder. */
interface KeyOptions<T> {
  readonly env: string;
  readonly default: T;
  /** One line for docs, `--help` and `config check`. */
  readonly doc: string;
}

function annotate(
  doc: string,
  fallback: unknown,
  info: KeyInfo,
): { description: string; default: unknown; [KEY]: KeyInfo } {
  return { description: doc, default: fallback, [KEY]: Object.freeze(info) };
}

/** True for a key's schema (as opposed to a component, an object of keys). */
export function isKeySchema(schema: unknown): schema is KeySchema {
  return schema !== null && typeof schema === 'object' && KEY in schema;
}

/** A whole number from `min` to `max`. */
export function integer(
  options: KeyOptions<number> & {
    readonly min: number;
    readonly max: number;
    readonly fallbackEnv?: string;
  },
) {
  const { env, doc, min, max, fallbackEnv } = options;
  return Type.Integer({
    minimum: min,
    maximum: max,
    ...annotate(doc, options.default, {
      env,
      allowed: `an integer from ${min} to ${max}`,
      text: 'integer',
      ...(fallbackEnv === undefined ? {} : { fallbackEnv }),
    }),
  });
}

/**
 * A duration in ms that ends up in a timer (directly or as a derived one): its maximum must stay
 * below 2^31 ms, which Node clamps to 1 ms. Checked here, where the schema is written, so no key
 * can be declared with a bound the timers cannot honour.
 */
export function duration(
  options: KeyOptions<number> & { readonly min: number; readonly max: number },
) {
  if (options.max > MAX_TIMER_MS) {
    throw new Error(
      `${options.env}: a duration's maximum must be at most ${MAX_TIMER_MS} ms (Node clamps ` +
        `longer timers to 1 ms), got ${options.max}`,
    );
  }
  return integer(options);
}

/**
 * A whole number that is either `off` (0, "use the default" or "never") or from `min` to `max`.
 * Also a duration: the maximum is checked against the timers' limit.
 */
export function durationOrZero(
  options: KeyOptions<number> & {
    readonly min: number;
    readonly max: number;
    readonly zero: string;
  },
) {
  const { env, doc, min, max, zero } = options;
  if (max > MAX_TIMER_MS)
    throw new Error(`${env}: a duration's maximum must be at most ${MAX_TIMER_MS} ms, got ${max}`);
  return Type.Union([Type.Literal(0), Type.Integer({ minimum: min, maximum: max })], {
    ...annotate(doc, options.default, {
      env,
      allowed: `0 (${zero}), or an integer from ${min} to ${max}`,
      text: 'integer',
    }),
  });
}

/**
 * A whole number from `min` to `max`, or a word that stands for one found at run time (`auto`:
 * the number of CPUs). Read as text like {@link integer}; the word passes through as itself.
 */
export function integerOrWord<const W extends string>(
  options: KeyOptions<number | W> & {
    readonly min: number;
    readonly max: number;
    readonly word: W;
    readonly meaning: string;
  },
) {
  const { env, doc, min, max, word, meaning } = options;
  return Type.Union([Type.Literal(word), Type.Integer({ minimum: min, maximum: max })], {
    ...annotate(doc, options.default, {
      env,
      allowed: `an integer from ${min} to ${max}, or ${word} (${meaning})`,
      text: 'integer',
    }),
  });
}

/** A number from `min` to `max`, fractions allowed. */
export function decimal(
  options: KeyOptions<number> & { readonly min: number; readonly max: number },
) {
  const { env, doc, min, max } = options;
  return Type.Number({
    minimum: min,
    maximum: max,
    ...annotate(doc, options.default, {
      env,
      allowed: `a number from ${min} to ${max}`,
      text: 'decimal',
    }),
  });
}

/** On or off: as a flag, `--name` / `--no-name` (or `--name=false`). */
export function onOff(options: KeyOptions<boolean>) {
  const { env, doc } = options;
  return Type.Boolean(
    annotate(doc, options.default, {
      env,
      allowed: 'true or false (also 1/0, yes/no, on/off)',
      text: 'on-off',
    }),
  );
}

/** One of a fixed list of words. */
export function oneOf<const T extends readonly string[]>(
  options: KeyOptions<T[number]> & { readonly values: T },
) {
  const { env, doc, values } = options;
  return Type.Enum<[...T]>(
    [...values],
    annotate(doc, options.default, {
      env,
      allowed: `one of ${values.join(', ')}`,
      text: 'trimmed',
    }),
  );
}

/** Text matching `pattern`; `allowed` says in words what the pattern allows. */
export function text(
  options: KeyOptions<string> & {
    readonly pattern: RegExp;
    readonly allowed: string;
    readonly secret?: true;
  },
) {
  const { env, doc, pattern, allowed, secret } = options;
  return Type.String({
    pattern: pattern.source,
    ...annotate(doc, options.default, {
      env,
      allowed,
      text: 'trimmed',
      ...(secret === undefined ? {} : { secret }),
    }),
  });
}

/**
 * A backend URL. Only the scheme is checked here: the store or registry checks the rest when it
 * opens, with the key's name in its message.
 */
export function backendUrl(options: KeyOptions<string> & { readonly role: UrlRole }) {
  const { env, doc, role } = options;
  // The whole URL (scheme, hosts, ports, a Redis database) is checked by load.ts through
  // the backend catalog, where each backend reads its own URLs, so its message is the one shown.
  return Type.String({
    minLength: 1,
    ...annotate(doc, options.default, {
      env,
      allowed: `one of: ${urlFormsText(role)}`,
      text: 'trimmed',
      url: role,
    }),
  });
}

/**
 * A list of backend URLs (at most `max`), each checked whole through the catalog like a
 * {@link backendUrl}. Comma-separated in a variable or flag; a list in a file.
 */
export function backendUrlList(
  options: KeyOptions<readonly string[]> & { readonly role: UrlRole; readonly max: number },
) {
  const { env, doc, role, max } = options;
  return Type.Array(Type.String({ minLength: 1 }), {
    maxItems: max,
    ...annotate(doc, options.default, {
      env,
      allowed:
        `none, or a comma-separated list (in a file, a list) of up to ${max} URLs, each one ` +
        `of: ${urlFormsText(role)}`,
      text: 'url-list',
      url: role,
    }),
  });
}

/** A schema for a compound key's part, with what to say when it is wrong. */
export function part<T extends TSchema>(schema: T, info: PartInfo): T {
  return Object.assign(schema, { [PART]: Object.freeze({ ...info }) });
}

/** The CLI flag of a variable: `IDMINT_SEGMENT_STORE` -> `segment-store`. */
export function flagName(env: string): string {
  return env
    .replace(/^IDMINT_/, '')
    .toLowerCase()
    .replaceAll('_', '-');
}
