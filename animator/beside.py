"""Work run in a second thread beside the caller's, where it releases Python's lock (a compiled
kernel, a BLAS product, Pillow's quantiser): the two then share the CPUs.

Only where a caller was given more than one thread (``threads`` > 1 in
:class:`animator.RenderOptions`); the app's render processes run one thread each and do the same
work in line. The result is the same either way.
"""
from __future__ import annotations

import threading
from typing import Any, Callable


class Beside:
    """``fn(*args)`` run in a thread of its own from now on; :meth:`result` waits for it and gives
    its value, or raises what it raised."""

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, args), name=f"beside-{fn.__name__}",
                                        daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[..., Any], args: tuple) -> None:
        try:
            self._value = fn(*args)
        except BaseException as exc:  # handed to the caller by result()
            self._error = exc

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value
