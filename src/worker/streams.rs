//! The Redis side of the queue: one blocking connection per thread ([`Link`]), retried with
//! backoff while Redis is down or restarting, and the stream commands the worker, `enqueue`
//! and `status` use. Redis holds only requests and outcomes; a run's state is its folder.
//!
//! Keys, for a prefix `P` (`--streams`, default `agentloop`):
//! - `P:runs`: run requests (field `request`, a JSON [`super::request::RunRequest`]), read by
//!   the consumer group `P:workers`;
//! - `P:results`: one outcome per finished run (fields `run_id`, `type`, `outcome`);
//! - `P:dead`: dead letters (fields `message_id`, `request`, `reason`, `deliveries`);
//! - `P:outcome:<run id>`: the published outcome, set once (with an expiry): publishing and
//!   acknowledging are one script, so a run's outcome is published once however often its
//!   message is delivered, as long as Redis keeps its data; an answer's or a continue's outcome
//!   is `P:outcome:<run id>:<key id>` ([`super::request::RunRequest::outcome_id`]);
//! - `P:errors`: the last error of each message being retried (message id → text).

use agentloop_io::output::Printer;
use agentloop_types::error::{Error, Result};
use redis::{Commands, Connection, RedisResult};
use std::time::{Duration, Instant};

/// How long an outcome key is kept (consumers de-duplicate by run id beyond it).
pub const OUTCOME_TTL_SECS: u64 = 7 * 24 * 3600;

/// The keys of one queue.
#[derive(Debug, Clone)]
pub struct Names {
    pub requests: String,
    pub results: String,
    pub dead: String,
    pub group: String,
    pub errors: String,
    prefix: String,
}

impl Names {
    pub fn new(prefix: &str) -> Result<Names> {
        if prefix.is_empty() || prefix.len() > 100 || prefix.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(Error::usage(format!("--streams `{prefix}`: give 1-100 characters without spaces")));
        }
        Ok(Names {
            requests: format!("{prefix}:runs"),
            results: format!("{prefix}:results"),
            dead: format!("{prefix}:dead"),
            group: format!("{prefix}:workers"),
            errors: format!("{prefix}:errors"),
            prefix: prefix.to_string(),
        })
    }

    pub fn outcome(&self, outcome_id: &str) -> String {
        format!("{}:outcome:{outcome_id}", self.prefix)
    }
}

/// A message handed to a worker.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub id: String,
    pub request: Option<String>,
    /// How many times it was delivered, this time included.
    pub deliveries: u64,
    /// Why the message is too large to take (a field, or the whole entry, over its bound):
    /// it was measured inside Redis and nothing of it was read ([`FETCH`]).
    pub oversized: Option<String>,
}

/// The most any field of a message other than `request` may hold (a client's tag, a trace id).
pub const MAX_OTHER_FIELD_BYTES: usize = 64 * 1024;

/// The most a whole message may hold: its `request` at most, its other fields and all names.
pub const MAX_ENTRY_BYTES: usize = agentloop_engine::runs_root::MAX_REQUEST_BYTES + MAX_OTHER_FIELD_BYTES;

/// Takes one message for a consumer inside Redis — a new one (`XREADGROUP`) or one idle too
/// long (`XAUTOCLAIM`) — and measures it there: every field's length and the whole entry's. A
/// message within bounds comes back with its `request` field alone; one over them comes back
/// as its id, the field that is too large (its name cut to 64 bytes; empty for the entry as a
/// whole), its length and the bound, so the worker never holds more than the bounds of any
/// message, however large a field someone added. (Scripts do not block: new messages are
/// polled, see [`read_new`].)
///
/// `KEYS[1]` the requests stream; ARGV: mode (`new` or `idle`), group, consumer, min idle ms,
/// cursor, max request bytes, max other-field bytes, max entry bytes. Reply: `{cursor}` when
/// there is no message, else `{cursor, id, "ok", request or false}`, `{cursor, id, "gone"}` or
/// `{cursor, id, "big", field, length, bound}`.
const FETCH: &str = r"
local entry, cursor
if ARGV[1] == 'new' then
  local r = redis.call('XREADGROUP', 'GROUP', ARGV[2], ARGV[3], 'COUNT', 1, 'STREAMS', KEYS[1], '>')
  cursor = '0-0'
  if not r then return {cursor} end
  entry = r[1][2][1]
