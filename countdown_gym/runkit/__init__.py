"""The run kit of the training scripts (``baselines/``, ``critics/``): run directories, resume checks and
saved options (:mod:`.runs`), files written together (:mod:`.together`) and metric tracking (:mod:`.tracking`)."""
