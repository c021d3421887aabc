/**
 * A rule between keys, checked once every key is valid on its own. Each component states its own
 * rules beside its schema, over its own part of the configuration (auth.ts, snowflake.ts);
 * schema.ts holds the rules across parts and hands each part its own.
 */
export type ConfigRule<C> = (config: C, check: RuleCheck) => void;

/** Every property read-only, all the way down: the configuration is frozen once validated. */
export type Frozen<T> = T extends readonly (infer E)[]
  ? readonly Frozen<E>[]
  : T extends object
    ? { readonly [K in keyof T]: Frozen<T[K]> }
    : T;

/** What a rule can ask and do. */
export interface RuleCheck {
  /**
   * Refuses the configuration: CONFIG_INVALID naming `key`, its value, where it came from, and
   * `problem` (what is wrong and what is allowed).
   */
  fail(key: string, problem: string): never;
  /** True when `key` was set (by a file, a variable or a flag) rather than left at its default. */
  isSet(key: string): boolean;
}
