"""The three pipelines (store, recall, consolidate), their stages and their shared context."""
