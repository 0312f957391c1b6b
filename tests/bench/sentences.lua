-- wrk script: POST /attention with a different nine-word sentence in every
-- request (8 heads, d_model 64, the weights as JSON), so that no cache of
-- whole answers could serve them; prints one RESULT line when done.
-- With the argument "seed" (wrk ... -- seed) every request has a seed of
-- its own too, below 2^53, so that nothing drawn from a seed (parameters,
-- token embeddings) can come from the server's cache either.
local words = {
  "the", "cat", "sat", "on", "mat", "a", "dog", "ran", "after", "it",
  "because", "was", "tired", "bank", "river", "money", "walked", "to",
  "store", "bought", "milk", "she", "he", "they", "saw", "bird", "flew",
  "over", "house", "garden", "quick", "brown", "fox", "jumps", "lazy", "old",
  "man", "sea", "light", "dark", "night", "day", "sun", "moon", "star",
  "tree", "green", "blue", "red", "book", "read", "wrote", "letter",
  "friend", "city", "road", "car", "train", "rain", "snow", "cold", "warm",
  "time", "work",
}
local counter = 0
local seeded = false
local head -- the request line and headers, up to Content-Length's value

function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
end

function init(args)
  math.randomseed(os.time() * 1000 + (id or 0))
  for _, a in ipairs(args) do
    if a == "seed" then seeded = true end
  end
  -- what wrk.format() would write, formatted once: the load generator
  -- shares the cores with the servers, and its work is not theirs
  head = "POST /attention HTTP/1.1\r\nHost: " .. wrk.headers["Host"] ..
      "\r\nContent-Type: application/json\r\nContent-Length: "
end

local n = #words
local random = math.random

function request()
  local seed = ""
  if seeded then
    seed = string.format(',"seed":%.0f',
      random(0, 2147483647) * 4194304 + random(0, 4194303))
  end
  local body = string.format(
    '{"sentence":"%s %s %s %s %s %s %s %s %s"%s,"heads":8,"d_model":64,' ..
    '"return":["weights"]}',
    words[random(n)], words[random(n)], words[random(n)], words[random(n)],
    words[random(n)], words[random(n)], words[random(n)], words[random(n)],
    words[random(n)], seed)
  return head .. #body .. "\r\n\r\n" .. body
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %.1f %.3f %d %.3f\n", summary.requests,
    summary.requests / (summary.duration / 1e6),
    latency:percentile(99) / 1000,
    e.connect + e.read + e.write + e.status + e.timeout,
    latency:percentile(50) / 1000))
end
