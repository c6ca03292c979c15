"""The harnesses: what turns one scenario into one verdict, by where the scenario runs.

- :mod:`~conformance.harnesses.http` — the HTTP harness (R: the reference app in process, C: any
  URL over real HTTP); :mod:`~conformance.harnesses.wire_steps` its wire-level steps.
- :mod:`~conformance.harnesses.simulated` — the simulated harness (S): the sender simulator on a
  virtual clock against :mod:`~conformance.harnesses.scripted_receiver`, a stand-in receiver that
  answers as each scenario scripts it.
- :mod:`~conformance.harnesses.sender_steps` — the sender-level steps, performed by the sender
  simulator for every harness.
- :mod:`~conformance.harnesses.state` — the per-scenario state they share (options, events,
  exchanges, signing and sending).
- :mod:`~conformance.harnesses.signed_requests` — the requests on the wire: signed, mutated,
  redacted, rendered as ``curl``; :mod:`~conformance.harnesses.exchanges` — a request and what
  came back.

This package imports none of its modules eagerly.
"""
