//! The Lua scripts: omp 18.3.4's `writeFull`, `append` and title update, each one atomic
//! `EVAL`, plus ours (append with a size check, move, truncate, slices, locks).
//!
//! Sizes are `STRLEN` of the body, `-1` for a missing key, as omp's compare-and-set uses.
//!
//! Every script that writes a body also publishes `<path>:<size>` (`<path>:` for a body
//! gone) on the channel `<prefix>changes`, named from the meta key (`<prefix>meta`, always
//! `KEYS[2]` or `KEYS[3]` here), for the storage's watchers.

/// `writeFull`: KEYS body, meta, title; ARGV path, content, mtime, title JSON (`""`: none,
/// the field is deleted), expected size (`""`: no check, `-1`: must be missing). Returns
/// `{written, size}`: the new size, or the size found when the check refused the write.
pub(crate) const WRITE_FULL: &str = r"
local size = -1
if redis.call('EXISTS', KEYS[1]) == 1 then size = redis.call('STRLEN', KEYS[1]) end
if ARGV[5] ~= '' and tonumber(ARGV[5]) ~= size then return {0, size} end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[3], ARGV[1], ARGV[4]) else redis.call('HDEL', KEYS[3], ARGV[1]) end
redis.call('PUBLISH', string.sub(KEYS[2], 1, -5) .. 'changes', ARGV[1] .. ':' .. string.len(ARGV[2]))
return {1, string.len(ARGV[2])}
";

/// `append`: KEYS body, meta; ARGV path, bytes, mtime, expected size (`""`: none, which is
/// omp's blind `APPEND`; `-1`: must be missing). Returns `{written, size}`.
pub(crate) const APPEND: &str = r"
if ARGV[4] ~= '' then
  local size = -1
  if redis.call('EXISTS', KEYS[1]) == 1 then size = redis.call('STRLEN', KEYS[1]) end
  if tonumber(ARGV[4]) ~= size then return {0, size} end
end
local n = redis.call('APPEND', KEYS[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('PUBLISH', string.sub(KEYS[2], 1, -5) .. 'changes', ARGV[1] .. ':' .. n)
return {1, n}
";

/// `updateSessionTitle`: KEYS body, meta, title; ARGV path, title JSON, mtime. Returns 0
/// when there is no body.
pub(crate) const TITLE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return 1
";

/// Creates an empty body when missing: KEYS body, meta; ARGV path, mtime.
pub(crate) const ENSURE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SET', KEYS[1], '')
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
  redis.call('PUBLISH', string.sub(KEYS[2], 1, -5) .. 'changes', ARGV[1] .. ':0')
end
return 1
";

/// `move`, atomic where omp's moves the hash fields afterwards: KEYS source body,
/// destination body, meta, title; ARGV source path, destination path, mtime. Returns 0 when
/// the source is missing.
pub(crate) const MOVE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('RENAME', KEYS[1], KEYS[2])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
local t = redis.call('HGET', KEYS[4], ARGV[1])
if t then
  redis.call('HSET', KEYS[4], ARGV[2], t)
  redis.call('HDEL', KEYS[4], ARGV[1])
else
  redis.call('HDEL', KEYS[4], ARGV[2])
end
local channel = string.sub(KEYS[3], 1, -5) .. 'changes'
redis.call('PUBLISH', channel, ARGV[1] .. ':')
redis.call('PUBLISH', channel, ARGV[2] .. ':' .. redis.call('STRLEN', KEYS[2]))
return 1
";

/// Cuts the body to ARGV[2] bytes or extends it with zero bytes: KEYS body, meta, title;
/// ARGV path, length, mtime. A cut into the title slot drops the title metadata. Returns 0
/// when the body is missing.
pub(crate) const TRUNCATE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local size = redis.call('STRLEN', KEYS[1])
local len = tonumber(ARGV[2])
if len < size then
  if len == 0 then
    redis.call('SET', KEYS[1], '')
  else
    redis.call('SET', KEYS[1], redis.call('GETRANGE', KEYS[1], 0, len - 1))
  end
elseif len > size then
  redis.call('SETRANGE', KEYS[1], len - 1, '\0')
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
if len < 256 then redis.call('HDEL', KEYS[3], ARGV[1]) end
redis.call('PUBLISH', string.sub(KEYS[2], 1, -5) .. 'changes', ARGV[1] .. ':' .. len)
return 1
";

/// `readSlices` with `GETRANGE`: KEYS body, meta, title; ARGV path, prefix, suffix. Returns
/// nil when missing, else `{size, head, tail, first 256 bytes (only with a title), title
/// JSON, mtime (`''` when the meta hash has none)}`.
pub(crate) const SLICES: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local size = redis.call('STRLEN', KEYS[1])
local p = tonumber(ARGV[2])
local s = tonumber(ARGV[3])
local head = ''
if p > 0 and size > 0 then head = redis.call('GETRANGE', KEYS[1], 0, p - 1) end
local tail = ''
if s > 0 and size > 0 then
  local start = size - s
  if start < 0 then start = 0 end
  tail = redis.call('GETRANGE', KEYS[1], start, size - 1)
end
local title = redis.call('HGET', KEYS[3], ARGV[1])
local first = ''
if title then first = redis.call('GETRANGE', KEYS[1], 0, 255) else title = '' end
local mtime = redis.call('HGET', KEYS[2], ARGV[1]) or ''
return {size, head, tail, first, title, mtime}
";

/// Renews a lock this holder still owns: KEYS lock; ARGV token, time to live in ms.
pub(crate) const LOCK_RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
";

/// Releases a lock this holder still owns: KEYS lock; ARGV token.
pub(crate) const LOCK_RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
";
