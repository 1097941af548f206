"""Async jobs beside the request path, as a library: the Redis queue (:mod:`.queue`), the retry rule, webhooks
and the addresses they may reach, idempotency keys and rate limits. The render worker that runs the jobs is
a composition root beside the services (:mod:`app.worker`, ``python -m app.worker``)."""
