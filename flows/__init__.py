"""Prefect orchestration of the DVC pipeline: the nightly flow (pipeline, nightly), its report and scale-out (shard)."""
