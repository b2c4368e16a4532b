"""Problems to play: the seeded generator, the frozen splits and their difficulty labels, other Countdown
files, and the curriculum. The ``*.jsonl`` files beside these modules are the shipped splits."""
