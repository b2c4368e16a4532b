"""The run kit of the training scripts (``baselines/``, ``critics/``): run directories, resume checks and
saved options (:mod:`.runs`) and metric tracking (:mod:`.tracking`)."""
