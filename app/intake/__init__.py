"""What a client sends, read and bounded before any work starts: the body (:mod:`.body`), each route's
request model (:mod:`.models`, of the field types in :mod:`.shapes`) read by one adapter
(:mod:`.read`), the motions named (:mod:`.motions`), BVH clips (:mod:`.bvh`) and videos (:mod:`.video`)."""
