import { IdMintError } from './errors.ts';
import { MAX_TAG_LENGTH } from './segment-limits.ts';
import type { PeriodicOptions, PeriodUnit } from '../ports/segment-store.ts';

export type { PeriodicOptions, PeriodUnit };

/**
 * Periodic sequences (docs/segments.md, Periodic sequences): a tag whose sequence restarts each
 * day or month, served as formatted IDs such as `20261127000042` from `{yyyyMMdd}{seq:6}`. Each
 * period draws from its own row, `<tag>@<period key>`, an ordinary segment row. This file holds
 * the pure parts: the template, the period an instant falls in (in an IANA time zone, through
 * Intl) and where a period starts and ends. The service (service/periodic-segments.ts) decides
 * when a node may serve a period.
 */

/** The reset periods a tag may take. */
export const PERIOD_UNITS: readonly PeriodUnit[] = ['day', 'month'];

/** Longest template: a formatted ID is meant to be read and typed. */
export const MAX_TEMPLATE_LENGTH = 64;
/** Most digits a sequence may have: 10^18-1 is below 2^63-1, so it fits any row. */
export const MAX_SEQ_DIGITS = 18;
/** Most digits of an all-digit ID: 18 always fits a signed 64-bit integer (Java's long). */
export const MAX_NUMERIC_DIGITS = 18;
/** Separates a tag from its period key in the row's name: `orders@20261127`. */
export const PERIOD_SEPARATOR = '@';
/**
 * Characters allowed between tokens: those a URL, a JSON string or a log line carry as they are.
 */
const LITERAL = /^[A-Za-z0-9_.:-]*$/;

type Field = 'yyyy' | 'yy' | 'MM' | 'dd';
/** One piece of a parsed template. */
export type Part =
  | { readonly kind: 'literal'; readonly text: string }
  | { readonly kind: 'field'; readonly field: Field }
  | { readonly kind: 'seq'; readonly digits: number };

/** A period: its key (`20261127`, `202611`) and the calendar fields the template prints. */
export interface Period {
  /** `yyyyMMdd` for a day, `yyyyMM` for a month: sorts as the periods follow each other. */
  readonly key: string;
  readonly year: number;
  readonly month: number;
  /** 1 for a month period (unused by its template). */
  readonly day: number;
}

/** A period and where it lies on the clock: `[start, end)` in ms since the epoch. */
export interface PeriodWindow extends Period {
  readonly start: number;
  readonly end: number;
}

/** 33 days: further than any period reaches from an instant inside it, DST shifts included. */
const SEARCH_SPAN_MS = 33 * 86_400_000;

/**
 * A parsed, checked periodic option: formats IDs and places instants in periods. Pure (no clock):
 * callers pass the time. Build it with {@link PeriodicSequence.from} or {@link parsePeriodic}.
 */
export class PeriodicSequence {
  readonly period: PeriodUnit;
  readonly timeZone: string;
  readonly template: string;
  readonly start: number;
  /** Digits of `{seq:N}`. */
  readonly seqDigits: number;
  /** The largest sequence number a period can issue: 10^N - 1. */
  readonly maxSeq: bigint;
  /** True when the template prints digits only: the ID is also a decimal number. */
  readonly numeric: boolean;
  /** Characters of every formatted ID (fixed: every field is zero-padded to its width). */
  readonly width: number;
  readonly #parts: readonly Part[];
  readonly #dates: Intl.DateTimeFormat;

  private constructor(options: PeriodicOptions) {
    if (!PERIOD_UNITS.includes(options.period))
      throw invalid(
        `period must be one of ${PERIOD_UNITS.join(', ')}, got ${show(options.period)}`,
      );
    this.period = options.period;
    this.#dates = dateFormat(options.timeZone);
    this.timeZone = this.#dates.resolvedOptions().timeZone;
    this.template = options.template;
    this.#parts = parseTemplate(options.template, options.period);
    const seq = this.#parts.find((part) => part.kind === 'seq');
    this.seqDigits = seq?.kind === 'seq' ? seq.digits : 0;
    this.maxSeq = 10n ** BigInt(this.seqDigits) - 1n;
    const start = options.start ?? 1;
    if (!Number.isSafeInteger(start) || start < 0 || BigInt(start) > this.maxSeq)
      throw invalid(
        `start must be an integer from 0 to ${this.maxSeq} (the largest ` +
          `{seq:${this.seqDigits}}), got ${show(start)}`,
      );
    this.start = start;
    this.width = this.#parts.reduce((sum, part) => sum + partWidth(part), 0);
    this.numeric = this.#parts.every((part) => part.kind !== 'literal' || /^\d*$/.test(part.text));
    if (this.numeric && this.width > MAX_NUMERIC_DIGITS)
      throw invalid(
        `template "${this.template}" makes ${this.width}-digit IDs; an all-digit ID has at most ` +
          `${MAX_NUMERIC_DIGITS} digits so that it fits a signed 64-bit integer`,
      );
  }

