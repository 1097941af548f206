"""What the tests (and bench/) share: the real neighbours they run (:mod:`.stack`: TorchServe with the fake
models, moto's S3, gunicorn; :mod:`.jobstack`: Redis and render workers), process scans (:mod:`.procs`),
the answer checks (:mod:`.answers`) and waiting on something observable (:mod:`.wait`). Import by package:
``from tests.support import stack``."""
