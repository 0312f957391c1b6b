-- wrk script: POST /attention with a different nine-word sentence in every
-- request (8 heads, d_model 64, the weights as JSON), so that no cache of
-- whole answers could serve them; prints one RESULT line when done.
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
local headers = { ["Content-Type"] = "application/json" }
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
end

function init(args)
  math.randomseed(os.time() * 1000 + (id or 0))
end

function request()
  local t = {}
  for i = 1, 9 do
    t[i] = words[math.random(#words)]
  end
  local body = '{"sentence":"' .. table.concat(t, " ") ..
      '","heads":8,"d_model":64,"return":["weights"]}'
  return wrk.format("POST", "/attention", headers, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %.1f %.3f %d\n", summary.requests,
    summary.requests / (summary.duration / 1e6),
    latency:percentile(99) / 1000,
    e.connect + e.read + e.write + e.status + e.timeout))
end
