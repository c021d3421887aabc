/**
 * The history of a Redis server as a Lua function, `live_history()`, for the scripts of the
 * segment store and of the worker registry: its replication ID, which a promoted replica takes
 * anew, and so does a restarted Redis (which may have lost writes). docs/segments.md, "The
 * history of a store", says what it catches and what not.
 */
export const LIVE_HISTORY_LUA = `local function live_history()
  return 'redis replid ' ..
    (string.match(redis.call('INFO', 'replication'), 'master_replid:(%w+)') or 'unknown')
end
`;
