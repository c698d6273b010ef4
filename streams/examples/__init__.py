"""Example pipelines, shipped with the package so that a worker anywhere can run them:

    tidemark worker --pipeline streams.examples.jsonl_pipeline:JsonlPipeline

Their tests (tests/examples/) use the test kit, ``streams.testing``, as a pipeline's own should.
"""
