"""What the agent can do, and the machinery under it: ingestion, storage, search."""
