"""CAIM (arXiv 2505.13044): memory controller, tag/time-filtered retrieval with a relevance filter, post-thinking."""
