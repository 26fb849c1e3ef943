-- wrk script for scripts/bench/serve_load.sh: each request POSTs one source sentence (cycling through the file
-- named by MTX_LOAD_SENTENCES, each wrk thread from its own offset) to /v1/translate, with "beam" when
-- MTX_LOAD_BEAM is set. MTX_LOAD_CLOSE=1: each request asks for "Connection: close", so that every request is a
-- new connection (one-shot clients, as curl in a loop; wrk reconnects after each answer). MTX_LOAD_LIMIT=N: each
-- wrk thread stops sending after N answers and creates the file MTX_LOAD_DONE (wrk itself runs on until its -d
-- or a SIGINT, which serve_load.sh sends once the file is there).
local sentences = {}
local counter = 0
local beam = os.getenv("MTX_LOAD_BEAM") or ""
local headers = {["Content-Type"] = "application/json"}
if os.getenv("MTX_LOAD_CLOSE") == "1" then headers["Connection"] = "close" end

local function json_string(s)
  s = s:gsub('\\', '\\\\'):gsub('"', '\\"'):gsub('\t', '\\t')
  return '"' .. s .. '"'
end

for line in io.lines(os.getenv("MTX_LOAD_SENTENCES")) do
  if line ~= "" then sentences[#sentences + 1] = line end
end

function setup(thread)
  thread:set("offset", counter * 7919)
  counter = counter + 1
end

local limit = tonumber(os.getenv("MTX_LOAD_LIMIT") or "0")

function init(args)
  i = offset or 0
  answered = 0
end

if limit > 0 then
  function response(status, headers, body)
    answered = answered + 1
    if answered == limit then
      local done_file = os.getenv("MTX_LOAD_DONE")
      if done_file then io.open(done_file, "w"):close() end
      wrk.thread:stop()
    end
  end
end

function request()
  i = i + 1
  local body = '{"text": ' .. json_string(sentences[(i % #sentences) + 1]) ..
               (beam ~= "" and (', "beam": ' .. beam) or "") .. '}'
  return wrk.format("POST", "/v1/translate", headers, body)
end

function done(summary, latency, requests)
  io.write(string.format("MTXLOAD requests=%d seconds=%.3f errors=%d non2xx=%d p50_ms=%.2f p99_ms=%.2f\n",
    summary.requests, summary.duration / 1e6,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status, latency:percentile(50) / 1e3, latency:percentile(99) / 1e3))
end
