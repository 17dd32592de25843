"""Node functions of the pipelines, one module per step family."""
