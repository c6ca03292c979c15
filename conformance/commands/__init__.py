"""The conformance runner's commands, one module per command name: ``hookproof check``
(:mod:`.check`), ``hookproof scenarios`` (:mod:`.scenarios`) and ``hookproof demo``
(:mod:`.demo`). The root group that maps every name to its module is :mod:`conformance.cli`.
"""
