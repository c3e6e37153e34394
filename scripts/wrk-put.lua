-- wrk script: every request PUTs a new ~300-byte document (a unique id per thread and request)
-- into the database named by WRK_DB (default "bench-put"). Used by scripts/bench-http-put.
local counter = 0
local thread_id = 0
local threads = {}
local db = os.getenv("WRK_DB") or "bench-put"
local body = '{"type":"note","title":"A note written by the HTTP benchmark","updated_by":"bench",' ..
  '"text":"' .. string.rep("lorem ipsum ", 19) .. '"}'

function setup(thread)
  thread:set("tid", thread_id)
  thread_id = thread_id + 1
  table.insert(threads, thread)
end

function init(args)
  prefix = string.format("t%d-%d-", tid, math.random(1, 1000000000))
  wrk.headers["Content-Type"] = "application/json"
  -- WRK_AUTH: an Authorization header value (a CouchDB whose databases are admins' only).
  local auth = os.getenv("WRK_AUTH")
  if auth then wrk.headers["Authorization"] = auth end
end

function request()
  counter = counter + 1
  return wrk.format("PUT", "/" .. db .. "/" .. prefix .. counter, nil, body)
end

-- Counts answers other than 201, so a run that refused writes is not mistaken for a fast one.
local refused = 0
function response(status, headers, body)
  if status ~= 201 then refused = refused + 1 end
end

function done(summary, latency, requests)
  io.write(string.format("wrk-put: requests=%d seconds=%.3f rate=%.1f p50_ms=%.2f p99_ms=%.2f errors=%d\n",
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write +
      summary.errors.timeout))
end
