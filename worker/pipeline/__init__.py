"""The retrieval pipeline: one module per stage, composed by the orchestrator."""