  /** Checks an option and builds it; INVALID_ARGUMENT naming what is wrong. */
  static from(options: PeriodicOptions): PeriodicSequence {
    if (options === null || typeof options !== 'object')
      throw invalid('a periodic option is an object with period, timeZone and template');
    return new PeriodicSequence(options);
  }

  /**
   * The option as stored: canonical JSON (the time zone as Intl names it), read back by {@link
   * parsePeriodic}.
   */
  toText(): string {
    return JSON.stringify(this.toOptions());
  }

  toOptions(): Required<PeriodicOptions> {
    return {
      period: this.period,
      timeZone: this.timeZone,
      template: this.template,
      start: this.start,
    };
  }

  /**
   * INVALID_ARGUMENT unless a period can hold at least one range of `step`: a step larger than
   * the sequence's room would overflow the digits on the first range.
   */
  checkStep(step: number): void {
    const room = this.maxSeq - BigInt(this.start) + 1n;
    if (BigInt(step) > room)
      throw invalid(
        `step ${step} is larger than the ${room} sequence numbers {seq:${this.seqDigits}} holds ` +
          `from ${this.start}; widen {seq:N} or lower the step`,
      );
  }

  /** The row a period draws from: `<tag>@<key>`. */
  rowTag(tag: string, period: Period): string {
    return `${tag}${PERIOD_SEPARATOR}${period.key}`;
  }

  /** The period `ms` falls in, by the calendar of the time zone. */
  periodAt(ms: number): Period {
    let year = 0;
    let month = 0;
    let day = 0;
    for (const part of this.#dates.formatToParts(ms)) {
      if (part.type === 'year') year = Number(part.value);
      else if (part.type === 'month') month = Number(part.value);
      else if (part.type === 'day') day = Number(part.value);
    }
    if (!(year >= 1000 && year <= 9999))
      throw invalid(`periodic IDs print four-digit years only, and ${ms} ms is in year ${year}`);
    if (this.period === 'month') day = 1;
    const key = `${year}${pad(month, 2)}${this.period === 'day' ? pad(day, 2) : ''}`;
    return { key, year, month, day };
  }

  /**
   * The period `ms` falls in, with its start and end: the first instant whose period is this one
   * and the first whose period is a later one (a day of 23 or 25 hours across DST, a day that
   * starts at 01:00 where midnight is skipped). Found by bisection on the ms: ~35 calendar reads,
   * done once per period.
   */
  windowAt(ms: number): PeriodWindow {
    const period = this.periodAt(ms);
    const start = this.#firstAtOrAfter(ms - SEARCH_SPAN_MS, ms, (key) => key >= period.key);
    const end = this.#firstAtOrAfter(ms, ms + SEARCH_SPAN_MS, (key) => key > period.key);
    return { ...period, start, end };
  }

  /**
   * The smallest instant in `(low, high]` whose period key passes `test` (`high` if none does
   * sooner).
   */
  #firstAtOrAfter(low: number, high: number, test: (key: string) => boolean): number {
    let lo = low;
    let hi = high;
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      if (test(this.periodAt(mid).key)) hi = mid;
      else lo = mid;
    }
    return hi;
  }

  /**
   * The formatted ID of sequence number `seq` in `period`. PERIOD_SEQUENCE_EXHAUSTED when `seq`
   * needs more digits than `{seq:N}` has: never wrapped, never widened (either would make IDs
   * that collide or sort wrongly).
   */
  format(tag: string, period: Period, seq: bigint): string {
    if (seq > this.maxSeq) throw sequenceExhausted(tag, period, this.maxSeq);
    let text = '';
    for (const part of this.#parts) {
      if (part.kind === 'literal') text += part.text;
      else if (part.kind === 'seq') text += seq.toString().padStart(part.digits, '0');
      else if (part.field === 'yyyy') text += String(period.year);
      else if (part.field === 'yy') text += pad(period.year % 100, 2);
      else if (part.field === 'MM') text += pad(period.month, 2);
      else text += pad(period.day, 2);
    }
    return text;
  }
}

/** Reads a stored option (canonical JSON); INVALID_ARGUMENT when it is not one. */
export function parsePeriodic(text: string): PeriodicSequence {
  let options: unknown;
  try {
    options = JSON.parse(text);
  } catch (error) {
    throw new IdMintError('INVALID_ARGUMENT', `periodic option is not JSON: ${show(text)}`, {
      cause: error,
    });
  }
  return PeriodicSequence.from(options as PeriodicOptions);
}

/** INVALID_ARGUMENT unless `tag` leaves room for `@` and a period key within 128 characters. */
export function checkPeriodicTagName(tag: string, period: PeriodUnit): void {
  const room = MAX_TAG_LENGTH - 1 - (period === 'day' ? 8 : 6);
  if ([...tag].length > room || tag.includes(PERIOD_SEPARATOR))
    throw invalid(
      `a periodic tag has at most ${room} characters and no "${PERIOD_SEPARATOR}" (its rows are ` +
        `named <tag>${PERIOD_SEPARATOR}<period>), got ${show(tag)}`,
    );
}

