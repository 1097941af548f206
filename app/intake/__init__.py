"""What a client sends, read and bounded before any work starts: the body (:mod:`.body`) and BVH uploads
(:mod:`.bvh`)."""
