"""Motions: the library a pod ships (:mod:`.library`), the motions clients make from their videos
(:mod:`.own`), and each library motion's preview on the reference character (:mod:`.previews`).

It imports no other room's code, only the shared modules and the animator; the previews are
rendered through the pipeline and the render task that the services hand in.
"""
