"""Photo -> character: the character resource (:mod:`.resource`) and the model server that finds the drawing and its
skeleton (:mod:`.torchserve`)."""
