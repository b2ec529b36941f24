"""One client for every OpenAI-compatible endpoint (OpenAI, vLLM, SGLang, Ollama, llama.cpp,
transformers serve).

Only what their chat-completions APIs share is used: `model`, `messages`, `temperature`,
`max_tokens`, `seed`. How many requests an endpoint gets at once is learned from how it answers,
per endpoint and process (pacing.py: AIMD on latency, timeouts and overload); retries back off, and
a request abandoned on a timeout keeps its slot while the server may still compute it. Errors keep
the server's own message whatever the shape of its body (errors.py); a template that refuses the
system role is detected once and worked around (system_role.py); the model name is checked
against the endpoint's `/v1/models` before anything runs (preflight.py). An on-disk reply cache is
keyed by a hash of (model, messages, sampling parameters, seed); token usage comes with every
reply. API keys are read from the environment when a client is made and are never stored, logged
or cached.
"""
