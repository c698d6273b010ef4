"""The example pipeline under its first name, for workers started from a checkout with
``--pipeline examples.jsonl_pipeline:JsonlPipeline``; it lives in the package, importable
anywhere Tidemark is installed: ``streams.examples.jsonl_pipeline:JsonlPipeline``."""

from streams.examples.jsonl_pipeline import JsonlPipeline

__all__ = ["JsonlPipeline"]
