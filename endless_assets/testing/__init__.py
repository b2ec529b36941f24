"""Test doubles, kept apart from the pipeline: a scripted OpenAI-compatible HTTP server and a
scripted task model that answers the generator's prompts. Used by the tests and the benchmarks
(a real HTTP round trip without a model); nothing in the pipeline imports them."""
