"""The three pipelines (store, recall, consolidate), their runner and their shared context."""
