"""The terminal agent: one episode loop for every policy (chat model, oracle, no-op)."""
