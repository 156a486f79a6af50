"""`kbbot eval`: the benchmark harness (retrieval, routing, abstention, multi-turn) and its metrics."""
