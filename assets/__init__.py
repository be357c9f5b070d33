"""Dagster layer: wires the core modules of pathrag_pipeline to storage, jobs, checks, sensors and schedules."""
