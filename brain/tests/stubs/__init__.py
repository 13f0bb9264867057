"""Stand-ins for the outside HTTP services brain talks to, on loopback, for tests and the
benchmarks: the Anthropic Messages API (``messages``) and a local model (``local_model``), both
built on ``loopback``. Nothing the running product imports is here."""
