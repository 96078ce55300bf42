"""Fakes of the outside servers Ferret talks to, speaking real HTTP on loopback
and behaving as the real ones do (as httpx ships ``MockTransport``): a Nous
server and an OpenAI-compatible chat endpoint. Used by the tests and by the
benchmarks; never by a running worker."""
