/**
 * Exit code for bad usage (unknown command or flag, malformed value, invalid configuration), as
 * most CLIs use.
 */
export const EXIT_USAGE = 2;
/** Exit code for a failure while doing the work (clock refused, store down, port in use, ...). */
export const EXIT_FAILURE = 1;
/**
 * Exit code of `serve --processes N` when a child kept failing (restart-policy.ts) and the
 * supervisor gave up and stopped them all: distinct from 1 and 2, which a child's own failure at
 * the first start gives, so an outer supervisor or an alert can tell a crash loop apart.
 */
export const EXIT_GAVE_UP = 3;
