"""Tests of the Langfuse connector (mapping, source, sink, review) against the fake server."""