else
  local r = redis.call('XAUTOCLAIM', KEYS[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], 'COUNT', 1)
  cursor = r[1]
  entry = r[2][1]
end
if not entry then return {cursor} end
local id, fv = entry[1], entry[2]
if not fv then return {cursor, id, 'gone'} end
local max_request, max_other, max_entry = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local total, request = 0, false
for i = 1, #fv, 2 do
  local name, value = fv[i], fv[i + 1]
  total = total + #name + #value
  local bound = max_other
  if name == 'request' then bound = max_request end
  if #value > bound or #name > max_other then
    return {cursor, id, 'big', string.sub(name, 1, 64), #value, bound}
  end
  if name == 'request' then request = value end
end
if total > max_entry then return {cursor, id, 'big', '', total, max_entry} end
return {cursor, id, 'ok', request}";

/// One run of [`FETCH`]: the cursor it reached and the message it took, if any.
fn fetch(
    con: &mut Connection,
    n: &Names,
    consumer: &str,
    idle: Option<(Duration, &str)>,
) -> RedisResult<(String, Option<Delivery>)> {
    let (mode, idle_ms, cursor) = match idle {
        Some((d, c)) => ("idle", d.as_millis() as u64, c),
        None => ("new", 0, "0-0"),
    };
    let reply: Vec<redis::Value> = redis::cmd("EVAL")
        .arg(FETCH)
        .arg(1)
        .arg(&n.requests)
        .arg(mode)
        .arg(&n.group)
        .arg(consumer)
        .arg(idle_ms)
        .arg(cursor)
        .arg(agentloop_engine::runs_root::MAX_REQUEST_BYTES)
        .arg(MAX_OTHER_FIELD_BYTES)
        .arg(MAX_ENTRY_BYTES)
        .query(con)?;
    let text = |i: usize| reply.get(i).and_then(|v| redis::from_redis_value::<String>(v.clone()).ok());
    let number = |i: usize| reply.get(i).and_then(|v| redis::from_redis_value::<u64>(v.clone()).ok()).unwrap_or(0);
    let next = text(0).unwrap_or_else(|| "0-0".into());
    let Some(id) = text(1) else { return Ok((next, None)) };
    let d = match text(2).as_deref() {
        Some("big") => {
            let (field, len, bound) = (text(3).unwrap_or_default(), number(4), number(5));
            let why = match field.as_str() {
                "request" => format!("the request is {len} bytes, over the limit of {bound} bytes"),
                "" => format!("the message is {len} bytes in all, over the limit of {bound} bytes"),
                f => format!(
                    "the message's field `{}` is {len} bytes, over the limit of {bound} bytes for a field other than `request`",
                    agentloop_io::output::printable(f)
                ),
            };
            Delivery { id, request: None, deliveries: 1, oversized: Some(why) }
        }
        Some("ok") => Delivery { id, request: text(3), deliveries: 1, oversized: None },
        _ => Delivery { id, request: None, deliveries: 1, oversized: None },
    };
    Ok((next, Some(d)))
}

/// One connection to Redis that reconnects: a command that fails because Redis is down,
/// restarting or loading its data is tried again with backoff (saying so once per outage),
/// for at most `patience` (forever when None).
pub struct Link {
    client: redis::Client,
    shown: String,
    con: Option<Connection>,
    printer: Printer,
    patience: Option<Duration>,
}

/// The URL with its password left out, for messages.
pub fn shown_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        Ok(u) => u.to_string(),
        Err(_) => url.to_string(),
    }
}

/// Whether an error is Redis being away for a while (so the command is tried again).
fn passing(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_refusal()
        || e.is_connection_dropped()
        || e.is_timeout()
        || matches!(e.code(), Some("LOADING" | "TRYAGAIN" | "MASTERDOWN" | "BUSY"))
}

