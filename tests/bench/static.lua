-- wrk script: GET the static file, printing the same RESULT line as
-- sentences.lua.
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %.1f %.3f %d %.3f\n", summary.requests,
    summary.requests / (summary.duration / 1e6),
    latency:percentile(99) / 1000,
    e.connect + e.read + e.write + e.status + e.timeout,
    latency:percentile(50) / 1000))
end
