"""Dagster layer: wires the core modules of pathrag_pipeline to storage, partitions, sensors and schedules."""