impl Link {
    /// Checks the URL (`flag` names where it came from); connects at the first command.
    pub fn open(url: &str, flag: &str, printer: Printer, patience: Option<Duration>) -> Result<Link> {
        let client = redis::Client::open(url).map_err(|e| {
            Error::usage(format!("{flag} `{}`: {e}", shown_url(url)))
                .with_hint("give a URL such as redis://127.0.0.1:6379/0 (rediss:// is not supported)")
                .with_source(e)
        })?;
        Ok(Link { client, shown: shown_url(url), con: None, printer, patience })
    }

    /// Runs `f` on the connection, reconnecting and retrying while Redis is away.
    pub fn call<T>(&mut self, what: &str, mut f: impl FnMut(&mut Connection) -> RedisResult<T>) -> Result<T> {
        let start = Instant::now();
        let mut delay = Duration::from_millis(100);
        let mut said = false;
        loop {
            let result = match self.connection() {
                Ok(con) => f(con),
                Err(e) => Err(e),
            };
            match result {
                Ok(v) => {
                    if said {
                        self.printer.info(&format!("redis at {} is back", self.shown));
                    }
                    return Ok(v);
                }
                Err(e) if passing(&e) => {
                    self.con = None;
                    // A draining process waits for no Redis: what it did is durable in the runs'
                    // folders, and its messages stay pending for another worker.
                    if agentloop_tools::interrupt::draining() {
                        return Err(Error::failure(format!(
                            "redis at {} is unreachable ({e}) and the worker is draining: it stops trying to {what}",
                            self.shown
                        )));
                    }
                    if self.patience.is_some_and(|p| start.elapsed() >= p) {
                        return Err(Error::failure(format!("cannot reach redis at {} to {what}: {e}", self.shown))
                            .with_hint("start redis-server, or check --redis"));
                    }
                    if !said {
                        self.printer.warn(&format!(
                            "redis at {} is unreachable ({e}); retrying with backoff (nothing is lost meanwhile)",
                            self.shown
                        ));
                        said = true;
                    }
                    agentloop_tools::interrupt::park_if_interrupted();
                    std::thread::sleep(delay);
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
                Err(e) => return Err(Error::failure(format!("redis at {}: cannot {what}: {e}", self.shown))),
            }
        }
    }

    fn connection(&mut self) -> RedisResult<&mut Connection> {
        let con = match self.con.take() {
            Some(con) => con,
            None => {
                let con = self.client.get_connection_with_timeout(Duration::from_secs(5))?;
                con.set_read_timeout(Some(Duration::from_secs(30)))?;
                con.set_write_timeout(Some(Duration::from_secs(30)))?;
                con
            }
        };
        Ok(self.con.insert(con))
    }
}

/// Makes the consumer group (and the stream) unless they exist.
pub fn ensure_group(con: &mut Connection, n: &Names) -> RedisResult<()> {
    let made: RedisResult<()> =
        redis::cmd("XGROUP").arg("CREATE").arg(&n.requests).arg(&n.group).arg("0").arg("MKSTREAM").query(con);
    match made {
        Err(e) if e.code() == Some("BUSYGROUP") => Ok(()),
        other => other,
    }
}

/// A group command's reply, or None once the group is made again when it went away (Redis
/// restarted without its data).
fn regrouped<T>(con: &mut Connection, n: &Names, reply: RedisResult<T>) -> RedisResult<Option<T>> {
    match reply {
        Err(e) if e.code() == Some("NOGROUP") => {
            ensure_group(con, n)?;
            Ok(None)
        }
        r => r.map(Some),
    }
}

/// A new message for `consumer`, waiting up to `block` for one. Messages are taken and
/// measured by [`FETCH`], which cannot block inside Redis, so the wait is a poll every 50 ms.
pub fn read_new(con: &mut Connection, n: &Names, consumer: &str, block: Duration) -> RedisResult<Option<Delivery>> {
    let start = Instant::now();
    loop {
        let reply = fetch(con, n, consumer, None);
        match regrouped(con, n, reply)? {
            Some((_, Some(d))) => return Ok(Some(d)),
            None => return Ok(None),
            Some((_, None)) if start.elapsed() >= block => return Ok(None),
            Some((_, None)) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// A message pending longer than `idle` with any consumer (one killed, or gone quiet), now
/// `consumer`'s, with how many times it was delivered.
pub fn claim_idle(con: &mut Connection, n: &Names, consumer: &str, idle: Duration) -> RedisResult<Option<Delivery>> {
    let mut cursor = "0-0".to_string();
    loop {
        let reply = fetch(con, n, consumer, Some((idle, &cursor)));
        let Some((next, taken)) = regrouped(con, n, reply)? else { return Ok(None) };
        if let Some(mut d) = taken {
            d.deliveries = delivery_count(con, n, &d.id)?.unwrap_or(1);
            return Ok(Some(d));
        }
        if next == "0-0" || next == cursor {
            return Ok(None);
        }
        cursor = next;
    }
}

/// How many times a pending message was delivered.
fn delivery_count(con: &mut Connection, n: &Names, id: &str) -> RedisResult<Option<u64>> {
    let p: redis::streams::StreamPendingCountReply =
        redis::cmd("XPENDING").arg(&n.requests).arg(&n.group).arg(id).arg(id).arg(1).query(con)?;
    Ok(p.ids.into_iter().next().map(|p| p.times_delivered as u64))
}

/// Keeps `consumer`'s claim on messages it is working on fresh (their idle time starts again;
/// JUSTID leaves the delivery count as it is).
pub fn refresh(con: &mut Connection, n: &Names, consumer: &str, ids: &[String]) -> RedisResult<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let _: redis::Value =
        redis::cmd("XCLAIM").arg(&n.requests).arg(&n.group).arg(consumer).arg(0).arg(ids).arg("JUSTID").query(con)?;
    Ok(())
}

/// Hands a message back to the group: still pending on `consumer`, but idle as if for a day, so
/// the next XAUTOCLAIM of any worker takes it; its delivery count is set to `deliveries`.
pub fn hand_back(con: &mut Connection, n: &Names, consumer: &str, id: &str, deliveries: u64) -> RedisResult<()> {
    const DAY_MS: u64 = 24 * 3600 * 1000;
    let _: redis::Value = redis::cmd("XCLAIM")
        .arg(&n.requests)
        .arg(&n.group)
        .arg(consumer)
        .arg(0)
        .arg(id)
        .arg("IDLE")
        .arg(DAY_MS)
        .arg("RETRYCOUNT")
        .arg(deliveries)
        .arg("JUSTID")
        .query(con)?;
    Ok(())
}

/// An outcome to publish: the run's id, what names its outcome key (`P:outcome:<outcome_id>`:
/// the run id for a start, one of its own for an answer or a continue) and the outcome's JSON.
pub struct Published<'a> {
    pub run_id: &'a str,
    pub outcome_id: &'a str,
    pub outcome: &'a str,
}

/// Publishes a run's outcome unless it was published before, and acknowledges the message, in
/// one step. True when this call published it.
pub fn publish(con: &mut Connection, n: &Names, message_id: &str, p: &Published<'_>) -> RedisResult<bool> {
    const SCRIPT: &str = r"
local fresh = redis.call('SET', KEYS[1], ARGV[2], 'NX', 'EX', ARGV[5])
if fresh then
  redis.call('XADD', KEYS[2], '*', 'run_id', ARGV[1], 'type', ARGV[3], 'outcome', ARGV[2])
end
redis.call('XACK', KEYS[3], ARGV[4], ARGV[6])
redis.call('HDEL', KEYS[4], ARGV[6])
if fresh then return 1 else return 0 end";
    let ty = serde_json::from_str::<serde_json::Value>(p.outcome)
        .ok()
        .and_then(|v| v["type"].as_str().map(String::from))
        .unwrap_or_default();
    let fresh: i64 = redis::cmd("EVAL")
        .arg(SCRIPT)
        .arg(4)
        .arg(n.outcome(p.outcome_id))
        .arg(&n.results)
        .arg(&n.requests)
        .arg(&n.errors)
        .arg(p.run_id)
        .arg(p.outcome)
        .arg(ty)
        .arg(&n.group)
        .arg(OUTCOME_TTL_SECS)
        .arg(message_id)
        .query(con)?;
    Ok(fresh == 1)
}

/// Moves a message to the dead-letter stream with the reason, and acknowledges it. A request
/// over the size limit is not copied (the requests stream keeps it under its id until trimmed).
pub fn dead_letter(con: &mut Connection, n: &Names, d: &Delivery, reason: &str) -> RedisResult<()> {
    let request = d.request.as_deref().filter(|r| super::request::oversized(r).is_none()).unwrap_or("");
    redis::pipe()
        .atomic()
        .cmd("XADD")
        .arg(&n.dead)
        .arg("*")
        .arg("message_id")
        .arg(&d.id)
        .arg("request")
        .arg(request)
        .arg("reason")
        .arg(reason)
        .arg("deliveries")
        .arg(d.deliveries)
        .ignore()
        .cmd("XACK")
        .arg(&n.requests)
        .arg(&n.group)
        .arg(&d.id)
        .ignore()
        .cmd("HDEL")
        .arg(&n.errors)
        .arg(&d.id)
        .ignore()
        .query(con)
}

/// Records why a delivery failed (read back when the message is delivered again).
pub fn note_error(con: &mut Connection, n: &Names, id: &str, error: &str) -> RedisResult<()> {
    con.hset(&n.errors, id, error)
}

pub fn last_error(con: &mut Connection, n: &Names, id: &str) -> RedisResult<Option<String>> {
    con.hget(&n.errors, id)
}

/// Adds a request; returns its message id.
pub fn enqueue(con: &mut Connection, n: &Names, request: &str) -> RedisResult<String> {
    redis::cmd("XADD").arg(&n.requests).arg("*").arg("request").arg(request).query(con)
}

/// Why message `message_id` was dead-lettered, if it was: reads the dead letters from `from` (an
/// id, or `(id` past one) on, and moves `from` past those read, so each is read once.
pub fn dead_reason(
    con: &mut Connection,
    n: &Names,
    message_id: &str,
    from: &mut String,
) -> RedisResult<Option<String>> {
    loop {
        let r: redis::streams::StreamRangeReply =
            redis::cmd("XRANGE").arg(&n.dead).arg(from.as_str()).arg("+").arg("COUNT").arg(100).query(con)?;
        let Some(last) = r.ids.last() else { return Ok(None) };
        *from = format!("({}", last.id);
        let mine = r.ids.iter().find(|m| m.get::<String>("message_id").as_deref() == Some(message_id));
        if let Some(m) = mine {
            return Ok(Some(m.get::<String>("reason").unwrap_or_default()));
        }
        if r.ids.len() < 100 {
            return Ok(None);
        }
    }
}

/// A published outcome (`outcome_id`: a run id, or an answer's or a continue's), if there is one.
pub fn outcome(con: &mut Connection, n: &Names, outcome_id: &str) -> RedisResult<Option<String>> {
    con.get(n.outcome(outcome_id))
}

/// What the queue holds: messages not yet read by any worker, messages claimed (read, not
/// acknowledged: id, consumer, idle ms, deliveries), and dead letters (id, reason).
#[derive(Debug, Default)]
pub struct Overview {
    pub queued: Vec<(String, Option<String>)>,
    pub claimed: Vec<(String, String, u64, u64)>,
    pub dead: Vec<(String, String, Option<String>)>,
}

/// A range of a stream read inside Redis with every field bounded as [`FETCH`] bounds it:
/// `XRANGE` or `XREVRANGE` of `KEYS[1]` from `ARGV[2]` to `ARGV[3]`, at most `ARGV[4]` entries; for each,
/// its id and the fields named from `ARGV[7]` on, each the value when within its bound (`ARGV[5]`
/// for `request`, `ARGV[6]` for any other) and nothing when missing or over it.
const RANGE: &str = r"
local r = redis.call(ARGV[1], KEYS[1], ARGV[2], ARGV[3], 'COUNT', ARGV[4])
local max_request, max_other = tonumber(ARGV[5]), tonumber(ARGV[6])
local out = {}
for _, e in ipairs(r) do
  local row, fv = {e[1]}, e[2] or {}
  for k = 7, #ARGV do
    local got = false
    for i = 1, #fv, 2 do
      if fv[i] == ARGV[k] then
        local bound = max_other
        if ARGV[k] == 'request' then bound = max_request end
        if #fv[i + 1] <= bound then got = fv[i + 1] end
        break
      end
    end
    table.insert(row, got)
  end
  table.insert(out, row)
end
return out";

/// [`RANGE`]: each entry's id and the `fields` asked for (None when missing or too large).
fn bounded_range(
    con: &mut Connection,
    key: &str,
    (cmd, from, to): (&str, &str, &str),
    limit: usize,
    fields: &[&str],
) -> RedisResult<Vec<(String, Vec<Option<String>>)>> {
    let rows: Vec<Vec<redis::Value>> = redis::cmd("EVAL")
        .arg(RANGE)
        .arg(1)
        .arg(key)
        .arg(cmd)
        .arg(from)
        .arg(to)
        .arg(limit)
        .arg(agentloop_engine::runs_root::MAX_REQUEST_BYTES)
        .arg(MAX_OTHER_FIELD_BYTES)
        .arg(fields)
        .query(con)?;
    let text = |v: &redis::Value| redis::from_redis_value::<String>(v.clone()).ok();
    Ok(rows.iter().filter_map(|row| Some((text(row.first()?)?, row.iter().skip(1).map(text).collect()))).collect())
}

/// Reads the queue's state, at most `limit` of each kind.
pub fn overview(con: &mut Connection, n: &Names, limit: usize) -> RedisResult<Overview> {
    ensure_group(con, n)?;
    // The group's last-delivered id: entries after it are not yet read.
    let groups: Vec<std::collections::HashMap<String, redis::Value>> =
        redis::cmd("XINFO").arg("GROUPS").arg(&n.requests).query(con)?;
    let last = groups
        .iter()
        .find(|g| {
            g.get("name").and_then(|v| redis::from_redis_value::<String>(v.clone()).ok()).as_deref() == Some(&n.group)
        })
        .and_then(|g| g.get("last-delivered-id"))
        .and_then(|v| redis::from_redis_value::<String>(v.clone()).ok())
        .unwrap_or_else(|| "0-0".into());
    let after = format!("({last}");
    let queued = bounded_range(con, &n.requests, ("XRANGE", &after, "+"), limit, &["request"])?;
    let pending: redis::streams::StreamPendingCountReply =
        redis::cmd("XPENDING").arg(&n.requests).arg(&n.group).arg("-").arg("+").arg(limit).query(con)?;
    let mut claimed = Vec::new();
    for p in pending.ids {
        claimed.push((p.id, p.consumer, p.last_delivered_ms as u64, p.times_delivered as u64));
    }
    let dead = bounded_range(con, &n.dead, ("XREVRANGE", "+", "-"), limit, &["message_id", "reason", "request"])?;
    Ok(Overview {
        queued: queued.into_iter().map(|(id, mut f)| (id, f.swap_remove(0))).collect(),
        claimed,
        dead: dead
            .into_iter()
            .map(|(_, mut f)| {
                let request = f.pop().flatten();
                let reason = f.pop().flatten().unwrap_or_default();
                (f.pop().flatten().unwrap_or_default(), reason, request)
            })
            .collect(),
    })
}

/// The request of message `id`, if the stream still holds it (and it is within its bound).
pub fn request_of(con: &mut Connection, n: &Names, id: &str) -> RedisResult<Option<String>> {
    let r = bounded_range(con, &n.requests, ("XRANGE", id, id), 1, &["request"])?;
    Ok(r.into_iter().next().and_then(|(_, mut f)| f.pop().flatten()))
}
