"""The sandbox: an application on top of the simulator for a developer's local app.

``hookproof sandbox`` (:mod:`.cli`) runs one :class:`~sender_sim.sandbox.engine.SandboxEngine`
(:mod:`.engine`: publish from templates, run deliveries live, toggle faults, DLQ and redrive) behind
two faces: the interactive terminal (:mod:`.terminal`) and the local web dashboard (:mod:`.web`).
Event templates are :mod:`.templates`. Nothing else in ``sender_sim`` imports this package.
"""
