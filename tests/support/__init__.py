"""What the tests share and are not tests themselves: the fake Langfuse and OpenAI servers (`fakes/`),
the sidecar in a subprocess, OTLP payload builders, the chaos harness, PostgreSQL replicas, the
scripted judge, the Langfuse worker harness, the command-line checker for docs and the simulate bots.
"""
