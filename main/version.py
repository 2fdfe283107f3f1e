"""The running build's version."""

from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("strata")
except PackageNotFoundError:  # running from a source tree that is not installed
    VERSION = "0.0.0+source"

NAME = "strata"