/**
 * The template's parts. Tokens: `{seq:N}` (N digits, 1 to 18, exactly once) and date fields
 * `{yyyy}` `{yy}` `{MM}` `{dd}`, which may be run together (`{yyyyMMdd}`); each field at most
 * once. Between tokens, literals of `A-Z a-z 0-9 _ . : -`. The fields must name the period
 * (a year, the month, and for a day period the day) and nothing finer, so that two periods never
 * print alike: every part has a fixed width, so the ID is the period and the sequence number.
 */
export function parseTemplate(template: unknown, period: PeriodUnit): Part[] {
  if (
    typeof template !== 'string' ||
    template.length === 0 ||
    template.length > MAX_TEMPLATE_LENGTH
  )
    throw invalid(`template must be 1 to ${MAX_TEMPLATE_LENGTH} characters, got ${show(template)}`);
  const parts: Part[] = [];
  const seen = new Set<string>();
  const note = (name: string) => {
    if (seen.has(name)) throw invalid(`template "${template}" has {${name}} twice`);
    seen.add(name);
  };
  for (const match of template.matchAll(/\{([^{}]*)\}|([^{}]+)|([{}])/g)) {
    const [, token, literal, stray] = match;
    if (stray !== undefined) throw invalid(`template "${template}" has an unmatched "${stray}"`);
    if (literal !== undefined) {
      if (!LITERAL.test(literal))
        throw invalid(
          `template "${template}" has "${literal}" outside tokens; literals are A-Z a-z 0-9 _ . ` +
            `: -`,
        );
      parts.push({ kind: 'literal', text: literal });
      continue;
    }
    const seq = /^seq:(\d{1,2})$/.exec(token ?? '');
    if (seq !== null) {
      const digits = Number(seq[1]);
      if (digits < 1 || digits > MAX_SEQ_DIGITS)
        throw invalid(`{seq:N} takes N from 1 to ${MAX_SEQ_DIGITS}, got {${token}}`);
      note('seq');
      parts.push({ kind: 'seq', digits });
      continue;
    }
    const fields = /^(?:yyyy|yy|MM|dd)+$/.test(token ?? '')
      ? ((token ?? '').match(/yyyy|yy|MM|dd/g) as Field[])
      : undefined;
    if (fields === undefined)
      throw invalid(
        `template "${template}" has an unknown token {${token}}; tokens are {yyyy} {yy} {MM} ` +
          `{dd} (run together as in {yyyyMMdd}) and {seq:N}`,
      );
    for (const field of fields) {
      note(field === 'yy' ? 'yyyy' : field);
      parts.push({ kind: 'field', field });
    }
  }
  if (!seen.has('seq')) throw invalid(`template "${template}" has no {seq:N}`);
  if (!seen.has('yyyy') || !seen.has('MM') || (period === 'day') !== seen.has('dd'))
    throw invalid(
      period === 'day'
        ? `template "${template}" must print the day: a year ({yyyy} or {yy}), {MM} and {dd}`
        : `template "${template}" must print the month: a year ({yyyy} or {yy}) and {MM}, no {dd}`,
    );
  return parts;
}

function partWidth(part: Part): number {
  if (part.kind === 'literal') return part.text.length;
  if (part.kind === 'seq') return part.digits;
  return part.field === 'yyyy' ? 4 : 2;
}

/** The calendar of `timeZone`: Gregorian, Latin digits, whatever the process's locale. */
function dateFormat(timeZone: unknown): Intl.DateTimeFormat {
  if (typeof timeZone !== 'string' || timeZone.length === 0 || timeZone.length > 64)
    throw invalid(
      `timeZone must be an IANA time zone such as "Asia/Shanghai", got ${show(timeZone)}`,
    );
  try {
    return new Intl.DateTimeFormat('en-US-u-ca-gregory-nu-latn', {
      timeZone,
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
    });
  } catch (error) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `timeZone must be an IANA time zone such as "Asia/Shanghai", got ${show(timeZone)}`,
      { cause: error },
    );
  }
}

function sequenceExhausted(tag: string, period: Period, max: bigint): IdMintError {
  return new IdMintError(
    'PERIOD_SEQUENCE_EXHAUSTED',
    `tag "${tag}" has issued all ${max} sequence numbers of period ${period.key}; nothing is ` +
      `issued until the next period`,
    { details: { tag, period: period.key, maxSeq: max.toString() } },
  );
}

function pad(value: number, width: number): string {
  return String(value).padStart(width, '0');
}

function invalid(message: string): IdMintError {
  return new IdMintError('INVALID_ARGUMENT', message);
}

function show(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}
