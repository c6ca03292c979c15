"""The sandbox: an application on top of the simulator for a developer's local app.

``hookproof sandbox`` (:mod:`.cli`) runs one :class:`~sender_sim.sandbox.engine.SandboxEngine`
(:mod:`.engine`: publish from templates, run deliveries live, toggle faults, DLQ, redrive and
resend) behind two faces: the interactive terminal (:mod:`.terminal`) and the local web dashboard
(:mod:`.web` with :mod:`.api`, :mod:`.views`, :mod:`.security`, :mod:`.chart` and
:mod:`.wiretap`). Event templates are :mod:`.templates`; :mod:`.queries` is the one adapter to the
simulator's rows, CSV export and resend. Nothing else in ``sender_sim`` imports this package.
"""
