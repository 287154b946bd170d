"""The seed's ``mocking_classes`` module: the mock envs and policies, from ``rlmocks``."""

from rlmocks import *  # noqa: F401,F403  (the seed imports each name from this module)
from rlmocks import __all__  # noqa: F401
