"""countdown-gym's OpenEnv server entry point (:mod:`server.app`)."""
