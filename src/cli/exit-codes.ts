/** Exit code for bad usage (unknown command or flag, malformed value, invalid configuration), as most CLIs use. */
export const EXIT_USAGE = 2;
/** Exit code for a failure while doing the work (clock refused, store down, port in use, ...). */
export const EXIT_FAILURE = 1;
