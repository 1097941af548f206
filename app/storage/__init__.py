"""Encoded file -> storage: the local and S3 backends (:mod:`.backends`) and the expiry sweep (:mod:`.sweep`)."""
