"""Character + motion -> frames -> encoded file: the request pipeline (:mod:`.pipeline`), the steps run inside the
render processes (:mod:`.steps`), the process pool and render slots (:mod:`.pool`), deadlines (:mod:`.deadline`) and
the motion library (:mod:`.motions`)."""
