"""The command line: the top of the pipeline. Only these modules parse options and print; each sub-app is its own
module so a command loads only what it drives."""
from .root import app, main

__all__ = ["app", "main"]
