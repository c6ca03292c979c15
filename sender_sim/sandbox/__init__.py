"""The sandbox: an application on top of the simulator for a developer's local app.

``hookproof sandbox`` (:mod:`.cli`) runs one :class:`~sender_sim.sandbox.engine.SandboxEngine`
(:mod:`.engine`: publish from templates, run deliveries live, toggle faults, DLQ, redrive and
resend) behind two faces: the interactive terminal (:mod:`.terminal`) and the local web dashboard
(:mod:`.web` with :mod:`.api`, :mod:`.views`, :mod:`.security`, :mod:`.chart` and
:mod:`.wiretap`). Event templates are :mod:`.templates`; :mod:`.queries` re-exports the
simulator's own rows, filters, CSV export and resend types (nothing re-implemented, so the sandbox
and the CLI share them). Nothing else in ``sender_sim`` imports this package.
"""
