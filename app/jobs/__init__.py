"""Async jobs beside the request path: the Redis queue (:mod:`.queue`), the render worker (:mod:`.worker`,
``python -m app.jobs.worker``), webhooks, idempotency keys and rate limits."""
