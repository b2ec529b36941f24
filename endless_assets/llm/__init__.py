"""One client for every OpenAI-compatible endpoint (OpenAI, vLLM, SGLang, Ollama, llama.cpp).

Only what their chat-completions APIs share is used: `model`, `messages`, `temperature`,
`max_tokens`, `seed`. Retries with exponential backoff on 429, 5xx, timeouts and connection
errors; a cap on requests in flight; an on-disk reply cache keyed by a hash of (model, messages,
sampling parameters, seed); token usage on every reply. API keys are read from the environment
when a client is made and are never stored, logged or cached.
"""
