"""The language-model family: the embedded tiny LM, generation, GRPO's configuration, data, model and
rewards, step credit, callbacks and run card; the scripts ``baselines/llm_*.py`` run them."""
