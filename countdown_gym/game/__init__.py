"""The game: rules and exact arithmetic, expressions, problems, the solver, the verifier, search traces,
and the text and turn formats a language model reads and writes. Imports nothing else of the package."""
